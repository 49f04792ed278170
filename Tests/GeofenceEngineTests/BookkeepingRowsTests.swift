import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore
import GeofenceTestSupport
import Testing

/// A vehicle's row (`subjects`: its last fix, for a restart) is written once a commit, however many of its
/// fixes the commit covers, and the store ends exactly as a pipeline committing every fix leaves it
/// (issue 29: fewer writes a fix, the same durable state). A real SQLite file; the row writes are counted by
/// a trigger.
@Suite struct BookkeepingRowsTests {
    let depot = Coordinate(latitude: 45.76, longitude: 4.84)
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    /// `vehicles` driving north at 10 m/s from `from` metres north of the depot, a fix a second each for
    /// `seconds`, interleaved as a fleet stream is.
    private func fleet(vehicles: Int, seconds: Int, from: Double) -> [Fix] {
        var fixes: [Fix] = []
        for second in 0..<seconds {
            for v in 0..<vehicles {
                let p = offset(depot, north: from + 10 * Double(second), east: 10 * Double(v) - 55)
                fixes.append(
                    Fix(
                        subject: "van-\(v)", time: start.addingTimeInterval(Double(second)), mode: .threeD,
                        latitude: p.latitude, longitude: p.longitude, horizontalAccuracy: 5, speed: 10, course: 0))
            }
        }
        return fixes
    }

    /// A store with the depot's region and a trigger counting the rows written to `subjects`.
    private func pipeline(_ dir: TemporaryDirectory, _ name: String, batchSize: Int?) throws -> (
        FixPipeline, StateStore
    ) {
        let store = try StateStore(directory: dir.file(name))
        try store.regions.add(Region(id: "depot", center: depot, radius: 100))
        try store.queue.write { db in
            try db.execute("CREATE TABLE row_writes (n INTEGER NOT NULL)")
            try db.execute("INSERT INTO row_writes VALUES (0)")
            try db.execute(
                "CREATE TRIGGER count_row_writes AFTER INSERT ON subjects BEGIN UPDATE row_writes SET n = n + 1; END")
        }
        let pipeline = FixPipeline(store: store, settle: 0)
        // Only the count or the end commits bookkeeping here, however slow the machine.
        pipeline.batchInterval = 3_600
        if let batchSize { pipeline.batchSize = batchSize }
        try pipeline.load()
        return (pipeline, store)
    }

    private func rowWrites(_ store: StateStore) throws -> Int64 {
        try store.queue.read { db in
            var n: Int64 = 0
            try db.forEachRow("SELECT n FROM row_writes") { n = try $0.int64("n") }
            return n
        }
    }

    /// Every row of `subjects` and `region_states`, and every event's subject, region, type and fix time.
    private func durableState(_ store: StateStore) throws -> [String] {
        try store.queue.read { db in
            var rows: [String] = []
            try db.forEachRow(
                "SELECT subject, last_fix_time, baseline_seq, last_fix FROM subjects ORDER BY subject"
            ) { s in
                rows.append(
                    "subject \(try s.string("subject")) \(try s.optionalDouble("last_fix_time") ?? -1) "
                        + "\(try s.int64("baseline_seq")) \(try s.optionalString("last_fix") ?? "-")")
            }
            try db.forEachRow(
                "SELECT subject, region_seq, state, since, dwell_fired FROM region_states ORDER BY subject, region_seq"
            ) { s in
                rows.append(
                    "pair \(try s.string("subject")) \(try s.int64("region_seq")) \(try s.string("state")) "
                        + "\(try s.optionalDouble("since") ?? -1) \(try s.bool("dwell_fired"))")
            }
            try db.forEachRow("SELECT body FROM events ORDER BY seq") { s in
                let o = try JSON.parse(try s.string("body"))
                rows.append(
                    "event \(o["subject"]?.stringValue ?? "?") \(o["region"]?.stringValue ?? "-") "
                        + "\(o["type"]?.stringValue ?? "?") \(o["fix"]?["time"]?.stringValue ?? "-")")
            }
            return rows
        }
    }

