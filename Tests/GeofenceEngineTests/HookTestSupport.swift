import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A fresh state directory with a real store, events put into its outbox the way the monitor puts them, and
/// hook runners configured for tests (short delays).
struct HookFixture {
    let dir: TemporaryDirectory
    let store: StateStore
    let log = LogLines()

    init() throws {
        dir = try TemporaryDirectory("geofence-hooks")
        store = try StateStore(directory: dir.file("state"))
    }

    func remove() { dir.remove() }

    /// A path inside the test's directory, quoted for a shell command.
    func shellPath(_ name: String) -> String { "'" + dir.file(name) + "'" }

    @discardableResult
    func addRegion(
        _ id: String, name: String? = nil, hooks: [NotifyKind: String] = [:],
        at centre: (Double, Double) = (51.5, -0.12)
    ) throws -> StoredRegion {
        try store.regions.add(
            Region(
                id: id, name: name, center: Coordinate(latitude: centre.0, longitude: centre.1), radius: 100,
                hooks: hooks))
    }

    func addHook(_ id: String, on events: [String] = [], _ command: String) throws {
        try store.deliveries.addHook(GlobalHook(id: id, events: events, command: command, createdAt: Date()))
    }

    /// Makes the deliveries of the events after the dispatch cursor, as the hooks' sink does.
    func dispatch() throws {
        _ = try store.deliveries.dispatchDeliveries(
            of: store.outbox.events(after: store.deliveries.hookDispatchState().cursor, limit: 10_000))
    }

    /// Region events into the outbox, in one transaction, as `FixPipeline` commits them.
    @discardableResult
    func addEvents(_ specs: [(type: RegionEventType, region: String)]) throws -> [RegionEvent] {
        var ids = EventIDGenerator()
        var out = MonitorOutput()
        let start = Date(timeIntervalSince1970: 1_795_000_000)
        for (i, spec) in specs.enumerated() {
            let time = start.addingTimeInterval(Double(i))
            out.events.append(
                RegionEvent(
                    id: ids.next(now: Date()), type: spec.type, region: spec.region, subject: "/dev/ttyACM0",
                    time: time, state: spec.type == .exit ? .outside : .inside,
                    previous: spec.type == .exit ? .inside : .outside, inferred: false, distance: 42.25, radius: 100,
                    fix: EventFix(
                        latitude: 51.5001, longitude: -0.1201, accuracy: 4.2, mode: .threeD, speed: 8.1, course: 271.4
                    )))
        }
        try store.monitorState.apply([out])
        return out.events
    }

    func runner(
        clock: any GeofenceClock = SystemClock(), _ configure: (inout HookConfiguration) -> Void = { _ in }
    ) -> HookRunner {
        var c = HookConfiguration()
        c.retry.initialDelay = 0.05
        c.retry.maxDelay = 0.2
        c.retry.jitter = .none
        c.timeout = 10
        c.pollInterval = 0.2
        configure(&c)
        let lines = log
        return HookRunner(
            store: store, configuration: c, logger: Logger(minimum: .debug) { lines.append($0) }, clock: clock)
    }

    /// Every delivery, in id order.
    func deliveries() throws -> [StoredDelivery] {
        try store.deliveries.eventDeliveries(limit: 1_000_000).flatMap(\.deliveries).sorted { $0.id < $1.id }
    }

    func read(_ name: String) -> String? {
        FileManager.default.contents(atPath: dir.file(name)).map { String(decoding: $0, as: UTF8.self) }
    }

    func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: dir.file(name)) }
}

/// Runs `body` with a fresh `HookFixture` and removes its directory afterwards, whatever happens.
func withHookFixture<T>(_ body: (HookFixture) async throws -> T) async throws -> T {
    let fixture = try HookFixture()
    defer { fixture.remove() }
    return try await body(fixture)
}

/// The system's clocks with the wall clock moved by `offset` seconds: what a runner records then comes from
/// its clock, not from `Date()`.
struct OffsetClock: GeofenceClock {
    var offset: Double
    func now() -> Date { Date().addingTimeInterval(offset) }
    func uptime() -> Double { SystemClock().uptime() }
}

/// Log lines kept for a failing test's message.
final class LogLines: @unchecked Sendable {
    // @unchecked: `lines` is only touched under `lock`.
    private let lock = NSLock()
    private var lines: [String] = []

    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var text: String { lock.withLock { lines.suffix(40).joined(separator: "\n") } }
    func contains(_ part: String) -> Bool { lock.withLock { lines.contains { $0.contains(part) } } }
}

/// Processes whose process group is `pgid` that are still alive (zombies count as gone).
func liveProcesses(inGroup pgid: Int32) -> [Int32] {
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
    var found: [Int32] = []
    for entry in entries {
        guard let pid = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        else { continue }
        // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after the last ')'.
        guard let close = stat.lastIndex(of: ")") else { continue }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 2, fields[0] != "Z", Int32(fields[2]) == pgid else { continue }
        found.append(pid)
    }
    return found
}

/// Waits up to `seconds` for `condition`, without blocking a thread of the cooperative pool (which the
/// runner's own tasks, and other tests, need).
func eventually(_ seconds: Double, _ condition: () throws -> Bool) async rethrows -> Bool {
    try await Wait.until(timeout: seconds, every: .milliseconds(20), condition)
}
