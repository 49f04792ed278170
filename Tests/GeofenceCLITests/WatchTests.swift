import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence watch` against a running engine: one watcher that stops reading holds up nobody.
@Suite("watch", .serialized)
struct WatchTests {
    @Test("a watcher that stops reading is cut off; another keeps receiving events within 1 s of their commit")
    func stuckWatcher() async throws {
        try await withCLI { cli in
            try await withEngine(cli, ["--gpsd", "127.0.0.1:9"], timeout: 10) { daemon in
                let store = try StateStore(directory: cli.stateDir)
                var ids = EventIDGenerator()
                @discardableResult
                func record(_ state: String, count: Int = 1, size: Int = 0) throws -> [String] {
                    let events = (0..<count).map { _ in
                        StateEvent(
                            id: ids.next(now: Date()), type: .source, time: Date(), state: state,
                            reason: String(repeating: "x", count: size))
                    }
                    try store.outbox.append(events)
                    return events.map(\.id)
                }

                // A raw client that asks to watch and never reads.
                let stuck = try RawClient(cli.socket)
                defer { stuck.close() }
                #expect(try JSON.parse(try stuck.exchange(#"{"method":"watch"}"#))["ok"] == true)
                let live = try DaemonProcess(
                    ["watch"], logPath: cli.dir.file("watch.log"), environment: cli.environment)
                // And a `geofence watch` that is stopped (SIGSTOP) while the events come, then goes on.
                let paused = try DaemonProcess(
                    ["watch"], logPath: cli.dir.file("paused.log"), environment: cli.environment)
                var ready = false
                for _ in 0..<100 where !ready {
                    try record("ready")
                    let first = await live.waitForLog("\"ready\"", timeout: 0.1)
                    let second = await paused.waitForLog("\"ready\"", timeout: 0.1)
                    ready = first && second
                }
                #expect(ready, "\(live.log)")
                kill(paused.pid, SIGSTOP)

                // 10 MB of events, far more than any socket holds.
                let sent = try record("bulk", count: 8_000, size: 1_200)
                let bulk = Date()
                #expect(
                    await live.waitForLog("\"bulk\"", occurrences: 8_000, timeout: 20), "the live watcher got them all")
                // Each once, in commit order, though ten times its buffer came at once.
                let got = try String(contentsOfFile: live.logPath, encoding: .utf8).split(separator: "\n").compactMap {
                    line -> String? in
                    guard line.contains("\"bulk\""), let event = try? JSON.parse(String(line)) else { return nil }
                    return event["id"]?.stringValue
                }
                #expect(
                    got == sent,
                    "\(got.count) bulk events, first differing at \(zip(got, sent).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? -1)"
                )
                for i in 0..<3 {
                    try record("marker-\(i)")
                    let committed = Date()
                    let seen = await Wait.until(timeout: 5) { Self.tail(live.logPath).contains("marker-\(i)") }
                    #expect(seen)
                    #expect(Date().timeIntervalSince(committed) < 1, "live event \(i) within 1 s of its commit")
                }

                // The stuck one was cut off once it had taken nothing for 5 s: what it can still read ends, far short
                // of what was sent. The cut shows nowhere but in what it reads, and reading before it would be taking
                // events: only time can pass here.
                try await Task.sleep(for: .seconds(max(0, 6 - Date().timeIntervalSince(bulk))))
                var received: [UInt8] = []
                var chunk = [UInt8](repeating: 0, count: 65_536)
                var ended = false
                while true {
                    let n = chunk.withUnsafeMutableBytes { recv(stuck.fd, $0.baseAddress, $0.count, 0) }
                    if n == 0 { ended = true }
                    if n <= 0 { break }
                    received += chunk[0..<n]
                }
                #expect(ended, "the engine closed the stuck watcher")
                #expect(received.count < 4 << 20, "\(received.count) bytes: its buffer was bounded")
                kill(paused.pid, SIGCONT)
                _ = await Wait.until(timeout: 20, every: .milliseconds(50)) { !paused.isRunning }
                #expect(!paused.isRunning && paused.process.terminationStatus == 75, "the paused watch ends, exit 75")
                #expect(Self.tail(paused.logPath).contains("Error: this watcher took no events"), "and says why")
                // Reading again, it was told why, in a line of its own.
                let lastLine = String(decoding: received.dropLast().split(separator: 10).last ?? [], as: UTF8.self)
                #expect(lastLine.hasPrefix(#"{"ok":false"#) && lastLine.contains("cut off"), "\(lastLine.prefix(300))")
                #expect(live.isRunning, "the live watcher was not cut off")
                _ = await live.stop()
                _ = await daemon.stop()
            }
        }
    }

    /// The last 64 KiB of a file (the whole log is megabytes: reading it all would be the slow part).
    static func tail(_ path: String) -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else { return "" }
        defer { try? handle.close() }
        let end = (try? handle.seekToEnd()) ?? 0
        try? handle.seek(toOffset: end > 65_536 ? end - 65_536 : 0)
        return String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
    }
}
