import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A client that adds and removes regions while the daemon is being killed, and keeps its own list of what
/// the store must hold. Each change is repeated until its outcome is certain (`add --replace` and `remove`
/// are idempotent), so the list is exact; a pause lets the checker look at the store between two changes.
final class RegionChurn: @unchecked Sendable {
    private let cli: CLI
    private let lock = NSCondition()
    private var expected: Set<String>
    private var paused = false
    private var busy = false
    private var stopped = false
    private(set) var adds = 0
    private(set) var removes = 0
    /// Changes whose first try did not succeed (cut short by a kill) and were repeated.
    private(set) var retries = 0

    init(cli: CLI, initial: Set<String>) {
        self.cli = cli
        expected = initial
    }

    var snapshot: Set<String> { lock.withLock { expected } }

    /// Waits for the change in progress to finish and holds the next one back.
    func pause() async {
        lock.withLock { paused = true }
        _ = await Wait.until(timeout: 120, every: .milliseconds(20)) { !lock.withLock { busy } }
    }

    func resume() { lock.withLock { paused = false } }

    func stop() { lock.withLock { stopped = true } }

    func run(seed: UInt64) async {
        var rng = SeededGenerator(seed: seed)
        var serial = 0
        while true {
            let go: Bool? = lock.withLock {
                if stopped { return nil }
                if paused { return false }
                busy = true
                return true
            }
            guard let go else { return }
            guard go else {
                _ = await Wait.until(timeout: 1, every: .milliseconds(20)) { lock.withLock { !paused || stopped } }
                continue
            }
            let mine = snapshot.filter { $0.hasPrefix("client-") }.sorted()
            if mine.count > 3, Bool.random(using: &rng) {
                let id = mine.randomElement(using: &rng)!
                await settle(["remove", id], accept: [0, 66])
                lock.withLock {
                    expected.remove(id)
                    removes += 1
                }
            } else {
                serial += 1
                let id = "client-\(serial)"
                // 20 km from the drive: the churn never changes what the vehicle crosses.
                let lat = 48.4 + Double.random(in: 0...0.1, using: &rng)
                await settle(
                    ["add", "--id", id, "--lat", String(lat), "--lon", "16.37", "--radius", "100", "--replace"],
                    accept: [0])
                lock.withLock {
                    expected.insert(id)
                    adds += 1
                }
            }
            lock.withLock { busy = false }
            // Changes at uneven times, as users make them: the pace of the load, not a wait.
            try? await Task.sleep(for: .milliseconds(Int.random(in: 20...150, using: &rng)))
        }
    }

    /// Repeats a change until it exits with an accepted status (a kill may cut the first try short).
    private func settle(_ args: [String], accept: Set<Int32>) async {
        var attempt = 0
        let settled = await Wait.until(timeout: 60, every: .milliseconds(50)) {
            let result = try? await offThread { [cli] in try cli.run(args) }
            if let result, accept.contains(result.status) { return true }
            if attempt == 0 { lock.withLock { retries += 1 } }
            attempt += 1
            return false
        }
        if settled { return }
        Issue.record("\(args) never succeeded")
    }
}

/// The kill -9 soak of Docs/reliability.md: the daemon SIGKILLed at random moments while a drive streams
/// through a real gpsd, hooks append event ids to a file, and a client adds and removes regions. After
/// every kill the store passes `PRAGMA integrity_check` and holds every region the client was told exists;
/// at the end every event ever recorded has reached the hook.
@Suite(
    "kill -9 soak", .serialized, .enabled(if: GPSDHarness.isAvailable, "\(GPSDHarness.unavailableReason)"))
struct KillSoakTests {
    static let west = Coordinate(latitude: 48.2, longitude: 16.37)
    /// Twelve regions every 100 m along the road.
    static let stops = (0..<12).map { ("stop-\($0)", offset(west, north: 0, east: 100 + 100 * Double($0))) }

    /// Where the vehicle is `t` seconds into its shuttle: 0 to 1,300 m east and back, at 80 m/s.
    static func position(at t: Double) -> Coordinate {
        let leg = 1_300.0 / 80
        let phase = t.truncatingRemainder(dividingBy: 2 * leg)
        let east = phase < leg ? phase * 80 : (2 * leg - phase) * 80
        return offset(west, north: 0, east: east)
    }

