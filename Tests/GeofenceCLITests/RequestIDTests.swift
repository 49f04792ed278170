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
        let cli = try CLI()
        defer { cli.dir.remove() }
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

    @Test("an add cut off by the engine's death says it may have been applied, how to check and how to retry")
    func interruptedAdd() async throws {
        let cli = try CLI()
        defer { cli.dir.remove() }
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
        add.arguments = ["add", "--id", "x", "--lat", "1", "--lon", "1", "--radius", "50", "--state-dir", cli.stateDir]
        add.environment = ProcessInfo.processInfo.environment.merging(cli.environment) { $1 }
        let err = Pipe()
        add.standardError = err
        try add.run()
        try await Task.sleep(for: .seconds(1))
        #expect(add.isRunning, "the add waits for the engine")
        kill(daemon.pid, SIGKILL)
        add.waitUntilExit()
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(add.terminationStatus == 69, "\(message)")
        #expect(message.contains("may have been applied") && message.contains("geofence show x"), "\(message)")
        #expect(message.split(separator: "\n").count == 1, "\(message)")
        let requestID = try #require(
            message.split(separator: " ").drop { $0 != "--request-id" }.dropFirst().first.map {
                String($0.prefix { $0 != ":" })
            })

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
