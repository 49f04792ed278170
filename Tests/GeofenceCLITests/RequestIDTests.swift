import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Changes under a request id: a retry is answered from the engine's record, and a change cut off by the
/// engine's death says it may have been applied and how to check.
@Suite("request ids", .serialized)
struct RequestIDTests {
    @Test("add, remove and import retried with the same request id are answered from the record, across restarts")
    func idempotentRetries() async throws {
        try await withCLI { cli in
            var daemon = try cli.daemon(["--gpsd", "127.0.0.1:9"])
            #expect(await daemon.waitForLog("control socket at", timeout: 10), "\(daemon.log)")
            let add = ["add", "--id", "x", "--lat", "1", "--lon", "1", "--radius", "50", "--request-id", "r-add"]
            for _ in 0..<2 {
                let added = try cli.run(add)
                #expect(added.status == 0 && added.stdout.contains("Added region \"x\""), "\(added)")
            }
            #expect(try cli.run(Array(add.dropLast(2))).status == 65, "without the id, a second add is a duplicate")
            let file = cli.dir.file("regions.json")
            try #"{"regions": [{"id": "y", "lat": 2, "lon": 2, "radius": 30}]}"#.write(
                toFile: file, atomically: true, encoding: .utf8)
            for _ in 0..<2 {
                let imported = try cli.run("import", file, "--request-id", "r-import")
                #expect(imported.status == 0, "\(imported)")
            }
            let reused = try cli.run("remove", "x", "--request-id", "r-add")
            #expect(reused.status == 65 && reused.stderr.contains("was used for add"), "\(reused)")
            #expect(try cli.ids().sorted() == ["x", "y"])

            _ = await daemon.stop()
            daemon = try cli.daemon(["--gpsd", "127.0.0.1:9"], log: "run2.log")
            #expect(await daemon.waitForLog("control socket at", timeout: 10), "\(daemon.log)")
            for _ in 0..<2 {
                let removed = try cli.run("remove", "x", "--request-id", "r-remove")
                #expect(removed.status == 0 && removed.stdout.contains("Removed region \"x\""), "\(removed)")
            }
            #expect(try cli.run(add).status == 0, "the add's record outlived the restart")
            #expect(try cli.ids() == ["y"], "and it was not made again")
            _ = await daemon.stop()
        }
    }

    @Test("an add cut off by the engine's death says it may have been applied, how to check and how to retry")
    func interruptedAdd() async throws {
        try await withCLI { cli in
            var daemon = try cli.daemon(["--gpsd", "127.0.0.1:9"])
            #expect(await daemon.waitForLog("control socket at", timeout: 10), "\(daemon.log)")
            // An import in parts holds the store's write lock, so the add waits in the engine for it.
            let holder = try RawClient(cli.socket)
            defer { holder.close() }
            let staged = try holder.exchange(
                #"{"method":"import","params":{"regions":[{"id":"lock","lat":1,"lon":1,"radius":10}],"final":false}}"#)
            #expect(staged.contains("staged"), "\(staged)")
            let add = Process()
            add.executableURL = URL(fileURLWithPath: GeofenceBinary.path)
            add.arguments = [
                "add", "--id", "x", "--lat", "1", "--lon", "1", "--radius", "50", "--state-dir", cli.stateDir,
            ]
            add.environment = ProcessInfo.processInfo.environment.merging(cli.environment) { $1 }
            let err = Pipe()
            add.standardError = err
            try add.run()
            // Shows that something does not happen (the add does not end without the engine): only time shows it.
            try await Task.sleep(for: .seconds(1))
            #expect(add.isRunning, "the add waits for the engine")
            kill(daemon.pid, SIGKILL)
            add.waitUntilExit()
            let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(add.terminationStatus == 69, "\(message)")
            #expect(message.contains("may have been applied") && message.contains("geofence show x"), "\(message)")
            #expect(message.split(separator: "\n").count == 1, "\(message)")
            let requestID = try #require(Self.requestID(in: message), "\(message)")

            daemon = try cli.daemon(["--gpsd", "127.0.0.1:9"], log: "run2.log")
            #expect(await daemon.waitForLog("control socket at", timeout: 10), "\(daemon.log)")
            for _ in 0..<2 {
                let retried = try cli.run(
                    "add", "--id", "x", "--lat", "1", "--lon", "1", "--radius", "50", "--request-id", requestID)
                #expect(retried.status == 0, "\(retried)")
            }
            #expect(try cli.ids() == ["x"])
            _ = await daemon.stop()
        }
    }

    /// Runs `geofence ARGS` while a partial import on another connection holds the store's write lock (so
    /// the command's request waits in the engine), kills the engine with SIGKILL after a second, and returns
    /// the command's exit status and error line.
    static func interrupted(_ cli: CLI, _ daemon: DaemonProcess, _ args: [String]) async throws -> (Int32, String) {
        let holder = try RawClient(cli.socket)
        defer { holder.close() }
        let staged = try holder.exchange(
            #"{"method":"import","params":{"regions":[{"id":"lock","lat":1,"lon":1,"radius":10}],"final":false}}"#)
        #expect(staged.contains("staged"), "\(staged)")
        let command = Process()
        command.executableURL = URL(fileURLWithPath: GeofenceBinary.path)
        command.arguments = args + ["--state-dir", cli.stateDir]
        command.environment = ProcessInfo.processInfo.environment.merging(cli.environment) { $1 }
        let err = Pipe()
        command.standardError = err
        command.standardOutput = FileHandle.nullDevice
        command.standardInput = FileHandle.nullDevice
        try command.run()
        // Until it has connected (a file is checked first), and a little more for its request to be under way.
        _ = await Wait.until(timeout: 5) {
            !command.isRunning
                || ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(command.processIdentifier)/fd"))
                    ?? [])
                    .contains(where: {
                        (Int($0) ?? 0) > 2
                            && (try? FileManager.default.destinationOfSymbolicLink(
                                atPath: "/proc/\(command.processIdentifier)/fd/\($0)"))?.hasPrefix("socket:") == true
                    })
        }
        // Shows that something does not happen (the command does not end while the engine does not answer):
        // no signal, only time.
        try await Task.sleep(for: .milliseconds(500))
        #expect(command.isRunning, "\(args) waits for the engine")
        kill(daemon.pid, SIGKILL)
        daemon.process.waitUntilExit()
        command.waitUntilExit()
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(message.split(separator: "\n").count == 1, "one line: \(message)")
        return (command.terminationStatus, message)
    }

    /// The request id an interrupted command names (`--request-id ID` in the command it gives to retry).
    static func requestID(in message: String) -> String? {
        message.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ").drop { $0 != "--request-id" }
            .dropFirst().first.map(String.init)
    }

    @Test("an import cut off by SIGKILL says what became of it and the command that retries it, which imports once")
    func interruptedImport() async throws {
        try await withCLI { cli in
            var daemon = try cli.daemon(["--gpsd", "127.0.0.1:9"])
            #expect(await daemon.waitForLog("control socket at", timeout: 10), "\(daemon.log)")
            // Big enough for several parts: the engine holds the first, the CLI is still sending when it dies.
            let big = cli.dir.file("big.json")
            let name = String(repeating: "n", count: 250)
            let entries = (0..<6_000).map {
                #"{"id": "r\#($0)", "lat": 1.5, "lon": 2.5, "radius": 100, "name": "\#(name)"}"#
            }
            try (#"{"regions": ["# + entries.joined(separator: ",\n") + "]}").write(
                toFile: big, atomically: true, encoding: .utf8)
            let (status, message) = try await Self.interrupted(cli, daemon, ["import", big])
            #expect(status == 69, "\(message)")
            #expect(message.contains("before its last part: nothing was imported"), "\(message)")
            let id = try #require(Self.requestID(in: message), "\(message)")
            #expect(
                message.contains("geofence import \(big) --state-dir \(cli.stateDir) --request-id \(id)"), "\(message)")

            // The last part sent, the engine killed before it answers: it may have been applied.
            let small = cli.dir.file("small.json")
            try #"{"regions": [{"id": "s", "lat": 2, "lon": 2, "radius": 30}]}"#.write(
                toFile: small, atomically: true, encoding: .utf8)
            daemon = try cli.daemon(["--gpsd", "127.0.0.1:9"], log: "run2.log")
            #expect(await daemon.waitForLog("control socket at", timeout: 10), "\(daemon.log)")
            let (smallStatus, smallMessage) = try await Self.interrupted(cli, daemon, ["import", small])
            #expect(smallStatus == 69, "\(smallMessage)")
            #expect(smallMessage.contains("may have been applied") && smallMessage.contains("geofence list"))
            let smallID = try #require(Self.requestID(in: smallMessage), "\(smallMessage)")
            #expect(
                smallMessage.hasSuffix(
                    "geofence import \(small) --state-dir \(cli.stateDir) --request-id \(smallID)\n"),
                "\(smallMessage)")

            daemon = try cli.daemon(["--gpsd", "127.0.0.1:9"], log: "run3.log")
            #expect(await daemon.waitForLog("control socket at", timeout: 10), "\(daemon.log)")
            for (file, requestID) in [(big, id), (small, smallID)] {
                for _ in 0..<2 {
                    let retried = try cli.run("import", file, "--request-id", requestID)
                    #expect(retried.status == 0, "\(retried)")
                }
                #expect(try cli.run("import", file).status == 65, "applied once: without the id, a duplicate")
            }
            #expect(try cli.ids().count == 6_001)
            _ = await daemon.stop()
        }
    }

    @Test(
        "hook and sink changes, the switch and permissions cut off by SIGKILL: may have been applied, and how to retry")
    func interruptedChanges() async throws {
        try await withCLI { cli in
            var daemon = try cli.daemon(["--gpsd", "127.0.0.1:9"])
            #expect(await daemon.waitForLog("control socket at", timeout: 10), "\(daemon.log)")
            var retries: [(args: [String], id: String, command: String)] = []
            for args in [
                ["hook", "add", "--on", "all", "--command", "echo 'it''s' >/dev/null"],
                ["sink", "add", "--mqtt", "mqtt://127.0.0.1:9"],
            ] {
                let (status, message) = try await Self.interrupted(cli, daemon, args)
                #expect(status == 69, "\(message)")
                #expect(message.contains("may have been applied"), "\(message)")
                let id = try #require(Self.requestID(in: message), "\(message)")
                let command = try #require(message.range(of: "whatever happened: ").map { message[$0.upperBound...] })
                retries.append((args, id, command.trimmingCharacters(in: .whitespacesAndNewlines)))
                daemon = try cli.daemon(["--gpsd", "127.0.0.1:9"], log: "run-\(retries.count).log")
                #expect(await daemon.waitForLog("control socket at", timeout: 10), "\(daemon.log)")
            }
            for (args, expected) in [
                (["services", "off"], "geofence services off"),
                (["permission", "grant", "4242"], "permission grant 4242"),
            ] {
                let (status, message) = try await Self.interrupted(cli, daemon, args)
                #expect(status == 69, "\(message)")
                #expect(
                    message.contains("may have been applied") && message.contains("run the same command again")
                        && message.contains(expected), "\(message)")
                daemon = try cli.daemon(["--gpsd", "127.0.0.1:9"], log: "run-\(args[0]).log")
                #expect(await daemon.waitForLog("control socket at", timeout: 10), "\(daemon.log)")
            }
            // The command each names, run as given, through a shell: once made, then answered from the record.
            for (_, _, command) in retries {
                for _ in 0..<2 {
                    let shell = Process()
                    shell.executableURL = URL(fileURLWithPath: "/bin/sh")
                    shell.arguments = ["-c", #"geofence() { "$GEOFENCE_BINARY" "$@"; }; "# + command]
                    shell.environment = ProcessInfo.processInfo.environment.merging(cli.environment) { $1 }
                        .merging(["GEOFENCE_BINARY": GeofenceBinary.path]) { $1 }
                    shell.standardOutput = FileHandle.nullDevice
                    try shell.run()
                    shell.waitUntilExit()
                    #expect(shell.terminationStatus == 0, "\(command)")
                }
            }
            let hooks = try JSON.parse(try cli.run("hook", "list", "--json").stdout).arrayValue ?? []
            #expect(hooks.count == 1, "\(hooks)")
            let sinks = try JSON.parse(try cli.run("sink", "list", "--json").stdout).arrayValue ?? []
            #expect(sinks.count == 1, "\(sinks)")
            let hookID = try #require(hooks.first?["id"]?.stringValue)
            for _ in 0..<2 {
                let removed = try cli.run("hook", "remove", hookID, "--request-id", "rm-1")
                #expect(removed.status == 0, "the retry is answered from the record: \(removed)")
            }
            _ = await daemon.stop()
        }
    }
}
