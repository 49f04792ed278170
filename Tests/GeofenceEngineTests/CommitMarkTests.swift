import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore
import GeofenceTestSupport
import Testing

/// `FixPipeline.committedThrough`: how far the fixes offered are committed or need no commit, which an MQTT
/// source acknowledging after commit tells its broker. A real store; the monotonic clock is the test's.
@Suite struct CommitMarkTests {
    let depot = Coordinate(latitude: 45.76, longitude: 4.84)
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    /// Seconds on a monotonic clock the test moves.
    final class Uptime: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 1_000.0
        var seconds: Double { lock.withLock { value } }
        func advance(_ by: Double) { lock.withLock { value += by } }
    }

    /// A fix 2 km north of the depot (far from its region: bookkeeping only), `accuracy` nil: incomplete,
    /// held by the epoch assembler for the rest of its epoch.
    private func fix(_ subject: String, second: Int, accuracy: Double? = 5, north: Double = 2_000) -> Fix {
        let p = offset(depot, north: north + Double(second), east: 0)
        return Fix(
            subject: subject, time: start.addingTimeInterval(Double(second)), mode: .threeD, latitude: p.latitude,
            longitude: p.longitude, horizontalAccuracy: accuracy)
    }

    private func pipeline(_ dir: TemporaryDirectory, uptime: Uptime) throws -> FixPipeline {
        let store = try StateStore(directory: dir.file("state"), options: .init(busyTimeout: .milliseconds(20)))
        try store.regions.add(Region(id: "depot", center: depot, radius: 100))
        let pipeline = FixPipeline(store: store, monotonic: { uptime.seconds })
        try pipeline.load()
        return pipeline
    }

    @Test func bookkeepingHoldsTheMarkUntilItsCommitAndABatchMovesIt() throws {
        let dir = try TemporaryDirectory("geofence-mark")
        defer { dir.remove() }
        let uptime = Uptime()
        let p = try pipeline(dir, uptime: uptime)
        for s in 0..<10 { _ = try p.process(fix("van", second: s)) }
        #expect(p.offered == 10)
        #expect(p.holdsMark, "accepted fixes wait for the next batch of bookkeeping")
        #expect(p.committedThrough == 0)
        try p.flush()
        #expect(p.committedThrough == 10)
        #expect(!p.holdsMark)

        // A batch: the 512th fix queued commits the batch by itself; those after it wait for the next.
        p.batchSize = 512
        for s in 10..<600 { _ = try p.process(fix("van", second: s)) }
        #expect(p.committedThrough >= 10 + p.batchSize)
        #expect(p.committedThrough < 600)
        try p.flush()
        #expect(p.committedThrough == 600)
    }

    @Test func refusedFixesNeedNoCommit() throws {
        let dir = try TemporaryDirectory("geofence-mark")
        defer { dir.remove() }
        let uptime = Uptime()
        let p = try pipeline(dir, uptime: uptime)
        _ = try p.process(fix("van", second: 0))
        try p.flush()
        #expect(p.committedThrough == 1)
        // The same epoch again (a broker's redelivery), then a fix too inaccurate to use: both refused.
        _ = try p.process(fix("van", second: 0))
        _ = try p.process(fix("van", second: 1, accuracy: 50_000))
        #expect(p.filter.statistics.rejected.values.reduce(0, +) >= 2)
        #expect(p.committedThrough == 3, "refused: nothing to commit, nothing to wait for")
        // A fix that Location Services off never offered counts too.
        p.skip(2)
        #expect(p.committedThrough == 5)
    }

    @Test func aFixHeldForItsEpochHoldsTheMarkBelowItWhileLaterFixesCommit() throws {
        let dir = try TemporaryDirectory("geofence-mark")
        defer { dir.remove() }
        let uptime = Uptime()
        let p = try pipeline(dir, uptime: uptime)
        _ = try p.process(fix("car", second: 0))
        _ = try p.process(fix("van", second: 0, accuracy: nil))  // number 2: held
        for s in 1...5 { _ = try p.process(fix("car", second: s)) }  // 3...7
        try p.flush()
        #expect(p.offered == 7)
        #expect(p.committedThrough == 1, "the van's incomplete report is still held")

        // The rest of its epoch supersedes it (a duplicate: nothing to commit), and goes on itself.
        _ = try p.process(fix("van", second: 0))  // 8
        #expect(p.committedThrough == 7)
        try p.flush()
        #expect(p.committedThrough == 8)

        // Another incomplete report, released by the settle time rather than by its epoch.
        _ = try p.process(fix("van", second: 1, accuracy: nil))  // 9
        _ = try p.process(fix("car", second: 6))  // 10
        try p.flush()
        #expect(p.committedThrough == 8)
        uptime.advance(0.5)
        _ = try p.settle()
        #expect(p.holdsMark)
        try p.flush()
        #expect(p.committedThrough == 10)

        // Held, then the next epoch sends it on as it is (its number, not the new report's, is released).
        _ = try p.process(fix("van", second: 2, accuracy: nil))  // 11
        _ = try p.process(fix("van", second: 3, accuracy: nil))  // 12: releases 11, is held
        try p.flush()
        #expect(p.committedThrough == 11)
        _ = try p.finish()
        #expect(p.committedThrough == 12)
    }

    @Test func aFailedCommitHoldsTheMarkUntilACommitSucceeds() throws {
        let dir = try TemporaryDirectory("geofence-mark")
        defer { dir.remove() }
        let uptime = Uptime()
        let p = try pipeline(dir, uptime: uptime)
        for s in 0..<3 { _ = try p.process(fix("van", second: s)) }
        try p.flush()
        #expect(p.committedThrough == 3)
        // Another writer holds the store's lock: the commit fails, and the mark stays.
        let holder = try DatabaseConnection(path: dir.file("state") + "/" + StateStore.fileName)
        try holder.execute("BEGIN IMMEDIATE")
        for s in 3..<6 { p.judgeWithoutCommit(fix("van", second: s)) }
        #expect(throws: (any Error).self) { try p.flush() }
        #expect(p.committedThrough == 3)
        // A region event (a car first heard in the depot) is committed at once, and fails as well.
        #expect(throws: (any Error).self) { try p.process(fix("car", second: 6, north: 0)) }
        #expect(p.committedThrough == 3)
        try holder.execute("ROLLBACK")
        let events = try p.flush()
        #expect(events.contains { $0.region == "depot" })
        #expect(p.committedThrough == 7)
    }
}
