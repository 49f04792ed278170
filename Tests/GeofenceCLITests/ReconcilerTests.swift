import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Requested regions against active ones: the switch, the source, the limit. Regions are never lost.
@Suite("reconciler", .serialized)
struct ReconcilerTests {
    static func statuses(_ cli: CLI) throws -> [String: String] {
        var all: [String: String] = [:]
        for r in try cli.regions() {
            let kind = r["status"]?.stringValue ?? "?"
            all[r["id"]?.stringValue ?? "?"] = r["reason"]?.stringValue.map { "\(kind): \($0)" } ?? kind
        }
        return all
    }

    /// Polls until `condition` holds on the regions' statuses; returns the seconds it took, or nil.
    static func waitFor(_ cli: CLI, timeout: Double, _ condition: ([String: String]) -> Bool) async throws -> Double? {
        let started = Date()
        while Date().timeIntervalSince(started) < timeout {
            if condition(try statuses(cli)) { return Date().timeIntervalSince(started) }
            try await Task.sleep(for: .milliseconds(100))
        }
        return nil
    }

    /// The region events (not the region-status state events) in the outbox.
    static func regionEvents(_ cli: CLI) throws -> [StoredEvent] {
        try StateStore(directory: cli.stateDir).events(after: 0, limit: 10_000).filter {
            RegionEventType(rawValue: $0.type) != nil
        }
    }

