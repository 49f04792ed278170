import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore
import GeofenceTestSupport
import Synchronization
import Testing

/// The wall and monotonic clocks of a test, moved by hand.
final class TestClock: GeofenceClock {
    private let time: Mutex<Date>
    private let monotonic = Mutex(1000.0)
    init(_ start: Date = Date(timeIntervalSince1970: 1_795_000_000)) { time = Mutex(start) }
    func now() -> Date { time.withLock { $0 } }
    func uptime() -> Double { monotonic.withLock { $0 } }
    func advance(_ seconds: Double) {
        time.withLock { $0 = $0.addingTimeInterval(seconds) }
        monotonic.withLock { $0 += seconds }
    }
}

/// The engine's monitor service, in-process: a store in memory, a test clock, reports handed over by the test.
/// No daemon, no sleep: each step is a call, and what it changed is in the store when the call returns.
final class Engine: Sendable {
    /// What `onServices` was told: whether location hooks are held.
    final class Recorder: Sendable {
        private let values = Mutex<[Bool]>([])
        func append(_ value: Bool) { values.withLock { $0.append(value) } }
        var all: [Bool] { values.withLock { $0 } }
    }

    let store: StateStore
    let service: MonitorService
    let clock = TestClock()
    let paused = Recorder()
    let executor = ThreadExecutor(name: "test.monitor")

    init(store: StateStore? = nil, maxRegions: Int? = nil) throws {
        let store = try store ?? StateStore.inMemory()
        self.store = store
        let clock = self.clock
        let pipeline = FixPipeline(store: store, clock: { clock.now() }, monotonic: { clock.uptime() })
        let paused = self.paused
        service = MonitorService(
            store: store, pipeline: pipeline, logger: Logger(minimum: .error) { _ in }, executor: executor,
            sourceLabel: "scripted", policy: AccessPolicy(daemonUID: 4242), maxRegions: maxRegions,
            onServices: { on in paused.append(!on) }, onEvents: {}, clock: clock, random: { 0.5 })
    }

    func statuses() throws -> [String: String] {
        Dictionary(uniqueKeysWithValues: try store.regions.all().map { ($0.region.id, $0.status.description) })
    }

    func add(_ id: String, _ at: Coordinate, radius: Double = 50) throws {
        try store.regions.add(Region(id: id, center: at, radius: radius))
    }

    func events(_ type: String) throws -> [StoredEvent] {
        try store.outbox.events(after: 0, limit: 10_000).filter { $0.type == type }
    }

    func regionEvents() throws -> [StoredEvent] {
        try store.outbox.events(after: 0, limit: 10_000).filter { RegionEventType(rawValue: $0.type) != nil }
    }

    /// A fix of the truck at `at`, `seconds` after the clock's start (fix time), 3 m accurate.
    func fix(_ at: Coordinate, after seconds: Double) -> Fix {
        Fix(
            subject: "truck", time: Date(timeIntervalSince1970: 1_795_000_000 + seconds), mode: .threeD,
            latitude: at.latitude, longitude: at.longitude, horizontalAccuracy: 3)
    }
}

@Suite("reconciler, in-process") struct ReconcilerServiceTests {
    @Test("a limit of 10 with 15 regions: 5 pending: limit; removing 3 activates 3")
    func limit() async throws {
        let e = try Engine(maxRegions: 10)
        for i in 1...15 { try e.add("r\(i)", Coordinate(latitude: 40 + Double(i), longitude: 1)) }
        _ = try await e.service.load()
        var s = try e.statuses()
        #expect((11...15).allSatisfy { s["r\($0)"] == "pending: limit" }, "\(s)")
        #expect((1...10).allSatisfy { s["r\($0)"] == "monitoring" }, "\(s)")
        #expect(try e.store.regions.remove(ids: ["r2", "r3", "r4"]).count == 3)
        await e.service.apply(.regions)
        s = try e.statuses()
        #expect((11...13).allSatisfy { s["r\($0)"] == "monitoring" }, "\(s)")
        #expect(s.values.filter { $0 == "pending: limit" }.count == 2 && s.count == 12, "\(s)")
        #expect(try e.events("region-status").count == 8, "5 pending, then 3 monitoring")
    }

