import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Exit statuses a script can trust: `status` says ready (0), not ready (3) or no engine (69); `watch` says
/// 69 when the engine goes away under it and 0 only when it is stopped.
@Suite("exit statuses: status and watch", .serialized)
struct ExitStatusTests {
    /// An engine fed by a FIFO (no gpsd anywhere), with one usable fix a second so its data answer is ok.
    final class FleetEngine: @unchecked Sendable {
        let cli: CLI
        let daemon: DaemonProcess
        let feed: FleetFeed
        private let feeding: Task<Void, Never>

        init(_ cli: CLI) throws {
            self.cli = cli
            let fifo = cli.dir.file("fleet.fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            daemon = try cli.daemon(["--source", "json:" + fifo])
            let feed = try FleetFeed(fifo: fifo)
            self.feed = feed
            feeding = Task {
                var second = 0
                while !Task.isCancelled {
                    feed.send([FleetSourceTests.line(second)])
                    second += 1
                    // The fleet's pace (a fix every 0.2 s), not a wait.
                    try? await Task.sleep(for: .milliseconds(200))
                }
            }
        }

        func stop() async {
            feeding.cancel()
            feed.close()
            _ = await daemon.stop()
        }
    }

    /// `status` until its JSON satisfies `done`; returns the last run.
    static func status(_ cli: CLI, until done: (JSONValue) -> Bool) async throws -> GeofenceBinary.Result {
        var last: GeofenceBinary.Result?
        _ = try await Wait.until(timeout: 30, every: .milliseconds(100)) {
            let result = try cli.run(
                ["status", "--json", "--wait", "0.5s"], environment: try FleetSourceTests.deadGPSD())
            last = result
            return done((try? JSON.parse(result.stdout)) ?? .null)
        }
        return last!
    }

    @Test("status exits 69 with no engine, 0 when all four answers are ok, 3 when one is a problem")
    func statusExitStatus() async throws {
        try await withCLI { cli in
            try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100")

            // No engine (and no gpsd): the report is printed, and the status says no engine.
            let stopped = try cli.run(["status", "--wait", "0.3s"], environment: try FleetSourceTests.deadGPSD())
            #expect(stopped.status == 69, "\(stopped.stdout)\(stopped.stderr)")
            #expect(stopped.stdout.contains("not running"), "\(stopped.stdout)")
            #expect(stopped.stderr.isEmpty, "the report said it all: \(stopped.stderr)")
            let stoppedJSON = try cli.run(
                ["status", "--json", "--wait", "0.3s"], environment: try FleetSourceTests.deadGPSD())
            #expect(stoppedJSON.status == 69)
            #expect(try JSON.parse(stoppedJSON.stdout)["engine"]?["running"] == false)

            let engine = try FleetEngine(cli)
            let ready = try await Self.status(cli) { $0["data"]?["ok"] == true && $0["hardware"]?["ok"] == true }
            #expect(ready.status == 0, "\(ready.stdout)")
            let text = try cli.run(["status", "--wait", "0.3s"], environment: try FleetSourceTests.deadGPSD())
            #expect(text.status == 0, "\(text.stdout)")
            #expect(!text.stdout.contains("PROBLEM"), "\(text.stdout)")

            // Location Services off: the engine answers, but it is not ready.
            #expect(try cli.run("services", "off").status == 0)
            let off = try await Self.status(cli) { $0["services"]?["on"] == false }
            #expect(off.status == 3, "\(off.stdout)")
            let offText = try cli.run(["status", "--wait", "0.3s"], environment: try FleetSourceTests.deadGPSD())
            #expect(offText.status == 3)
            #expect(offText.stdout.contains("2 Service     OFF"), "\(offText.stdout)")
            #expect(try cli.run("services", "on").status == 0)
            let back = try await Self.status(cli) { $0["services"]?["on"] == true && $0["data"]?["ok"] == true }
            #expect(back.status == 0, "\(back.stdout)")
            await engine.stop()
        }
    }

