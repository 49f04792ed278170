import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// gpsd chaos (Docs/reliability.md): gpsd killed and restarted at random moments, then replaced by a
/// hostile server. The engine never crashes, says what it sees, reconnects, and fires no false event.
@Suite(
    "gpsd chaos", .serialized, .enabled(if: GPSDHarness.isAvailable, "\(GPSDHarness.unavailableReason)"))
struct ChaosTests {
    static let parked = Coordinate(latitude: 45.76, longitude: 4.84)

    @Test("gpsd killed and restarted at random moments, then a hostile server: no crash, no false event")
    func chaos() async throws {
        let restarts = SoakScale.pick(short: 5, long: 20)
        let gpsd = try await GPSDHarness()
        try await withCLI { cli in
            // The vehicle is parked inside "yard" all along; "far" is 2 km away. Any enter/exit is false.
            for (id, north, radius) in [("yard", 0.0, 150.0), ("far", 2000.0, 100.0)] {
                let c = offset(Self.parked, north: north, east: 0)
                #expect(
                    try cli.run(
                        "add", "--id", id, "--lat", String(c.latitude), "--lon", String(c.longitude), "--radius",
                        String(radius)
                    ).status == 0)
            }
            let daemon = try cli.daemon(["--gpsd", "127.0.0.1:\(gpsd.port)", "--stale-after", "2s"])
            #expect(await daemon.waitForLog("connected to gpsd", timeout: 10), "\(daemon.log)")

            // A receiver parked in the yard, jittering within its accuracy, fed throughout.
            let feeder = Task {
                let generator = NMEAGenerator()
                var rng = SeededGenerator(seed: 3)
                while !Task.isCancelled {
                    let p = offset(
                        Self.parked, north: Double.random(in: -4...4, using: &rng),
                        east: Double.random(in: -4...4, using: &rng))
                    try? gpsd.send(
                        nmea: generator.sentences(
                            for: .init(time: Date(), latitude: p.latitude, longitude: p.longitude, hdop: 0.5)
                        )
                        .joined(separator: "\r\n"))
                    // The receiver's pace, not a wait.
                    try? await Task.sleep(for: .milliseconds(250))
                }
            }
            defer { feeder.cancel() }
            #expect(await daemon.waitForLog("event determined region=\"yard\"", timeout: 10), "\(daemon.log)")

            var rng = SeededGenerator(seed: 11)
            for round in 1...restarts {
                // Kills and restarts at random moments are the test: there is nothing to wait for.
                try await Task.sleep(for: .milliseconds(Int.random(in: 200...1500, using: &rng)))
                gpsd.kill()
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...800, using: &rng)))
                try await gpsd.start()
                #expect(
                    await daemon.waitForLog("connected to gpsd", occurrences: round + 1, timeout: 40),
                    "round \(round): did not reconnect\n\(daemon.log)")
                #expect(daemon.isRunning, "round \(round)")
            }

            // gpsd replaced by a hostile server on its port.
            gpsd.stop()
            let hostile = try HostileGPSD(port: gpsd.port, seed: 5)
            // The engine comes back within its backoff (at most 30 s), then takes the garbage for a while.
            _ = await Wait.until(timeout: 40, every: .milliseconds(100)) { daemon.log.contains("is it really gpsd?") }
            // The soak itself: the engine takes the garbage for this long (no condition ends it).
            try await Task.sleep(for: .seconds(SoakScale.pick(short: 6.0, long: 60.0)))
            #expect(hostile.connectionCount >= 1, "the engine never came back to the port")
            // It says what it sees: lines that are not gpsd's, or a connection dropped on garbage.
            #expect(
                daemon.log.contains("is it really gpsd?") || daemon.log.contains("lost the connection"),
                "\(daemon.log)")
            #expect(daemon.isRunning, "the engine died under hostile input\n\(daemon.log)")
            #expect(try cli.run("list").status == 0, "the engine stopped answering")
            hostile.stop()

            let stopped = await daemon.stop()
            #expect(stopped != nil, "the engine did not stop cleanly after the chaos")
            #expect(daemon.process.terminationStatus == 0)

            let store = try StateStore(directory: cli.stateDir)
            let regionEvents = try store.outbox.events(after: 0, limit: 100_000).filter {
                RegionEventType(rawValue: $0.type) != nil
            }
            // "yard" is determined inside; "far" lies beyond the 1 km vicinity, so it is silently outside.
            #expect(regionEvents.map(\.type) == ["determined"], "\(regionEvents.map(\.body))")
            let sources = try store.outbox.events(after: 0, limit: 100_000).filter { $0.type == "source" }
            #expect(sources.count >= 2, "lost/restored were reported")
            #expect(try store.integrityCheck().isEmpty)
            if ProcessInfo.processInfo.environment["CHAOS_DEBUG"] != nil { print(daemon.log) }
            print(
                "gpsd chaos: \(restarts) kills and restarts, \(hostile.connectionCount) hostile connections, "
                    + "\(hostile.messageCount) hostile messages, \(sources.count) source events, "
                    + "\(regionEvents.filter { $0.type != "determined" }.count) false region events")
        }
    }
}