    @Test("SIGKILL the daemon at random moments during a drive and region churn: nothing lost, store intact")
    func kill9Soak() async throws {
        let kills = SoakScale.pick(short: 10, long: 100)
        let gpsd = try await GPSDHarness()
        try await withCLI { cli in
            for (id, c) in Self.stops {
                let r = try cli.run(
                    "add", "--id", id, "--lat", String(c.latitude), "--lon", String(c.longitude), "--radius", "35")
                #expect(r.status == 0, "\(r.stderr)")
            }
            let log = cli.dir.file("delivered")
            let hook = try cli.run(
                "hook", "add", "--on", "all", "--command", #"echo "$GEOFENCE_EVENT_ID" >> '\#(log)'"#)
            #expect(hook.status == 0, "\(hook.stderr)")

            // The drive, in real time, five fixes a second, for as long as the soak lasts.
            let began = Date()
            let feeder = Task {
                let generator = NMEAGenerator()
                while !Task.isCancelled {
                    let p = Self.position(at: Date().timeIntervalSince(began))
                    try? gpsd.send(
                        nmea: generator.sentences(
                            for: .init(
                                time: Date(), latitude: p.latitude, longitude: p.longitude, speed: 80, hdop: 0.5)
                        )
                        .joined(separator: "\r\n"))
                    // The receiver's pace (a fix every 0.2 s), not a wait.
                    try? await Task.sleep(for: .milliseconds(200))
                }
            }
            defer { feeder.cancel() }
            let churn = RegionChurn(cli: cli, initial: Set(Self.stops.map(\.0)))
            let client = Task { await churn.run(seed: 7) }

            var rng = SeededGenerator(seed: 99)
            var integrityChecks = 0
            var recordedBeforeKills = Set<String>()
            for round in 0..<kills {
                let daemon = try cli.daemon(
                    ["--gpsd", "127.0.0.1:\(gpsd.port)", "--log-level", "warning"], log: "run-\(round).log")
                // A kill at a random moment is the test: there is nothing to wait for.
                try await Task.sleep(for: .milliseconds(Int.random(in: 300...2_500, using: &rng)))
                kill(daemon.pid, SIGKILL)
                await waitForExit(daemon.process)

                await churn.pause()
                let store = try StateStore(directory: cli.stateDir)
                let problems = try store.integrityCheck()
                #expect(problems.isEmpty, "integrity after kill \(round + 1): \(problems)")
                if problems.isEmpty { integrityChecks += 1 }
                let held = Set(try store.regions.all().map(\.region.id))
                let missing = churn.snapshot.subtracting(held)
                #expect(missing.isEmpty, "after kill \(round + 1) the store lost \(missing.sorted())")
                let ghosts = held.subtracting(churn.snapshot)
                #expect(ghosts.isEmpty, "after kill \(round + 1) removed regions came back: \(ghosts.sorted())")
                for event in try store.outbox.events(after: 0, limit: 1_000_000) {
                    recordedBeforeKills.insert(event.id)
                }
                churn.resume()
            }
            churn.stop()
            await client.value
            feeder.cancel()

            // The last start delivers what is left; it is stopped once nothing is pending.
            let daemon = try cli.daemon(
                ["--gpsd", "127.0.0.1:\(gpsd.port)", "--log-level", "warning"], log: "run-last.log")
            var pending = -1
            _ = try await Wait.until(timeout: 60, every: .milliseconds(100)) {
                pending = try await cli.events("--pending").count
                return pending == 0
            }
            #expect(pending == 0, "deliveries still pending")
            #expect(await daemon.stop() != nil, "the daemon did not stop on SIGTERM")

            let store = try StateStore(directory: cli.stateDir)
            #expect(try store.integrityCheck().isEmpty)
            #expect(Set(try store.regions.all().map(\.region.id)) == churn.snapshot)
            let events = try store.outbox.events(after: 0, limit: 1_000_000)
            let lines = (cli.read("delivered") ?? "").split(separator: "\n").map(String.init)
            let delivered = Set(lines)
            let lost = recordedBeforeKills.subtracting(delivered)
            let detail = try await cli.events().filter { lost.contains($0["id"]?.stringValue ?? "") }
            #expect(
                lost.isEmpty,
                "\(lost.count) events recorded before a kill never reached the hook: \(detail.map { $0.serialized() })")
            #expect(events.allSatisfy { delivered.contains($0.id) }, "an event never reached its hook")
            let crossings = events.filter { $0.type == "enter" || $0.type == "exit" }.count
            #expect(crossings >= kills, "the drive should cross regions between kills: \(crossings) crossings")
            let duplicates = lines.count - delivered.count
            print(
                "kill -9 soak: \(kills) SIGKILLs in \(Int(Date().timeIntervalSince(began))) s; integrity ok "
                    + "\(integrityChecks)/\(kills); regions: \(churn.adds) added, \(churn.removes) removed, "
                    + "\(churn.retries) retried after a kill, \(churn.snapshot.count) held, 0 lost; events: "
                    + "\(events.count) recorded (\(crossings) enter/exit), \(events.count - lost.count) delivered, "
                    + "\(lost.count) lost, \(duplicates) duplicate deliveries")
        }
    }
}
