import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore
import GeofenceTestSupport
import Testing

/// A running engine follows the store's region changes: single additions and removals, and an import logged
/// as one range. A real store; the pipeline is the daemon's.
@Suite struct RegionFollowingTests {
    static func region(_ i: Int, dwell: Double? = nil) throws -> Region {
        try Region(
            id: "imp\(i)", name: dwell == nil ? nil : "named \(i)",
            center: Coordinate(latitude: 40 + Double(i % 100) * 0.01, longitude: 2 + Double(i / 100) * 0.01),
            radius: 200, dwell: dwell)
    }

    @Test func anImportIsOneChangeAndTheEngineTakesEveryRegionOfIt() throws {
        let dir = try TemporaryDirectory("geofence-following")
        defer { dir.remove() }
        let store = try StateStore(directory: dir.file("state"))
        try store.regions.add(Region(id: "first", center: Coordinate(latitude: 10, longitude: 10), radius: 100))
        let pipeline = FixPipeline(store: store)
        try pipeline.load()
        #expect(pipeline.monitor.regionCount == 1)
        let before = try store.regions.generation()

        // 50,000 regions (a few full ones: names and dwell), one removed again, one added alone: four changes.
        let regions = try (0..<50_000).map { try Self.region($0, dwell: $0 % 9_999 == 0 ? 30 : nil) }
        try store.regions.addAll(regions)
        #expect(try store.regions.remove(id: "imp7"))
        try store.regions.add(Region(id: "late", center: Coordinate(latitude: -10, longitude: 10), radius: 100))
        let (latest, changes) = try store.regions.changes(after: before)
        #expect(changes.count == 3, "one range, one deletion, one insertion: \(changes)")
        #expect(changes.first.map { $0.lastSeq - $0.seq + 1 } == 50_000)
        #expect(changes.map(\.inserted) == [true, false, true])

        #expect(try pipeline.syncRegions() > 0)
        #expect(pipeline.generation == latest)
        let stored = Set(try store.regions.all().map(\.seq))
        #expect(pipeline.monitor.regionSeqs == stored, "the monitor holds exactly the store's regions")
        #expect(pipeline.monitor.regionCount == 50_001)
        #expect(pipeline.monitor.region(id: "imp7") == nil)
        #expect(pipeline.monitor.region(id: "imp9999")?.dwell == 30, "a full definition came through whole")
        #expect(pipeline.monitor.region(id: "late") != nil)
        // Taken, with the next commit: none of them waits for the engine any more.
        try pipeline.flush()
        #expect(try store.regions.countsByStatus() == ["monitoring": 50_001])
        #expect(try pipeline.syncRegions() == 0, "nothing new")
        // What it followed is forgotten; the latest change stays, and later ones are still followed.
        #expect(try store.regions.changeCount() == 1)
        #expect(try store.regions.generation() == latest)
        try store.regions.add(Region(id: "later", center: Coordinate(latitude: -20, longitude: 10), radius: 100))
        #expect(try pipeline.syncRegions() == 1)
        #expect(pipeline.monitor.region(id: "later") != nil)
        #expect(try store.regions.changeCount() == 1)
    }

    @Test func aLongHistoryOfChangesIsForgottenInBatches() throws {
        let dir = try TemporaryDirectory("geofence-following")
        defer { dir.remove() }
        let store = try StateStore(directory: dir.file("state"))
        // 600 single changes before the engine starts (as an older store, or a busy CLI, leaves them).
        for i in 0..<300 {
            try store.regions.add(Self.region(i))
            #expect(try store.regions.remove(id: "imp\(i)"))
        }
        #expect(try store.regions.changeCount() == 600)
        let pipeline = FixPipeline(store: store)
        pipeline.pruneBatch = 500
        try pipeline.load()
        #expect(try pipeline.syncRegions() == 0)
        #expect(try store.regions.changeCount() == 100, "one batch at a time")
        #expect(try pipeline.syncRegions() == 0)
        #expect(try store.regions.changeCount() == 1)
        // Nothing the engine has not followed is ever forgotten.
        try store.regions.add(Region(id: "new", center: Coordinate(latitude: 1, longitude: 1), radius: 100))
        #expect(try store.regions.pruneChanges(before: pipeline.generation) == 0)
        #expect(try pipeline.syncRegions() == 1)
        #expect(pipeline.monitor.region(id: "new") != nil)
    }
}