    @Test("a region added beyond the limit while the engine runs stays pending: limit, tick after tick")
    func limitWhileRunning() async throws {
        let e = try Engine(maxRegions: 2)
        try e.add("r0", Coordinate(latitude: 40, longitude: 1))
        try e.add("r1", Coordinate(latitude: 41, longitude: 1))
        _ = try await e.service.load()
        #expect(try e.statuses() == ["r0": "monitoring", "r1": "monitoring"])
        try e.add("late", Coordinate(latitude: 42, longitude: 1))
        await e.service.apply(.regions)
        #expect(try e.statuses()["late"] == "pending: limit")
        for _ in 0..<3 {
            e.clock.advance(1)
            await e.service.tick()
        }
        #expect(try e.statuses() == ["r0": "monitoring", "r1": "monitoring", "late": "pending: limit"])
    }

    @Test("a region added with no engine waits for it; the engine's start, and a running engine, take it")
    func waitingForEngine() async throws {
        let store = try StateStore.inMemory()
        let e = try Engine(store: store)
        try e.add("r0", Coordinate(latitude: 40, longitude: 1))
        try e.add("r1", Coordinate(latitude: 41, longitude: 1))
        #expect(try e.statuses() == ["r0": "pending: waiting-for-engine", "r1": "pending: waiting-for-engine"])
        _ = try await e.service.load()
        #expect(try e.statuses() == ["r0": "monitoring", "r1": "monitoring"])
        try e.add("late", Coordinate(latitude: 42, longitude: 1))
        await e.service.apply(.regions)
        await e.service.tick()
        #expect(try e.statuses()["late"] == "monitoring")
        _ = await e.service.shutdown()
        // Stopped: what it monitored stays so; a region added now waits for the next start.
        try e.add("after", Coordinate(latitude: 43, longitude: 1))
        let s = try e.statuses()
        #expect(s["after"] == "pending: waiting-for-engine" && s["late"] == "monitoring", "\(s)")
        #expect(try store.regions.countsByStatus()["pending"] == 1)
        // Waiting is not an event: the engine's taking a region writes no region-status event.
        #expect(try e.events("region-status").isEmpty)
    }