    @Test("--max-regions 10 with 15 regions: 5 pending: limit; removing 3 activates 3")
    func limit() async throws {
        let cli = try CLI()
        defer { cli.dir.remove() }
        for i in 1...15 {
            #expect(
                try cli.run("add", "--id", "r\(i)", "--lat", "\(40 + i)", "--lon", "1", "--radius", "50").status == 0)
        }
        let daemon = try cli.daemon(["--gpsd", "127.0.0.1:9", "--max-regions", "10"])
        let settled = try await Self.waitFor(cli, timeout: 5) { s in
            s.values.filter { $0 == "pending: limit" }.count == 5
        }
        #expect(settled != nil, "\((try? Self.statuses(cli)) ?? [:])")
        // The newest five wait; the oldest ten are monitored.
        let s = try Self.statuses(cli)
        #expect((11...15).allSatisfy { s["r\($0)"] == "pending: limit" }, "\(s)")
        #expect((1...10).allSatisfy { s["r\($0)"] == "monitoring" }, "\(s)")
        #expect(try cli.run("remove", "r2", "r3", "r4").status == 0)
        let activated = try await Self.waitFor(cli, timeout: 3) { s in
            (11...13).allSatisfy { s["r\($0)"] == "monitoring" }
                && s.values.filter { $0 == "pending: limit" }.count == 2
        }
        #expect(activated != nil, "\((try? Self.statuses(cli)) ?? [:])")
        #expect(try cli.ids().count == 12)
        let events = try StateStore(directory: cli.stateDir).events(after: 0, limit: 1000).filter {
            $0.type == "region-status"
        }
        #expect(events.count == 8, "5 pending, then 3 monitoring: \(events.map(\.body))")
        _ = await daemon.stop()
    }

    @Test("--max-regions 2: a region added beyond the limit while the engine runs stays pending: limit")
    func limitWhileRunning() async throws {
        let cli = try CLI()
        defer { cli.dir.remove() }
        try await cli.addRegions([Coordinate(latitude: 40, longitude: 1), Coordinate(latitude: 41, longitude: 1)])
        let daemon = try cli.daemon(["--gpsd", "127.0.0.1:9", "--max-regions", "2"])
        #expect(try await Self.waitFor(cli, timeout: 5) { $0.values.allSatisfy { $0 == "monitoring" } } != nil)
        #expect(try cli.run("add", "--id", "late", "--lat", "42", "--lon", "1", "--radius", "50").status == 0)
        let held = try await Self.waitFor(cli, timeout: 5) { $0["late"] == "pending: limit" }
        #expect(held != nil, "\((try? Self.statuses(cli)) ?? [:])\n\(daemon.log)")
        // Ticks later (one a second) it is still held: nothing the engine writes afterwards undoes the limit.
        try await Task.sleep(for: .milliseconds(2500))
        let s = try Self.statuses(cli)
        #expect(s["late"] == "pending: limit", "\(s)")
        #expect(s["r0"] == "monitoring" && s["r1"] == "monitoring", "\(s)")
        _ = await daemon.stop()
    }

    @Test("a region added with no engine waits for it; the engine's start, and a running engine, take it")
    func waitingForEngine() async throws {
        let cli = try CLI()
        defer { cli.dir.remove() }
        try await cli.addRegions([Coordinate(latitude: 40, longitude: 1), Coordinate(latitude: 41, longitude: 1)])
        #expect(try Self.statuses(cli) == ["r0": "pending: waiting-for-engine", "r1": "pending: waiting-for-engine"])
        let daemon = try cli.daemon(["--gpsd", "127.0.0.1:9"])
        let taken = try await Self.waitFor(cli, timeout: 5) { $0.values.allSatisfy { $0 == "monitoring" } }
        #expect(taken != nil, "\((try? Self.statuses(cli)) ?? [:])\n\(daemon.log)")
        #expect(try cli.run("add", "--id", "late", "--lat", "42", "--lon", "1", "--radius", "50").status == 0)
        let followed = try await Self.waitFor(cli, timeout: 5) { $0.count == 3 && $0["late"] == "monitoring" }
        #expect(followed != nil, "\((try? Self.statuses(cli)) ?? [:])\n\(daemon.log)")
        _ = await daemon.stop()
        // Stopped: what it monitored stays so; a region added now waits for the next start.
        #expect(try cli.run("add", "--id", "after", "--lat", "43", "--lon", "1", "--radius", "50").status == 0)
        let s = try Self.statuses(cli)
        #expect(s["after"] == "pending: waiting-for-engine" && s["late"] == "monitoring", "\(s)")
        let counts = try JSON.parse(try cli.run("status", "--json").stdout)
        #expect(counts["regions"]?["pending"]?.intValue == 1, "\(counts)")
        // Waiting is not an event: the engine's taking a region writes no region-status event.
        let events = try StateStore(directory: cli.stateDir).events(after: 0, limit: 100)
        #expect(!events.contains { $0.type == "region-status" }, "\(events.map { $0.body })")
    }

    @Test(
        "gpsd killed: every region fails location-unavailable within the staleness limit, and comes back",
        .enabled(if: GPSDHarness.isAvailable, "\(GPSDHarness.unavailableReason)"))
    func locationUnavailable() async throws {
        let gpsd = try await GPSDHarness()
        let cli = try CLI()
        defer { cli.dir.remove() }
        for i in 1...4 {
            #expect(
                try cli.run("add", "--id", "r\(i)", "--lat", "\(45 + i)", "--lon", "5", "--radius", "80").status == 0)
        }
        let daemon = try cli.daemon(["--gpsd", "127.0.0.1:\(gpsd.port)", "--stale-after", "3s"])
        #expect(await daemon.waitForLog("connected to gpsd", timeout: 10))
        let feeder = Task {
            let generator = NMEAGenerator()
            while !Task.isCancelled {
                try? gpsd.send(
                    nmea: generator.sentences(for: .init(time: Date(), latitude: 46, longitude: 5.01, hdop: 0.5))
                        .joined(separator: "\r\n"))
                try? await Task.sleep(for: .milliseconds(300))
            }
        }
        defer { feeder.cancel() }
        #expect(try await Self.waitFor(cli, timeout: 5) { $0.values.allSatisfy { $0 == "monitoring" } } != nil)

        let killedAt = Date()
        gpsd.kill()
        let failed = try await Self.waitFor(cli, timeout: 6) { s in
            s.count == 4 && s.values.allSatisfy { $0 == "failed: location-unavailable" }
        }
        _ = try #require(failed, "\((try? Self.statuses(cli)) ?? [:])\n\(daemon.log)")
        let failedIn = Date().timeIntervalSince(killedAt)
        #expect(failedIn <= 3.5, "failed after \(failedIn) s; the staleness limit is 3 s")
        let shown = try cli.run("show", "r1", "--json")
        let r1 = try JSON.parse(shown.stdout)
        #expect(r1["nextRetry"]?.stringValue != nil, "a failed region shows its next retry")
        // Retries are counted when due (1 s doubling, with jitter): the engine does not lose track of them.
        var attempts = 0
        for _ in 0..<50 where attempts < 2 {
            attempts = try JSON.parse(try cli.run("show", "r1", "--json").stdout)["attempts"]?.intValue ?? 0
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(attempts >= 2, "retries of a failed region are counted")

        try await gpsd.start()
        let back = try await Self.waitFor(cli, timeout: 40) { s in s.values.allSatisfy { $0 == "monitoring" } }
        #expect(back != nil, "\((try? Self.statuses(cli)) ?? [:])\n\(daemon.log)")
        #expect(try cli.ids().count == 4, "no region was lost")
        print(
            "location unavailable: failed \(String(format: "%.1f", failedIn)) s after the kill; back after gpsd returned"
        )
        _ = await daemon.stop()
    }

    @Test(
        "services off during a drive: nothing recorded, no hook, suspended; on: the crossing fires once, inferred",
        .enabled(if: GPSDHarness.isAvailable, "\(GPSDHarness.unavailableReason)"))
    func servicesOffDuringDrive() async throws {
        let gpsd = try await GPSDHarness()
        let cli = try CLI()
        defer { cli.dir.remove() }
        let start = Coordinate(latitude: 48.1, longitude: 11.5)
        let b = offset(start, north: 0, east: 600)
        #expect(try cli.run("add", "--id", "a", "--lat", "48.1", "--lon", "11.5", "--radius", "100").status == 0)
        #expect(
            try cli.run(
                "add", "--id", "b", "--lat", String(b.latitude), "--lon", String(b.longitude), "--radius", "100"
            )
            .status == 0)
        let hookLog = cli.dir.file("hooks")
        #expect(
            try cli.run(
                "hook", "add", "--on", "determined,enter,exit,dwell", "--command",
                #"echo "$GEOFENCE_EVENT $GEOFENCE_REGION $GEOFENCE_INFERRED" >> '\#(hookLog)'"#
            ).status == 0)
        let daemon = try cli.daemon(["--gpsd", "127.0.0.1:\(gpsd.port)"])
        #expect(await daemon.waitForLog("connected to gpsd", timeout: 10))

        let generator = NMEAGenerator()
        func drive(_ metres: [Double]) async throws {
            for east in metres {
                let p = offset(start, north: 0, east: east)
                try gpsd.send(
                    nmea: generator.sentences(
                        for: .init(
                            time: Date(), latitude: p.latitude, longitude: p.longitude, speed: 20, course: 90, hdop: 0.5
                        )
                    ).joined(separator: "\r\n"))
                try await Task.sleep(for: .milliseconds(250))
            }
        }
        try await drive([0, 0, 0, 0])
        #expect(await daemon.waitForLog("event determined region=\"a\"", timeout: 5), "\(daemon.log)")
        try await Task.sleep(for: .seconds(1))
        let before = try Self.regionEvents(cli)
        let hooksBefore = (try? String(contentsOfFile: hookLog, encoding: .utf8)) ?? ""

        #expect(try cli.run("services", "off").status == 0)
        let suspended = try await Self.waitFor(cli, timeout: 2) { s in
            s.values.allSatisfy { $0 == "suspended: services-off" }
        }
        #expect(suspended != nil, "\((try? Self.statuses(cli)) ?? [:])")
        // The vehicle drives from a into b while Location Services are off.
        try await drive(stride(from: 30.0, through: 600, by: 30).map { $0 } + [600, 600, 600])
        try await Task.sleep(for: .seconds(1))
        let during = try Self.regionEvents(cli)
        #expect(during.count == before.count, "events were recorded while off: \(during.map(\.body))")
        #expect(((try? String(contentsOfFile: hookLog, encoding: .utf8)) ?? "") == hooksBefore, "a hook ran while off")

        #expect(try cli.run("services", "on").status == 0)
        try await drive([600, 600, 600, 600])
        let resumed = try await Self.waitFor(cli, timeout: 3) { $0.values.allSatisfy { $0 == "monitoring" } }
        #expect(resumed != nil)
        #expect(await daemon.waitForLog("event enter region=\"b\"", timeout: 5), "\(daemon.log)")
        try await Task.sleep(for: .seconds(1.5))
        let after = try Self.regionEvents(cli).map { try JSON.parse($0.body) }
        let new = after.dropFirst(before.count)
        let crossings = new.filter { ["enter", "exit"].contains($0["type"]?.stringValue ?? "") }
        #expect(crossings.count == 2, "\(new.map { $0.serialized() })")
        #expect(crossings.allSatisfy { $0["inferred"] == true }, "\(crossings.map { $0.serialized() })")
        #expect(
            Set(crossings.map { "\($0["type"]!.stringValue!) \($0["region"]!.stringValue!)" }) == ["exit a", "enter b"])
        let hooks = (try? String(contentsOfFile: hookLog, encoding: .utf8)) ?? ""
        #expect(hooks.contains("enter b true"), "\(hooks)")
        _ = await daemon.stop()
    }
}
