import Foundation
import GeofenceCore

/// A vehicle as a Home Assistant device tracker shows it: its last fix and the regions it is inside.
package struct TrackedVehicle: Sendable, Equatable {
    package var subject: String
    package var lastFix: EventFix?
    /// The regions it is inside: each region's seq and since when (the fix time of the change), in seq order.
    package var inside: [(seq: Int64, since: Date?)]

    package static func == (a: TrackedVehicle, b: TrackedVehicle) -> Bool {
        a.subject == b.subject && a.lastFix == b.lastFix
            && a.inside.elementsEqual(b.inside) { $0.seq == $1.seq && $0.since == $1.since }
    }
}

extension MonitorStateRepository {
    /// The vehicles named in `subjects` that the store knows (nil: every vehicle), with their last fix and
    /// the regions they are inside.
    package func trackedVehicles(_ subjects: [String]? = nil) throws -> [TrackedVehicle] {
        try queue.read { db in
            var all: [TrackedVehicle] = []
            var index: [String: Int] = [:]
            func take(_ row: Statement) throws {
                let subject = try row.string("subject")
                if index[subject] == nil {
                    index[subject] = all.count
                    all.append(
                        TrackedVehicle(
                            subject: subject, lastFix: Self.eventFix(try row.optionalString("last_fix")), inside: []))
                }
                if let seq = try row.optionalInt64("region_seq"), let i = index[subject] {
                    all[i].inside.append((seq, try row.optionalDate("since")))
                }
            }
            let sql = """
                SELECT s.subject, s.last_fix, rs.region_seq, rs.since FROM subjects s
                LEFT JOIN region_states rs ON rs.subject = s.subject AND rs.state = 'inside'
                """
            if let subjects {
                for subject in Set(subjects).sorted() {
                    try db.forEachRow(sql + " WHERE s.subject = ? ORDER BY rs.region_seq", [subject]) { try take($0) }
                }
            } else {
                try db.forEachRow(sql + " ORDER BY s.subject, rs.region_seq") { try take($0) }
            }
            return all
        }
    }

    /// What changes when a region is added, removed or replaced (a new name replaces it), or a vehicle appears or is pruned: a Home
    /// Assistant sink looks at it every second and compares every tracker again when it moved.
    package func trackerFingerprint() throws -> String {
        try queue.read { db in
            let generation =
                try db.scalar("SELECT coalesce(max(generation), 0) FROM region_changes", as: Int64.self) ?? 0
            let subjects = try db.scalar("SELECT count(*) FROM subjects", as: Int64.self) ?? 0
            return "\(generation)/\(subjects)"
        }
    }
}