    /// `geofence watch` in the background, connected: a services switch it printed proves it is streaming.
    static func connectedWatch(_ cli: CLI) async throws -> DaemonProcess {
        let watch = try DaemonProcess(
            ["watch", "--state-dir", cli.stateDir], logPath: cli.dir.file("watch.log"), environment: cli.environment)
        for attempt in 0..<40 {
            #expect(try cli.run("services", attempt % 2 == 0 ? "off" : "on").status == 0)
            if await watch.waitForLog("\"services\"", timeout: 0.5) { break }
        }
        #expect(watch.log.contains("\"services\""), "watch never streamed: \(watch.log)")
        return watch
    }

    /// Waits for `process` to end; its exit status, or nil if it did not end within `timeout` (or died of a
    /// signal).
    static func exitStatus(_ process: DaemonProcess, timeout: Double) async -> Int32? {
        _ = await Wait.until(timeout: timeout, every: .milliseconds(20)) { !process.isRunning }
        guard !process.isRunning, process.process.terminationReason == .exit else { return nil }
        return process.process.terminationStatus
    }

    @Test("watch exits 69 with one line when the engine stops under it")
    func watchEngineStops() async throws {
        try await withCLI { cli in
            let engine = try FleetEngine(cli)
            #expect(await engine.daemon.waitForLog("control socket at", timeout: 10), "\(engine.daemon.log)")
            let watch = try await Self.connectedWatch(cli)
            let streamed = watch.log
            await engine.stop()
            #expect(await Self.exitStatus(watch, timeout: 5) == 69, "\(watch.log)")
            let said = String(watch.log.dropFirst(streamed.count))
            #expect(
                said.split(separator: "\n") == ["Error: the engine at \(cli.socket) stopped: no more events to watch"])
        }
    }

    @Test("watch exits 0 on Ctrl-C and on SIGTERM", arguments: [SIGINT, SIGTERM])
    func watchStoppedByTheUser(signal: Int32) async throws {
        try await withCLI { cli in
            let engine = try FleetEngine(cli)
            #expect(await engine.daemon.waitForLog("control socket at", timeout: 10), "\(engine.daemon.log)")
            let watch = try await Self.connectedWatch(cli)
            kill(watch.pid, signal)
            #expect(await Self.exitStatus(watch, timeout: 5) == 0, "\(watch.log)")
            #expect(!watch.log.contains("Error"), "\(watch.log)")
            #expect(engine.daemon.isRunning)
            await engine.stop()
        }
    }

    @Test("watch exits 0 when its reader goes away (| head -n 1), at the next event")
    func watchOutputClosed() async throws {
        try await withCLI { cli in
            let engine = try FleetEngine(cli)
            #expect(await engine.daemon.waitForLog("control socket at", timeout: 10), "\(engine.daemon.log)")
            let out = cli.dir.file("pipeline.out")
            _ = FileManager.default.createFile(atPath: out, contents: nil)
            let pipeline = Process()
            // timeout kills the whole pipeline should watch never end.
            pipeline.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
            pipeline.arguments = [
                "-s", "KILL", "30", "/bin/bash", "-c",
                #""$0" watch --state-dir "$1" | head -n 1; echo "status ${PIPESTATUS[0]}""#, GeofenceBinary.path,
                cli.stateDir,
            ]
            pipeline.environment = ProcessInfo.processInfo.environment.merging(cli.environment) { $1 }
            pipeline.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
            pipeline.standardInput = FileHandle.nullDevice
            try GPSDHarness.withUnblockedSignals { try pipeline.run() }
            // Events until the pipeline ends: the first goes through head, a later one finds the pipe closed.
            for attempt in 0..<60 where pipeline.isRunning {
                #expect(try cli.run("services", attempt % 2 == 0 ? "off" : "on").status == 0)
                // The pace of the events that make the pipeline end; its end is what the loop waits for.
                try await Task.sleep(for: .milliseconds(100))
            }
            let ended = !pipeline.isRunning
            if !ended { pipeline.terminate() }
            pipeline.waitUntilExit()
            let printed = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
            #expect(ended, "watch kept running with nobody reading: \(printed)")
            let lines = printed.split(separator: "\n")
            #expect(lines.count == 2 && lines[0].contains("\"services\""), "\(printed)")
            #expect(lines.last == "status 0", "\(printed)")
            #expect(engine.daemon.isRunning)
            await engine.stop()
        }
    }
}
