import Foundation
import GeofenceCore

/// What one OwnTracks waypoints message changed: region ids added, changed and removed, and how many of its
/// waypoints were already stored as they are.
package struct WaypointChanges: Sendable, Equatable {
    package var added: [String] = []
    package var changed: [String] = []
    package var removed: [String] = []
    package var unchanged = 0

    package init() {}

    /// `1 added ("owntracks/alice/phone/1796000000"), 0 changed, 0 removed, 2 unchanged`.
    package var summary: String {
        func part(_ ids: [String], _ word: String) -> String {
            let shown = ids.prefix(5).map { JSONValue.string($0).serialized() }.joined(separator: ", ")
            return "\(ids.count) \(word)" + (ids.isEmpty ? "" : " (\(shown)\(ids.count > 5 ? ", ..." : ""))")
        }
        return [part(added, "added"), part(changed, "changed"), part(removed, "removed"), "\(unchanged) unchanged"]
            .joined(separator: ", ")
    }
}

extension RegionRepository {
    /// Applies one vehicle's waypoints message (`OwnTracksWaypoints.Update`) in one transaction: a region
    /// defined is added, or replaced when it differs from the stored one (its states then start over), and
    /// left alone when it is the same (a phone sending its list again changes nothing); a removal deletes its
    /// region if there is one; and a whole list (`wholeList`) also removes the vehicle's waypoint regions
    /// (`OwnTracksWaypoints.idPrefix(subject:)`) it does not name. The engine follows the changes as it
    /// follows the CLI's.
    package func applyWaypoints(_ update: OwnTracksWaypoints.Update, now: Date = Date()) throws -> WaypointChanges {
        try queue.write { db in
            var changes = WaypointChanges()
            for entry in update.entries {
                switch entry {
                case .define(let region):
                    if let stored = try Self.find(id: region.id, db: db) {
                        if RegionJSON.encode(stored.region) == RegionJSON.encode(region) {
                            changes.unchanged += 1
                            continue
                        }
                        try Self.insert(region, replace: true, now: now, db: db)
                        changes.changed.append(region.id)
                    } else {
                        try Self.insert(region, replace: false, now: now, db: db)
                        changes.added.append(region.id)
                    }
                case .remove(let id, _):
                    if try Self.deleteRegion(id: id, db: db) { changes.removed.append(id) }
                }
            }
            if update.wholeList {
                let prefix = OwnTracksWaypoints.idPrefix(subject: update.subject)
                let named = Set(update.entries.map(\.regionID))
                // The ids that start with the prefix, read from the id's index: those from `owntracks/a/b/` up
                // to `owntracks/a/b0` (`0` follows `/`; ids compare as their UTF-8 bytes).
                let end = String(prefix.dropLast()) + "0"
                var others: [String] = []
                try db.forEachRow("SELECT id FROM regions WHERE id >= ? AND id < ?", [prefix, end]) {
                    others.append(try $0.string("id"))
                }
                for id in others where !named.contains(id) {
                    // Only a waypoint's own id: `owntracks/alice/phone/123`, not `owntracks/alice/phone/x/123`.
                    guard OwnTracksWaypoints.creationTime(regionID: id) != nil,
                        !id.dropFirst(prefix.count).contains("/")
                    else { continue }
                    if try Self.deleteRegion(id: id, db: db) { changes.removed.append(id) }
                }
            }
            return changes
        }
    }
}
