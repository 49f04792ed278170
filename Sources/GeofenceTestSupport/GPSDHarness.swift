import Foundation
import GeofenceCore
import Synchronization

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Musl)
    @preconcurrency import Musl
#endif

/// A real gpsd for integration tests, fed NMEA over UDP:
/// `gpsd -N -n -b -S PORT -F CTLSOCK udp://127.0.0.1:FEEDPORT`, on free ports, in a private
/// temporary directory. Never port 2947, never the system's gpsd.
///
/// What gpsd 3.22 does with a `udp://` device, found by experiment:
/// - With `-n` it binds the UDP port at startup and lists the device at once (DEVICES shows
///   it with `activated` but no `driver`); no first packet is needed to *report* the device.
/// - The first datagram makes gpsd identify the driver: a DEVICE report with
///   `"driver":"NMEA0183"` and a new `activated` time follows.
/// - Each datagram is one packet to gpsd's lexer. With one sentence per datagram, the TPV
///   stream is identical, report for report, to the `gpsfake -1 -p` .chk files of gpsd's
///   regression suite (all five recordings in ../shared/fixtures/gpsd match exactly).
/// - gpsd only sends TPVs to clients that are watching when the sentence arrives: feed
///   after the client has its DEVICES answer, or those sentences are lost to it.
/// - UDP has no flow control: a burst larger than the socket buffer (~200 KiB on Linux
///   loopback) is dropped silently, so long recordings are fed paced or with flow control.
///
/// The gpsd process can't outlive the test: `stop()` runs on `deinit`, and a guard process
/// (`sh`, reading a pipe from this process) kills gpsd if this process dies without saying
/// goodbye (a crash, or a test runner that was killed).
package final class GPSDHarness: Sendable {
    package static let gpsdPath = "/usr/sbin/gpsd"

    /// True when gpsd is installed; integration tests skip otherwise.
    package static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: gpsdPath) }

    /// Why tests that need gpsd are skipped when it is missing.
    package static let unavailableReason = "gpsd is not installed at /usr/sbin/gpsd (apt-get install gpsd)"

    package enum Failure: Error, CustomStringConvertible {
        case gpsdMissing
        case system(String, Int32)
        case startFailed(String)
        case controlFailed(String)

        package var description: String {
            switch self {
            case .gpsdMissing: return GPSDHarness.unavailableReason
            case .system(let call, let error): return "\(call): \(String(cString: strerror(error)))"
            case .startFailed(let detail): return "gpsd did not start: \(detail)"
            case .controlFailed(let detail): return "gpsd control socket: \(detail)"
            }
        }
    }

    /// gpsd's TCP port for clients.
    package let port: UInt16
    /// The UDP port gpsd reads NMEA from.
    package let feedPort: UInt16
    /// The private directory holding the control socket and gpsd's log.
    package let directory: URL

    /// Where clients connect (all devices).
    package var address: GPSDAddress { GPSDAddress(host: "127.0.0.1", port: port) }
    /// gpsd's name for the feed device: the `subject` of its fixes.
    package var devicePath: String { "udp://127.0.0.1:\(feedPort)" }
    package var controlSocketPath: String { directory.appendingPathComponent("control.sock").path }
    package var logPath: String { directory.appendingPathComponent("gpsd.log").path }

    /// What gpsd wrote to stderr, for failure messages.
    package var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    private struct Running {
        var gpsd: Process
        /// Kills gpsd when the pipe closes without "stop" (this process died).
        var guardian: Process
        var guardianInput: FileHandle
    }

    private let running = Mutex<Running?>(nil)
    private let feedSocket: Int32

    /// Picks free ports and a directory; starts gpsd unless `start` is false (to test a
    /// client that comes up before gpsd does).
    package init(start: Bool = true) async throws {
        guard Self.isAvailable else { throw Failure.gpsdMissing }
        port = try Self.freePort(type: Int32(SOCK_STREAM.rawValue))
        feedPort = try Self.freePort(type: Int32(SOCK_DGRAM.rawValue))
        var template = Array("/tmp/gpsd-harness-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw Failure.system("mkdtemp", errno) }
        directory = URL(fileURLWithPath: String(cString: made), isDirectory: true)
        feedSocket = socket(AF_INET, Int32(SOCK_DGRAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard feedSocket >= 0 else { throw Failure.system("socket", errno) }
        if start { try await self.start() }
    }

    deinit {
        stop()
        close(feedSocket)
        try? FileManager.default.removeItem(at: directory)
    }

    package var isRunning: Bool { running.withLock { $0?.gpsd.isRunning ?? false } }

    /// Starts gpsd on this harness's ports and waits until it accepts clients (≤ 5 s).
    package func start() async throws {
        try running.withLock { running in
            guard running == nil else { return }
            running = try launch()
        }
        try await waitUntilAccepting(timeout: .seconds(20))
    }

    /// Kills gpsd abruptly (SIGKILL), as a crash would; clients see the connection drop.
    package func kill() {
        shutDown(signal: SIGKILL)
    }

    /// Kills gpsd and starts a new one on the same ports.
    package func restart() async throws {
        kill()
        try await start()
    }

    /// Stops gpsd (SIGTERM, then SIGKILL after a second). Safe to call repeatedly.
    package func stop() {
        shutDown(signal: SIGTERM)
    }

    /// Sends one sentence (CR LF is added when missing) as one datagram.
    package func send(nmea sentence: String) throws {
        let line = sentence.hasSuffix("\n") ? sentence : sentence + "\r\n"
        try send(bytes: Array(line.utf8))
    }

    /// Sends raw bytes as one datagram to the feed port.
    package func send(bytes: [UInt8]) throws {
        var target = sockaddr_in()
        target.sin_family = sa_family_t(AF_INET)
        target.sin_port = feedPort.bigEndian
        target.sin_addr.s_addr = inet_addr("127.0.0.1")
        let sent = bytes.withUnsafeBytes { buffer in
            withUnsafePointer(to: &target) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(
                        feedSocket, buffer.baseAddress, buffer.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        guard sent == bytes.count else { throw Failure.system("sendto", errno) }
    }

    /// Sends sentences one datagram each, `pace` apart.
    package func send(nmea sentences: [String], pace: Duration) async throws {
        for sentence in sentences {
            try send(nmea: sentence)
            // The pace is the receiver being simulated (sentences come so far apart): nothing to wait for.
            if pace > .zero { try await Task.sleep(for: pace) }
        }
    }

    /// Tells gpsd to add a device (`+PATH` on the control socket).
    package func addDevice(_ path: String) throws {
        try control("+\(path)\n")
    }

    /// Tells gpsd to remove a device (`-PATH` on the control socket).
    package func removeDevice(_ path: String) throws {
        try control("-\(path)\n")
    }

    // MARK: - Internals

    private func launch() throws -> Running {
        try? FileManager.default.removeItem(atPath: controlSocketPath)
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        defer { try? log.close() }
        try log.seekToEnd()

        let gpsd = Process()
        gpsd.executableURL = URL(fileURLWithPath: Self.gpsdPath)
        gpsd.arguments = ["-N", "-n", "-b", "-S", String(port), "-F", controlSocketPath, devicePath]
        gpsd.currentDirectoryURL = directory
        gpsd.standardInput = FileHandle.nullDevice
        gpsd.standardOutput = log
        gpsd.standardError = log
        do {
            try Self.withUnblockedSignals { try gpsd.run() }
        } catch {
            throw Failure.startFailed("\(error)")
        }

        // The pipe is close-on-exec here; Process gives its read end to the guard as stdin.
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0, fcntl(ends[0], F_SETFD, FD_CLOEXEC) == 0, fcntl(ends[1], F_SETFD, FD_CLOEXEC) == 0
        else {
            Glibc.kill(gpsd.processIdentifier, SIGKILL)
            gpsd.waitUntilExit()
            throw Failure.system("pipe2", errno)
        }
        let readEnd = FileHandle(fileDescriptor: ends[0], closeOnDealloc: true)
        let writeEnd = FileHandle(fileDescriptor: ends[1], closeOnDealloc: true)
        let guardian = Process()
        guardian.executableURL = URL(fileURLWithPath: "/bin/sh")
        guardian.arguments = ["-c", "read word; [ \"$word\" = stop ] || kill -9 \(gpsd.processIdentifier)"]
        guardian.standardInput = readEnd
        guardian.standardOutput = FileHandle.nullDevice
        guardian.standardError = FileHandle.nullDevice
        do {
            try guardian.run()
        } catch {
            Glibc.kill(gpsd.processIdentifier, SIGKILL)
            gpsd.waitUntilExit()
            throw Failure.startFailed("guard process: \(error)")
        }
        try? readEnd.close()
        return Running(gpsd: gpsd, guardian: guardian, guardianInput: writeEnd)
    }

    /// Runs `body` (a spawn) with no signals blocked on this thread. Foundation's Process
    /// hands the spawning thread's signal mask to the child, and Swift concurrency's (Dispatch's)
    /// threads block nearly every signal (swift-corelibs-foundation#4772); gpsd keeps the mask
    /// it inherits, so without this it ignores SIGTERM.
    package static func withUnblockedSignals<Result>(_ body: () throws -> Result) rethrows -> Result {
        var none = sigset_t()
        var saved = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, &saved)
        defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
        return try body()
    }

    private func shutDown(signal: Int32) {
        guard
            let current = running.withLock({ running in
                defer { running = nil }
                return running
            })
        else { return }
        let gpsd = current.gpsd
        if gpsd.isRunning {
            Glibc.kill(gpsd.processIdentifier, signal)
            _ = Wait.blocking(timeout: 1, every: .milliseconds(5)) { !gpsd.isRunning }
            if gpsd.isRunning { Glibc.kill(gpsd.processIdentifier, SIGKILL) }
        }
        gpsd.waitUntilExit()
        // gpsd is gone: tell the guard not to kill its (possibly reused) pid.
        try? current.guardianInput.write(contentsOf: Array("stop\n".utf8))
        try? current.guardianInput.close()
        current.guardian.waitUntilExit()
    }

    private func waitUntilAccepting(timeout: Duration) async throws {
        let (seconds, attoseconds) = timeout.components
        _ = await Wait.until(timeout: Double(seconds) + Double(attoseconds) / 1e18) {
            !isRunning || Self.acceptsConnections(port: port)
        }
        guard isRunning else { throw Failure.startFailed("gpsd exited; its log:\n\(log)") }
        if Self.acceptsConnections(port: port) { return }
        throw Failure.startFailed("gpsd did not accept connections on port \(port) within \(timeout); its log:\n\(log)")
    }

    private func control(_ command: String) throws {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw Failure.system("socket", errno) }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array(controlSocketPath.utf8)
        guard path.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw Failure.controlFailed("path too long: \(controlSocketPath)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: path)
            buffer[path.count] = 0
        }
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else { throw Failure.system("connect(\(controlSocketPath))", errno) }
        let bytes = Array(command.utf8)
        guard write(descriptor, bytes, bytes.count) == bytes.count else { throw Failure.system("write", errno) }
        var reply = [UInt8](repeating: 0, count: 64)
        let count = read(descriptor, &reply, reply.count)
        let text = count > 0 ? String(decoding: reply[0..<count], as: UTF8.self) : ""
        guard text.hasPrefix("OK") else {
            throw Failure.controlFailed("\(command.trimmingCharacters(in: .newlines)) answered \"\(text)\"")
        }
    }

    /// A port nothing listens on now, found by binding port 0; never gpsd's 2947.
    static func freePort(type: Int32) throws -> UInt16 {
        while true {
            let descriptor = socket(AF_INET, type | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else { throw Failure.system("socket", errno) }
            defer { close(descriptor) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = 0
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                    bind(descriptor, generic, length) == 0 && getsockname(descriptor, generic, &length) == 0
                }
            }
            guard bound else { throw Failure.system("bind", errno) }
            let port = UInt16(bigEndian: address.sin_port)
            if port != 2947 { return port }
        }
    }

    static func acceptsConnections(port: UInt16) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}
