import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Glibc
import Testing

private func withStore(_ body: (String, StateStore) throws -> Void) throws {
    try withTemporaryDirectory("geofence-polygon-tests") { directory in
        try body(directory.path, try StateStore(directory: directory.path))
    }
}

/// A square with a square hole, and a second part: every position an awkward double.
private func polygon() throws -> RegionPolygon {
    func c(_ lat: Double, _ lon: Double) -> Coordinate { Coordinate(latitude: lat, longitude: lon) }
    let outer = [c(0.1, 0.1), c(0.1, 0.2), c(0.2, 0.2), c(0.2, 0.1), c(0.1, 0.1)]
    let hole = [c(0.12, 0.12), c(0.18, 0.12), c(0.18, 0.18), c(0.12, 0.18), c(0.12, 0.12)]
    let part = [c(0.3, 0.3), c(0.3, 1 / 3.0), c(1 / 3.0, 1 / 3.0), c(0.3, 0.3)]
    return try RegionPolygon(parts: [[outer, hole], [part]])
}

@Suite struct PolygonStoreTests {
    @Test func polygonRegionsRoundTripExactly() throws {
        try withStore { _, store in
            let region = try Region(id: "yard", name: "Yard", polygon: polygon(), dwell: 30)
            try store.regions.add(region)
            try store.regions.add(try Region(id: "circle", center: Coordinate(latitude: 1, longitude: 2), radius: 50))
            let back = try #require(try store.regions.find(id: "yard")).region
            #expect(back.polygon == region.polygon)
            #expect(back.polygon?.parts == region.polygon?.parts)
            #expect(back.center == region.center && back.radius == region.radius)
            #expect(try store.regions.find(id: "circle")?.region.polygon == nil)
            // What the engine loads: the polygon in full, the circle compact.
            let loaded = try store.regions.monitoringSnapshot(upTo: 10)
            #expect(loaded.count == 2)
            #expect(
                loaded.contains { if case .full(let r) = $0.definition { r.polygon == region.polygon } else { false } })
        }
    }

    @Test func aStoreFromBeforePolygonsOpensWithItsCircles() throws {
        try withStore { directory, store in
            try store.regions.add(try Region(id: "old", center: Coordinate(latitude: 1, longitude: 2), radius: 50))
            // Back to the schema before migration 005, as an older engine left it.
            try store.queue.write { db in
                try db.execute("ALTER TABLE regions DROP COLUMN polygon")
                try db.execute("DELETE FROM schema_migrations WHERE identifier = '005-region-polygons'")
            }
            let reopened = try StateStore(directory: directory)
            let old = try #require(try reopened.regions.find(id: "old")).region
            #expect(old.polygon == nil && old.radius == 50)
            try reopened.regions.add(try Region(id: "new", polygon: polygon()))
            #expect(try reopened.regions.find(id: "new")?.region.polygon == (try polygon()))
        }
    }

    @Test func theStoreLimitsItsPolygonsPositionsAndABreachChangesNothing() throws {
        try withStore { _, store in
            // 14 positions a polygon (the closing ones included) and its header: 15.6 positions' worth; room for two.
            try store.queue.write { db in
                try db.execute(
                    "INSERT INTO settings (key, value, updated_at) VALUES (?, '31', 0)",
                    [RegionRepository.polygonPositionsKey])
            }
            try store.regions.add(try Region(id: "a", polygon: polygon()))
            try store.regions.add(try Region(id: "b", polygon: polygon()))
            #expect(throws: StoreError.tooManyPolygonPositions(46, limit: 31)) {
                try store.regions.add(try Region(id: "c", polygon: polygon()))
            }
            #expect(throws: StoreError.tooManyPolygonPositions(46, limit: 31)) {
                try store.regions.addAll([try Region(id: "d", polygon: polygon())])
            }
            // Circles are not counted; replacing a polygon by itself keeps the total.
            try store.regions.add(try Region(id: "e", center: Coordinate(latitude: 1, longitude: 2), radius: 50))
            try store.regions.add(try Region(id: "a", polygon: polygon()), replace: true)
            #expect(try store.regions.all().map(\.region.id) == ["b", "e", "a"])
        }
    }

    @Test func encodingRefusesTruncatedBytes() throws {
        let bytes = try polygon().encoded
        #expect(RegionPolygon.decodeParts(bytes) == (try polygon()).parts)
        #expect(RegionPolygon.decodeParts(Array(bytes.dropLast())) == nil)
        #expect(RegionPolygon.decodeParts([2] + bytes.dropFirst()) == nil)
        #expect(bytes.count == 1 + 4 + 4 + 8 + 4 + 4 + 14 * 16)
    }
}
