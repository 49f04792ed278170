import Foundation
import GeofenceCore
import GeofenceTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// No silent "ok": fixes that arrive and are all refused are said, in their own words, by the engine (log,
/// state event, metrics) and by `status`, which asks the gpsd the engine reads.
@Suite("no silent ok", .enabled(if: GPSDHarness.isAvailable, "\(GPSDHarness.unavailableReason)"))
struct SilentOKTests {
    @Test(
        "a drive stamped 15 days ago: the engine and status say the fixes are 15 days old, not that the sky is hidden")
    func staleDrive() async throws {
        let gpsd = try await GPSDHarness()
        try await withCLI { cli in
            try DaemonTests.addRegions(cli)
            let daemon = try cli.daemon(["--gpsd", "127.0.0.1:\(gpsd.port)", "--first-fix-deadline", "2s"])
            #expect(await daemon.waitForLog("connected to gpsd", timeout: 10), "\(daemon.log)")
            // A recorded drive played with its original times, as a user feeding an old recording does.
            let feeding = Task {
                let old = Date().addingTimeInterval(-15 * 86_400 - 3600)
                for (i, epoch) in DaemonTests.drive(epochs: 400, from: old).enumerated() where !Task.isCancelled {
                    try? await gpsd.send(nmea: epoch, pace: .milliseconds(20))
                    // The recording's pace, not a wait.
                    try? await Task.sleep(for: .milliseconds(i < 10 ? 20 : 80))
                }
            }
            defer { feeding.cancel() }
            let words = "fixes arrive but are 15 days old: check the receiver's clock or gpsd's time"
            #expect(await daemon.waitForLog(words, timeout: 15), "\(daemon.log)")
            #expect(daemon.log.contains("source silent: no usable fix since the source started: " + words))
            let events = try cli.run("events", "--json").stdout
            #expect(events.contains(#""type":"source""#) && events.contains("15 days old"), "\(events)")

            // `status` without --gpsd asks the engine's gpsd (not localhost:2947) and says why no fix is used.
            // (The tests' environment sets no GEOFENCE_GPSD.)
            let status = try cli.run(["status", "--json", "--wait", "3s"])
            let json = try JSON.parse(status.stdout)
            #expect(json["hardware"]?["gpsd"]?.stringValue == "127.0.0.1:\(gpsd.port)", "\(status.stdout)")
            #expect(json["hardware"]?["reachable"] == true)
            #expect(json["data"]?["problem"]?.stringValue?.contains("15 days old") == true, "\(status.stdout)")
            #expect(json["engine"]?["fixes"]?["refused"]?["stale"]?.intValue ?? 0 > 0, "\(status.stdout)")
            #expect(json["engine"]?["health"]?["ok"] == false)
            feeding.cancel()
            _ = await daemon.stop()
            #expect(daemon.log.contains("0 fixes accepted"), "\(daemon.log)")
            #expect(
                daemon.log.range(of: #"refused \([0-9]+ stale"#, options: .regularExpression) != nil, "\(daemon.log)")
        }
    }
}
