import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// `run --subject NAME` (GEOFENCE_SUBJECT): a box names itself; its receiver's events carry NAME, not gpsd's
/// device path.
@Suite("a box names itself", .enabled(if: GPSDHarness.isAvailable, "\(GPSDHarness.unavailableReason)"))
struct SubjectNameTests {
    @Test func theEventsOfTheReceiverCarryTheBoxsName() async throws {
        let gpsd = try await GPSDHarness()
        try await withCLI { cli in
            try DaemonTests.addRegions(cli)
            let daemon = try DaemonProcess(
                ["run", "--state-dir", cli.stateDir, "--gpsd", "127.0.0.1:\(gpsd.port)"],
                logPath: cli.dir.file("run.log"),
                environment: cli.environment.merging(["GEOFENCE_SUBJECT": "truck-7"]) { $1 })
            #expect(await daemon.waitForLog("connected to gpsd", timeout: 10), "\(daemon.log)")
            let watcher = try GPSDWatcher(port: gpsd.port)
            defer { watcher.close() }
            _ = await Wait.until(timeout: 5, every: .milliseconds(20)) {
                watcher.reports.contains { $0.contains("\"DEVICES\"") }
            }
            for epoch in DaemonTests.drive(epochs: 40, from: Date().addingTimeInterval(-15)) {
                try await gpsd.send(nmea: epoch, pace: .milliseconds(60))
                // The receiver's pace (5 epochs a second), not a wait.
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(await daemon.waitForLog("event enter region=\"gate\"", timeout: 10), "\(daemon.log)")
            #expect(await daemon.stop() != nil)

            let events = try DaemonTests.regionEvents(cli.stateDir)
            #expect(events.count >= 3, "\(events)")
            for event in events {
                #expect(event["subject"]?.stringValue == "truck-7", "\(event.serialized())")
            }
            let vehicles = try cli.run("vehicles", "--json")
            let subjects = try JSON.parse(Array(vehicles.stdout.utf8)).arrayValue?.compactMap {
                $0["subject"]?.stringValue
            }
            #expect(subjects == ["truck-7"], "\(vehicles.stdout)")
        }
    }

    @Test func aNameIsForAGpsdReceiverAndMustBeAName() throws {
        try withCLI { cli in
            let fleet = try cli.run(["run", "--subject", "truck-7", "--source", "json:-"])
            #expect(fleet.status == 64)
            #expect(fleet.stderr.hasPrefix("Error: --subject names a gpsd receiver"), "\(fleet.stderr)")
            let control = try cli.run(["run", "--print-config"], environment: ["GEOFENCE_SUBJECT": "truck\u{7}7"])
            #expect(control.status == 64)
            #expect(
                control.stderr.hasPrefix("Error: invalid value for GEOFENCE_SUBJECT (--subject): the name"),
                "\(control.stderr)")
            #expect(!FileManager.default.fileExists(atPath: cli.stateDir))
        }
    }
}