    @Test("parked far from every region: one row a vehicle a commit, not one a fix")
    func oneRowAVehicleACommit() throws {
        let dir = try TemporaryDirectory("geofence-rows")
        defer { dir.remove() }
        let (p, store) = try pipeline(dir, "state", batchSize: nil)
        let fixes = fleet(vehicles: 10, seconds: 100, from: 5_000)
        let before = try rowWrites(store)
        for fix in fixes { _ = try p.processForEvents(fix) }
        // 5 km from the depot: no region is near enough to be judged, no event; every row waits for the
        // commit of bookkeeping.
        #expect(try rowWrites(store) == before, "nothing written before the commit of bookkeeping")
        try p.flush()
        #expect(try rowWrites(store) - before == 10, "one row for each of 10 vehicles, 1,000 fixes")
        #expect(p.committedThrough == Int64(fixes.count))
        let last = try store.monitorState.subject(named: "van-3")
        #expect(last?.record.lastFixTime == start.addingTimeInterval(99), "the row holds the last fix")
    }

    @Test("a commit of decisions that writes every row waiting moves the mark (an MQTT source acknowledges then)")
    func decisionsThatWriteEveryRowMoveTheMark() throws {
        let dir = try TemporaryDirectory("geofence-rows")
        defer { dir.remove() }
        let (p, _) = try pipeline(dir, "state", batchSize: nil)
        // The first fix of each of 10 vehicles: a `determined` event each, so every row waiting is a deciding
        // vehicle's, written with the events.
        let first = Array(fleet(vehicles: 10, seconds: 1, from: -600))
        let made = try p.processForEvents(batch: first)
        #expect(made.count == 10, "\(made.map(\.type)) \(p.filter.statistics)")
        #expect(!p.holdsMark, "nothing waits")
        #expect(p.committedThrough == 10)
        // The MQTT intake's flush after a batch: nothing to write, and the mark stays where it is.
        #expect(try p.flush().isEmpty)
        #expect(p.committedThrough == 10)
    }

    @Test("through a region: a commit a fix, a row a vehicle a commit, a commit a source's batch: the same store")
    func batchedEqualsEveryFix() throws {
        let dir = try TemporaryDirectory("geofence-rows")
        defer { dir.remove() }
        let fixes = fleet(vehicles: 12, seconds: 120, from: -600)
        var states: [String: [String]] = [:]
        var writes: [String: Int64] = [:]
        var commits: [String: Int] = [:]
        for name in ["every", "rows", "batches"] {
            let (p, store) = try pipeline(dir, name, batchSize: name == "every" ? 1 : nil)
            var events = 0
            if name == "batches" {
                var rest = fixes[...]
                while !rest.isEmpty {
                    events += try p.processForEvents(batch: Array(rest.prefix(512))).count
                    rest = rest.dropFirst(512)
                }
            } else {
                for fix in fixes { events += try p.processForEvents(fix).count }
            }
            events += try p.flush().count
            #expect(events == 12 * 3, "\(name): determined, enter and exit for each vehicle")
            #expect(p.committedThrough == Int64(fixes.count), "\(name)")
            states[name] = try durableState(store)
            writes[name] = try rowWrites(store)
            commits[name] = p.commits
        }
        #expect(states["every"]?.count == 12 + 12 * 3, "12 rows, no pair left inside, 36 events")
        #expect(states["rows"] == states["every"])
        #expect(states["batches"] == states["every"])
        #expect(writes["every"] == Int64(fixes.count), "a row a fix when every fix commits")
        #expect(
            (writes["rows"] ?? .max) <= 12 * 12 * 3 + 12,
            "a row a vehicle for each event's commit and the end, at most")
        #expect((writes["batches"] ?? .max) <= 12 * 4, "a row a vehicle for each of 3 batches and the end, at most")
        #expect((commits["batches"] ?? .max) <= 4, "1,440 fixes in 3 batches, and the end: \(commits)")
        #expect((commits["rows"] ?? 0) >= 12, "events commit at once without batches: \(commits)")
    }
}
