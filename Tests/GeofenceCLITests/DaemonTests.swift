import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence run`, `locate` and `status` against a real gpsd (private, on free ports, fed NMEA over UDP).
@Suite("daemon on a real gpsd", .enabled(if: GPSDHarness.isAvailable, "\(GPSDHarness.unavailableReason)"))
struct DaemonTests {
    static let start = Coordinate(latitude: 51.5007, longitude: -0.1246)

    /// A drive east at 20 m/s, 2 fixes a second, stamped from `from` on.
    static func drive(epochs: Int, from: Date, east metresPerEpoch: Double = 10) -> [[String]] {
        let generator = NMEAGenerator()
        return (0..<epochs).map { i in
            let here = offset(start, north: 0, east: Double(i) * metresPerEpoch)
            return generator.sentences(
                for: .init(
                    time: from.addingTimeInterval(Double(i) * 0.5), latitude: here.latitude,
                    longitude: here.longitude, speed: metresPerEpoch * 2, course: 90, hdop: 0.5))
        }
    }

    /// Regions along the drive: one at the start, two crossed on the way.
    static func addRegions(_ cli: CLI) throws {
        for (id, east, radius) in [("yard", 0.0, 60.0), ("gate", 300.0, 50.0), ("shop", 600.0, 40.0)] {
            let c = offset(start, north: 0, east: east)
            let r = try cli.run(
                "add", "--id", id, "--lat", String(c.latitude), "--lon", String(c.longitude), "--radius",
                String(radius))
            #expect(r.status == 0, "\(r.stderr)")
        }
    }

    static func regionEvents(_ stateDir: String) throws -> [JSONValue] {
        let store = try StateStore(directory: stateDir)
        return try store.outbox.events(after: 0, limit: 100_000).filter {
            $0.region != nil && $0.type != "region-status"
        }
        .map { try JSON.parse($0.body) }
    }

    /// What must be equal between the daemon and replay (ids and creation times differ by nature).
    static func essence(_ e: JSONValue) -> String {
        ["type", "region", "subject", "time", "state", "previous", "inferred"].map { key in
            e[key].map { $0.serialized() } ?? "-"
        }.joined(separator: " ")
    }

    @Test("a drive through gpsd gives the daemon the same events as replay of the same fixes; it stops on SIGTERM")
    func driveMatchesReplay() async throws {
        let gpsd = try await GPSDHarness()
        try await withCLI { cli in
            try Self.addRegions(cli)
            let daemon = try cli.daemon(["--gpsd", "127.0.0.1:\(gpsd.port)"])
            #expect(await daemon.waitForLog("connected to gpsd", timeout: 10), "\(daemon.log)")
            let watcher = try GPSDWatcher(port: gpsd.port)
            defer { watcher.close() }
            // gpsd sends TPVs only to clients already watching: wait for the watcher's DEVICES answer.
            _ = await Wait.until(timeout: 5, every: .milliseconds(20)) {
                watcher.reports.contains { $0.contains("\"DEVICES\"") }
            }
            // Fix times start 25 s in the past and are fed at 5 epochs a second (2.5x real time), so every fix
            // stays within the filter's age limits at receipt.
            for epoch in Self.drive(epochs: 70, from: Date().addingTimeInterval(-25)) {
                try await gpsd.send(nmea: epoch, pace: .milliseconds(60))
                // The receiver's pace (5 epochs a second), not a wait.
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(await daemon.waitForLog("event exit region=\"gate\"", timeout: 5), "\(daemon.log)")
            try await Task.sleep(for: .milliseconds(1200))

            // Picks up a region added while it runs, within a second.
            #expect(try cli.run("add", "--id", "late", "--lat", "51.6", "--lon", "-0.1", "--radius", "100").status == 0)
            #expect(await daemon.waitForLog("regions changed: 1", timeout: 1.5), "\(daemon.log)")
            // A second engine on the same state directory is refused.
            let second = try cli.run("run", "--gpsd", "127.0.0.1:\(gpsd.port)")
            #expect(second.status == 75)
            #expect(second.stderr.contains("already running"), "\(second.stderr)")
            // So is one on another state directory but the same control socket: at once, with one error and
            // without loading its regions or saying it runs first.
            try await withCLI { elsewhere in
                let third = try elsewhere.run(
                    ["run", "--gpsd", "127.0.0.1:\(gpsd.port)"], environment: ["GEOFENCE_SOCKET": cli.socket])
                #expect(third.status != 0)
                #expect(
                    third.stderr.contains("another geofence engine is listening on \(cli.socket)"), "\(third.stderr)")
                #expect(!third.stderr.contains("running:"), "\(third.stderr)")

                let stopped = await daemon.stop()
                let took = try #require(stopped, "the daemon did not stop on SIGTERM")
                #expect(took < 2, "took \(took) s to stop")
                #expect(daemon.process.terminationStatus == 0, "\(daemon.log)")

                let live = try Self.regionEvents(cli.stateDir)
                #expect(
                    live.map { "\($0["type"]?.stringValue ?? "") \($0["region"]?.stringValue ?? "")" } == [
                        "determined yard", "determined gate", "determined shop", "exit yard", "enter gate", "exit gate",
                        "enter shop", "exit shop",
                    ], "\(live.map(Self.essence))")

                // The same fixes through replay, into a fresh store with the same regions.
                try withCLI { other in
                    try Self.addRegions(other)
                    let recording = other.dir.file("tpv.json")
                    try watcher.tpvs.joined(separator: "\n").write(toFile: recording, atomically: true, encoding: .utf8)
                    let replay = try other.run("replay", recording)
                    #expect(replay.status == 0, "\(replay.stderr)")
                    let replayed = try Self.regionEvents(other.stateDir)
                    #expect(!live.isEmpty)
                    #expect(live.map(Self.essence) == replayed.map(Self.essence))
                }
            }
        }
    }

    @Test("a SIGTERM that arrives while the engine is still loading its regions stops it once it has")
    func earlySigterm() async throws {
        try await withCLI { cli in
            // Enough regions that loading them takes a while (a debug build: about a second).
            let store = try StateStore(directory: cli.stateDir)
            try store.regions.addAll(
                (0..<250_000).map { i in
                    try Region(
                        id: "r\(i)",
                        center: Coordinate(
                            latitude: 40 + Double(i % 500) * 0.01, longitude: 2 + Double(i / 500) * 0.01),
                        radius: 100)
                })
            // systemd's stop, or a Ctrl-C, while it starts: a graceful stop once loaded, not death by signal.
            // Started with the signal blocked (see sigtermPendingAtStart), so that however early it comes, it is
            // not the default action that ends the engine.
            let daemon = try DaemonProcess(
                ["run", "--gpsd", "127.0.0.1:9", "--state-dir", cli.stateDir], logPath: cli.dir.file("run.log"),
                environment: cli.environment, blockingTermination: true)
            // The SIGTERM is to come while the engine starts, before anything it could say: no signal to wait on.
            try await Task.sleep(for: .milliseconds(100))
            #expect(!daemon.log.contains("running:"), "sent before it runs: \(daemon.log)")
            let stopped = await daemon.stop(timeout: 30)
            #expect(stopped != nil, "the SIGTERM was lost: \(daemon.log)")
            #expect(daemon.process.terminationStatus == 0, "\(daemon.log)")
        }
    }

    @Test("a SIGTERM sent at once to an engine started with it blocked stops it gracefully, not dead by it")
    func sigtermPendingAtStart() async throws {
        try await withCLI { cli in
            // A supervisor spawning from a thread that blocks the signal passes the mask on: the SIGTERM waits,
            // pending, until the engine takes it, and must then neither kill it nor be lost.
            let daemon = try DaemonProcess(
                ["run", "--gpsd", "127.0.0.1:9", "--state-dir", cli.stateDir], logPath: cli.dir.file("run.log"),
                environment: cli.environment, blockingTermination: true)
            let stopped = await daemon.stop(timeout: 20)
            #expect(stopped != nil, "the SIGTERM was lost: \(daemon.log)")
            #expect(daemon.process.terminationStatus == 0, "\(daemon.log)")
            #expect(daemon.process.terminationReason == .exit, "\(daemon.log)")
        }
    }

    @Test("gpsd killed and restarted: lost, reconnect, restored, and no false event")
    func gpsdRestart() async throws {
        let gpsd = try await GPSDHarness()
        try await withCLI { cli in
            try Self.addRegions(cli)
            let daemon = try cli.daemon(["--gpsd", "127.0.0.1:\(gpsd.port)", "--stale-after", "2s"])
            #expect(await daemon.waitForLog("connected to gpsd", timeout: 10), "\(daemon.log)")
            let parked = NMEAGenerator()
            func park(_ count: Int) async throws {
                for _ in 0..<count {
                    try await gpsd.send(
                        nmea: parked.sentences(
                            for: .init(
                                time: Date(), latitude: Self.start.latitude, longitude: Self.start.longitude, hdop: 0.5)
                        ),
                        pace: .milliseconds(5))
                    // The receiver's pace (a fix every 0.5 s), not a wait.
                    try await Task.sleep(for: .milliseconds(500))
                }
            }
            try await park(4)
            #expect(await daemon.waitForLog("event determined region=\"yard\"", timeout: 3), "\(daemon.log)")

            gpsd.kill()
            #expect(await daemon.waitForLog("source lost", timeout: 4), "\(daemon.log)")
            try await gpsd.start()
            #expect(await daemon.waitForLog("connected to gpsd", occurrences: 2, timeout: 10), "\(daemon.log)")
            try await Task.sleep(for: .milliseconds(300))
            try await park(4)
            #expect(await daemon.waitForLog("source restored", timeout: 4), "\(daemon.log)")
            _ = await daemon.stop()

            let events = try Self.regionEvents(cli.stateDir)
            #expect(
                events.map { $0["type"]?.stringValue } == ["determined", "determined", "determined"],
                "\(events.map(Self.essence))")
            let store = try StateStore(directory: cli.stateDir)
            let sourceEvents = try store.outbox.events(after: 0, limit: 100).filter { $0.type == "source" }.map {
                try JSON.parse($0.body)["state"]?.stringValue ?? ""
            }
            #expect(sourceEvents == ["lost", "restored"])
        }
    }

    @Test("no gpsd at start: the daemon runs, status says unreachable and how to fix it, then it connects")
    func noGPSDAtStart() async throws {
        let gpsd = try await GPSDHarness(start: false)
        try await withCLI { cli in
            let daemon = try cli.daemon(["--gpsd", "127.0.0.1:\(gpsd.port)"])
            #expect(await daemon.waitForLog("is not reachable", timeout: 5), "\(daemon.log)")
            #expect(daemon.isRunning)

            let status = try cli.run("status", "--gpsd", "127.0.0.1:\(gpsd.port)", "--wait", "1s")
            #expect(status.status == 3, "the engine runs, gpsd does not: not ready")
            #expect(status.stdout.contains("gpsd is not reachable at 127.0.0.1:\(gpsd.port)"), "\(status.stdout)")
            #expect(status.stdout.contains("sudo systemctl start gpsd"))
            #expect(status.stdout.contains("running (pid \(daemon.pid)"), "\(status.stdout)")
            let json = try JSON.parse(
                try cli.run("status", "--json", "--gpsd", "127.0.0.1:\(gpsd.port)", "--wait", "1s").stdout)
            #expect(json["hardware"]?["reachable"] == false)
            #expect(json["engine"]?["running"] == true)

            try await gpsd.start()
            #expect(await daemon.waitForLog("connected to gpsd", timeout: 35), "\(daemon.log)")
            let stopped = await daemon.stop()
            #expect(stopped != nil)
        }
    }

    @Test("a silent source: locate gives up at its timeout with the silent exit code; the daemon reports silent")
    func silentSource() async throws {
        let gpsd = try await GPSDHarness()
        try await withCLI { cli in
            // A receiver that talks but has no fix.
            let talker = Task {
                let generator = NMEAGenerator()
                while !Task.isCancelled {
                    try? gpsd.send(nmea: generator.noFixSentences(at: Date()).joined(separator: "\r\n"))
                    // The receiver's pace, not a wait.
                    try? await Task.sleep(for: .milliseconds(500))
                }
            }
            defer { talker.cancel() }
            let daemon = try cli.daemon(["--gpsd", "127.0.0.1:\(gpsd.port)", "--first-fix-deadline", "2s"])

            let started = Date()
            let locate = try cli.run("locate", "--gpsd", "127.0.0.1:\(gpsd.port)", "--timeout", "2s")
            let took = Date().timeIntervalSince(started)
            #expect(locate.status == 3, "\(locate.stderr)")
            #expect(took >= 2 && took <= 2.5, "locate took \(took) s")
            #expect(locate.stderr.hasPrefix("Error: no usable fix within 2s"), "\(locate.stderr)")

            let json = try cli.run("locate", "--json", "--gpsd", "127.0.0.1:\(gpsd.port)", "--timeout", "1s")
            #expect(json.status == 3)
            #expect(try JSON.parse(json.stdout)["outcome"]?.stringValue == "silent")

            #expect(await daemon.waitForLog("source silent", timeout: 5), "\(daemon.log)")
            _ = await daemon.stop()
        }
    }

    @Test("locate returns the first fix that meets the target, and a coarse one at the deadline")
    func locate() async throws {
        let gpsd = try await GPSDHarness()
        try withCLI { cli in
            // On a thread of its own: `cli.run` blocks its caller, and with the other tests of the suite running at
            // once, a task could wait seconds for a cooperative thread, and gpsd would have no fix to give.
            let feeding = Atomic(true)
            let feeder = Thread {
                let generator = NMEAGenerator()
                while feeding.load(ordering: .relaxed) {
                    // HDOP 0.5 gives gpsd's eph of about 9.5 m.
                    try? gpsd.send(
                        nmea: generator.sentences(
                            for: .init(
                                time: Date(), latitude: Self.start.latitude, longitude: Self.start.longitude, hdop: 0.5)
                        ).joined(separator: "\r\n"))
                    // The receiver's pace, not a wait.
                    Thread.sleep(forTimeInterval: 0.25)
                }
            }
            feeder.start()
            defer { feeding.store(false, ordering: .relaxed) }
            let met = try cli.run(
                "locate", "--json", "--gpsd", "127.0.0.1:\(gpsd.port)", "--accuracy", "20", "--timeout", "5s")
            #expect(met.status == 0, "\(met.stderr)")
            let fix = try JSON.parse(met.stdout)
            #expect(fix["outcome"]?.stringValue == "met")
            #expect(abs((fix["lat"]?.doubleValue ?? 0) - Self.start.latitude) < 1e-5)
            #expect((fix["accuracy"]?.doubleValue ?? 99) <= 20)

            let coarse = try cli.run("locate", "--gpsd", "127.0.0.1:\(gpsd.port)", "--accuracy", "1", "--timeout", "1s")
            #expect(coarse.status == 2, "\(coarse.stderr)")
            #expect(coarse.stdout.contains("coarse"))
        }
    }
}
