import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

/// A phone's waypoints applied to a real SQLite store: added, replaced only when they differ, removed when
/// marked or left out of the phone's whole list, and never another vehicle's or another kind of region.
@Suite("OwnTracks waypoints in the store")
struct WaypointStoreTests {
    static let now = Date(timeIntervalSince1970: 1_796_000_000)

    static func update(_ text: String, subject: String = "alice/phone") throws -> OwnTracksWaypoints.Update {
        try OwnTracksWaypoints.decodeMessage(try JSON.parse(Array(text.utf8)), subject: subject, now: now)
    }

    static func waypoint(_ tst: Int, rad: Double = 100, lat: Double = 51.5) -> String {
        #"{"_type":"waypoint","desc":"w\#(tst)","lat":\#(lat),"lon":-0.12,"rad":\#(rad),"tst":\#(tst)}"#
    }

    static func list(_ entries: [String]) -> String {
        #"{"_type":"waypoints","waypoints":[\#(entries.joined(separator: ","))]}"#
    }

    @Test("added, unchanged, changed, removed by list and by mark; other vehicles and regions kept")
    func apply() throws {
        try withTemporaryDirectory("geofence-waypoint-tests") { directory in
            let store = try StateStore(directory: directory.path)
            let regions = store.regions
            // Not the phone's: a hand-made region, bob's waypoint, and ids that only look alike.
            try regions.add(try Region(id: "depot", center: Coordinate(latitude: 1, longitude: 1), radius: 50))
            for id in ["owntracks/alice/phone/x/1", "owntracks/alice/phone0/1", "owntracks/alice/phone/home"] {
                try regions.add(try Region(id: id, center: Coordinate(latitude: 1, longitude: 1), radius: 50))
            }
            _ = try regions.applyWaypoints(try Self.update(Self.waypoint(1), subject: "bob/phone"))

            var changes = try regions.applyWaypoints(
                try Self.update(Self.list([Self.waypoint(1), Self.waypoint(2)])))
            #expect(changes.added == ["owntracks/alice/phone/1", "owntracks/alice/phone/2"])
            #expect(changes.changed.isEmpty && changes.removed.isEmpty && changes.unchanged == 0)
            let seq = try #require(try regions.find(id: "owntracks/alice/phone/1")).seq

            // The same list again changes nothing (the regions keep their seq, so their states).
            changes = try regions.applyWaypoints(
                try Self.update(Self.list([Self.waypoint(1), Self.waypoint(2)])))
            #expect(changes.unchanged == 2 && changes.added.isEmpty && changes.changed.isEmpty, "\(changes)")
            #expect(try regions.find(id: "owntracks/alice/phone/1")?.seq == seq)

            // One edited on the phone: replaced.
            changes = try regions.applyWaypoints(try Self.update(Self.waypoint(1, rad: 300)))
            #expect(changes.changed == ["owntracks/alice/phone/1"], "\(changes)")
            #expect(try regions.find(id: "owntracks/alice/phone/1")?.region.radius == 300)

            // The whole list without 1: 1 removed, 3 added.
            changes = try regions.applyWaypoints(
                try Self.update(Self.list([Self.waypoint(2), Self.waypoint(3)])))
            #expect(changes.removed == ["owntracks/alice/phone/1"] && changes.added == ["owntracks/alice/phone/3"])

            // Marked deleted, and without a geofence: removed; a removal of nothing is no change.
            changes = try regions.applyWaypoints(try Self.update(Self.waypoint(2, lat: 999)))
            #expect(changes.removed == ["owntracks/alice/phone/2"])
            changes = try regions.applyWaypoints(try Self.update(Self.waypoint(3, rad: 0)))
            #expect(changes.removed == ["owntracks/alice/phone/3"])
            changes = try regions.applyWaypoints(try Self.update(Self.waypoint(3, rad: 0)))
            #expect(changes == WaypointChanges())

            // An empty list leaves the phone nothing, and everyone else everything.
            _ = try regions.applyWaypoints(try Self.update(Self.list([Self.waypoint(4)])))
            changes = try regions.applyWaypoints(try Self.update(Self.list([])))
            #expect(changes.removed == ["owntracks/alice/phone/4"])
            #expect(
                Set(try regions.all().map(\.region.id)) == [
                    "depot", "owntracks/alice/phone/x/1", "owntracks/alice/phone0/1", "owntracks/alice/phone/home",
                    "owntracks/bob/phone/1",
                ])
            #expect(try regions.find(id: "owntracks/bob/phone/1")?.region.subjects == ["bob/phone"])
        }
    }
}