    @Test("no usable fixes: every region fails location-unavailable, retries are counted when due, and it recovers")
    func locationUnavailable() async throws {
        let e = try Engine()
        for i in 1...4 { try e.add("r\(i)", Coordinate(latitude: 45 + Double(i), longitude: 5), radius: 80) }
        _ = try await e.service.load()
        await e.service.handle(.up)
        await e.service.handle(.liveness(.lost))
        var stored = try e.store.regions.all()
        #expect(stored.allSatisfy { $0.status.description == "failed: location-unavailable" }, "\(stored)")
        // The backoff (1 s doubling, equal jitter, the jitter fixed at its middle): 0.75 s, then 1.5 s.
        #expect(stored.allSatisfy { $0.nextRetry == e.clock.now().addingTimeInterval(0.75) })
        e.clock.advance(0.5)
        await e.service.tick()
        #expect(try e.store.regions.all().allSatisfy { $0.attempts == 0 }, "not due yet")
        e.clock.advance(0.5)
        await e.service.tick()
        #expect(try e.store.regions.all().allSatisfy { $0.attempts == 1 })
        e.clock.advance(2)
        await e.service.tick()
        stored = try e.store.regions.all()
        #expect(stored.allSatisfy { $0.attempts == 2 }, "\(stored.map(\.attempts))")
        let source = try e.events("source").map(\.body)
        #expect(source.count == 1 && source[0].contains("\"state\":\"lost\""), "\(source)")

        await e.service.handle(.liveness(.restored))
        stored = try e.store.regions.all()
        #expect(stored.allSatisfy { $0.status == .monitoring && $0.nextRetry == nil }, "\(stored)")
        #expect(stored.count == 4, "no region was lost")
        // The cause before its effects: the source event, then the regions' statuses, in outbox order.
        let order = try e.store.outbox.events(after: 0, limit: 100).map(\.type)
        #expect(
            order == ["source"] + Array(repeating: "region-status", count: 4) + ["source"]
                + Array(repeating: "region-status", count: 4), "\(order)")
    }

    /// The region monitor, the monitor's service and the control handler each had a generator: ids made in
    /// one millisecond by two of them were ordered by their random bits, not by when they were made.
    @Test("every event takes its id from the engine's one generator: ids sort in the order events were made")
    func idsFollowTheOrderEventsWereMade() async throws {
        let e = try Engine()
        let start = Coordinate(latitude: 48.1, longitude: 11.5)
        try e.add("a", start, radius: 100)
        _ = try await e.service.load()
        var t = 0.0
        for round in 0..<4 {
            // Region events from the monitor, then region-status events from the service, in one millisecond
            // of the test's clock, which stands still.
            for _ in 0..<4 {
                t += 2
                let east = round.isMultiple(of: 2) ? 0.0 : 1000
                await e.service.handle(.fix(e.fix(offset(start, north: 0, east: east), after: t)))
            }
            await e.service.apply(.services(false))
            await e.service.apply(.services(true))
        }
        let events = try e.store.outbox.events(after: 0, limit: 1000)
        let kinds = Set(events.map(\.type))
        #expect(kinds.isSuperset(of: ["determined", "enter", "exit", "region-status"]), "\(kinds)")
        let ids = events.map(\.id)
        #expect(ids == ids.sorted(), "\(zip(events.map(\.type), ids).map { "\($0) \($1)" })")
        #expect(Set(ids).count == ids.count)
    }

    @Test("services off during a drive: nothing recorded, hooks held, suspended; on: the crossing fires once, inferred")
    func servicesOffDuringDrive() async throws {
        let e = try Engine()
        let start = Coordinate(latitude: 48.1, longitude: 11.5)
        try e.add("a", start, radius: 100)
        try e.add("b", offset(start, north: 0, east: 600), radius: 100)
        _ = try await e.service.load()
        #expect(e.paused.all == [false], "hooks run while services are on")
        var t = 0.0
        func drive(_ metres: [Double]) async {
            for east in metres {
                t += 2
                await e.service.handle(.fix(e.fix(offset(start, north: 0, east: east), after: t)))
            }
        }
        await drive([0, 0, 0, 0])
        let before = try e.regionEvents()
        #expect(
            before.map { "\($0.type) \($0.region ?? "")" } == ["determined a", "determined b"], "\(before.map(\.body))")

        await e.service.apply(.services(false))
        #expect(try e.statuses().values.allSatisfy { $0 == "suspended: services-off" })
        #expect(e.paused.all == [false, true], "location hooks are held while off")
        // The vehicle drives from a into b while Location Services are off.
        await drive(stride(from: 30.0, through: 600, by: 30).map { $0 } + [600, 600, 600])
        await e.service.settle()
        #expect(try e.regionEvents().count == before.count, "nothing is recorded while off")

        await e.service.apply(.services(true))
        #expect(try e.statuses().values.allSatisfy { $0 == "monitoring" })
        #expect(e.paused.all == [false, true, false])
        await drive([600, 600, 600, 600])
        let new = try e.regionEvents().dropFirst(before.count).map { try JSON.parse($0.body) }
        let crossings = new.filter { ["enter", "exit"].contains($0["type"]?.stringValue ?? "") }
        #expect(
            Set(crossings.map { "\($0["type"]!.stringValue!) \($0["region"]!.stringValue!)" }) == [
                "exit a", "enter b",
            ],
            "\(new.map { $0.serialized() })")
        #expect(crossings.count == 2 && crossings.allSatisfy { $0["inferred"] == true })
    }
}
