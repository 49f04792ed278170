import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence run` under systemd's `Type=notify` (Packaging/geofence.service): a real datagram socket bound as
/// NOTIFY_SOCKET, as systemd binds it, and the engine's messages read from it.
@Suite("systemd notify and watchdog", .serialized)
struct SystemdNotifyTests {
    @Test func readyAfterTheSocketAnswersWatchdogFromTheMonitorStoppingAtSIGTERM() async throws {
        try await withCLI { cli in
            try cli.run("add", "--id", "depot", "--lat", "51.5", "--lon", "-0.12", "--radius", "200")
            let stall = cli.dir.file("stall")
            let receiver = try NotifyReceiver(path: cli.dir.file("notify.sock")) { message in
                // Asked the moment READY=1 arrives: the control socket must answer, with the regions loaded.
                guard message.split(separator: "\n").contains("READY=1") else { return nil }
                if case .engine(let hello) = ControlClient.greet(cli.socket) {
                    return "answered: \(hello["stateDirectory"]?.stringValue ?? "?")"
                }
                return "no answer"
            }
            defer { receiver.close() }
            var environment = cli.environment.merging(try FleetSourceTests.deadGPSD()) { $1 }
            environment["NOTIFY_SOCKET"] = receiver.path
            environment["WATCHDOG_USEC"] = "1000000"
            environment["GEOFENCE_TEST_STALL_MONITOR"] = stall
            let daemon = try DaemonProcess(
                ["run", "--state-dir", cli.stateDir], logPath: cli.dir.file("run.log"), environment: environment)

            let ready = try #require(await receiver.wait(timeout: 30) { $0.text.contains("READY=1") }, "\(daemon.log)")
            #expect(ready.probe?.hasPrefix("answered: ") == true, "READY=1 before the socket answered: \(ready)")
            #expect(ready.text.contains("STATUS=1 regions monitored"), "\(ready.text)")
            #expect(daemon.log.contains("running: 1 regions"))

            // WATCHDOG=1 at half of WATCHDOG_USEC: every 0.5 s.
            let start = Date()
            _ = await receiver.wait(timeout: 10) { m in m.time > start.addingTimeInterval(3) && m.text == "WATCHDOG=1" }
            let beats = receiver.messages.filter { $0.text == "WATCHDOG=1" && $0.time > start }.map(\.time)
            let gaps = zip(beats.dropFirst(), beats).map { $0.timeIntervalSince($1) }.sorted()
            #expect(beats.count >= 4, "\(beats.count) WATCHDOG=1 in 3 s")
            #expect((gaps.first ?? 0) >= 0.45, "a watchdog message sooner than half of WATCHDOG_USEC: \(gaps)")
            #expect(gaps.isEmpty ? false : gaps[gaps.count / 2] <= 0.8, "watchdog messages too far apart: \(gaps)")
            #expect(receiver.messages.contains { $0.text.hasPrefix("STATUS=") && !$0.text.contains("READY") })

            // The monitor held stuck: no more WATCHDOG=1 (systemd would restart the engine), and they come back
            // once it is released.
            _ = FileManager.default.createFile(atPath: stall, contents: nil)
            // Shows that something does not happen (no WATCHDOG=1 while stuck): a window of time, after one for a
            // ping already under way; there is no signal to wait for.
            try await Task.sleep(for: .milliseconds(700))
            let stuckFrom = Date()
            try await Task.sleep(for: .milliseconds(2500))
            let whileStuck = receiver.messages.filter { $0.text == "WATCHDOG=1" && $0.time > stuckFrom }
            #expect(whileStuck.isEmpty, "WATCHDOG=1 while the monitor was stuck: \(whileStuck.count)")
            try FileManager.default.removeItem(atPath: stall)
            let released = Date()
            #expect(await receiver.wait(timeout: 10) { $0.text == "WATCHDOG=1" && $0.time > released } != nil)

            #expect(await daemon.stop(timeout: 10) != nil)
            #expect(daemon.process.terminationStatus == 0, "\(daemon.log)")
            let stopping = receiver.messages.first { $0.text.contains("STOPPING=1") }
            #expect(stopping?.text.contains("STATUS=stopping (SIGTERM)") == true, "\(receiver.messages.map(\.text))")
        }
    }

    @Test func withoutNotifySocketNothingIsSent() async throws {
        try await withCLI { cli in
            let receiver = try NotifyReceiver(path: cli.dir.file("notify.sock")) { _ in nil }
            defer { receiver.close() }
            // WATCHDOG_USEC alone (no NOTIFY_SOCKET): the engine runs as before and sends nothing anywhere.
            var environment = cli.environment.merging(try FleetSourceTests.deadGPSD()) { $1 }
            environment["WATCHDOG_USEC"] = "1000000"
            let daemon = try DaemonProcess(
                ["run", "--state-dir", cli.stateDir], logPath: cli.dir.file("run.log"), environment: environment)
            #expect(await daemon.waitForLog("running: 0 regions", timeout: 30), "\(daemon.log)")
            #expect(!daemon.log.contains("watchdog"))
            #expect(await daemon.stop(timeout: 10) != nil)
            #expect(receiver.messages.isEmpty)
        }
    }
}

/// A Unix datagram socket bound at `path`, as systemd's notification socket: records each message with the
/// time it arrived, and what `probe` found at that moment (asked on the receiving thread, before the next).
final class NotifyReceiver: Sendable {
    struct Message: Sendable, CustomStringConvertible {
        var time: Date
        var text: String
        var probe: String?
        var description: String { "\(text.debugDescription) probe: \(probe ?? "-")" }
    }

    let path: String
    private let fd: Int32
    private let received = Mutex<[Message]>([])
    private let closed = Atomic<Bool>(false)
    private let exited = Atomic<Bool>(false)

    init(path: String, probe: @escaping @Sendable (String) -> String?) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        precondition(bytes.count < MemoryLayout.size(ofValue: address.sun_path))
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let thread = Thread { [self] in
            defer { exited.store(true, ordering: .releasing) }
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !closed.load(ordering: .acquiring) {
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 100) > 0 else { continue }
                let n = recv(fd, &buffer, buffer.count, 0)
                guard n > 0 else { continue }
                let text = String(decoding: buffer[..<n], as: UTF8.self)
                let time = Date()
                let found = probe(text)
                received.withLock { $0.append(Message(time: time, text: text, probe: found)) }
            }
        }
        thread.start()
    }

    var messages: [Message] { received.withLock { $0 } }

    /// The first message for which `match` holds, waiting up to `timeout` seconds for it.
    func wait(timeout: Double, _ match: (Message) -> Bool) async -> Message? {
        _ = await Wait.until(timeout: timeout, every: .milliseconds(20)) { messages.contains(where: match) }
        return messages.first(where: match)
    }

    func close() {
        closed.store(true, ordering: .releasing)
        _ = Wait.blocking(timeout: 60) { exited.load(ordering: .acquiring) }
        Glibc.close(fd)
        unlink(path)
    }
}
