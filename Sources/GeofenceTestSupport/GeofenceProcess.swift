import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A fresh directory under the system's temporary directory, removed by `remove()`.
package struct TemporaryDirectory: Sendable {
    package let path: String

    /// In `parent` when given (it must exist), else in the system's temporary directory.
    package init(_ prefix: String = "geofence-test", in parent: String? = nil) throws {
        var template = Array(((parent ?? NSTemporaryDirectory()) + "/\(prefix)-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        path = String(cString: made)
    }

    package func file(_ name: String) -> String { path + "/" + name }

    package func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Runs `body` with a fresh temporary directory and removes the directory afterwards, whatever happens.
package func withTemporaryDirectory<T>(_ prefix: String = "geofence-test", _ body: (TemporaryDirectory) throws -> T)
    throws -> T
{
    let directory = try TemporaryDirectory(prefix)
    defer { directory.remove() }
    return try body(directory)
}

/// Runs `body` with a fresh temporary directory and removes the directory afterwards, whatever happens.
package func withTemporaryDirectory<T>(
    _ prefix: String = "geofence-test", _ body: (TemporaryDirectory) async throws -> T
) async throws -> T {
    let directory = try TemporaryDirectory(prefix)
    defer { directory.remove() }
    return try await body(directory)
}

/// The built `geofence` executable, run as a user would run it.
package enum GeofenceBinary {
    /// `GEOFENCE_BIN` when set (`make soak` points it at the release build), else next to the test bundle
    /// (`swift build --build-tests` builds both into the same directory).
    package static var path: String {
        if let given = ProcessInfo.processInfo.environment["GEOFENCE_BIN"], !given.isEmpty { return given }
        let here = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [here, here.deletingLastPathComponent()] {
            let p = candidate.appendingPathComponent("geofence").path
            if FileManager.default.isExecutableFile(atPath: p) { return p }
        }
        // `swift test` from the package root: .build/debug is a link to the triple's directory.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/geofence").path
    }

    /// What a finished run left behind.
    package struct Result: Sendable {
        package var status: Int32
        package var stdout: String
        package var stderr: String
        /// stdout split into lines, without the empty last one.
        package var lines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }
    }

    /// Runs `geofence ARGS` as another user (setpriv drops to `uid`, same gid, no supplementary groups).
    package static func runAs(uid: UInt32, _ arguments: [String], environment: [String: String] = [:]) throws -> Result
    {
        try run(
            arguments, environment: environment,
            launcher: ["/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups"])
    }

    /// Runs `geofence ARGS` to completion with `stdin` as its input; the environment is the test's own
    /// plus `environment`.
    package static func run(
        _ arguments: [String], stdin: String? = nil, environment: [String: String] = [:], launcher: [String] = []
    ) throws -> Result {
        let process = Process()
        if let first = launcher.first {
            process.executableURL = URL(fileURLWithPath: first)
            process.arguments = Array(launcher.dropFirst()) + [path] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: path)
            process.arguments = arguments
        }
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        let input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try? input.fileHandleForWriting.close()
        // Read both pipes to the end before waiting, so a chatty child never blocks on a full pipe.
        let group = DispatchGroup()
        nonisolated(unsafe) var outData = Data()
        nonisolated(unsafe) var errData = Data()
        group.enter()
        DispatchQueue.global().async {
            outData = out.fileHandleForReading.readDataToEndOfFile()
            group.leave()
        }
        errData = err.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData, as: UTF8.self))
    }
}

/// Where the shared gpsd recordings are (`<repo>/../shared/fixtures/gpsd`), if they are here at all.
package enum SharedFixtures {
    package static var gpsdDirectory: String? {
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let dir = repo.deletingLastPathComponent().appendingPathComponent("shared/fixtures/gpsd").path
        return FileManager.default.fileExists(atPath: dir) ? dir : nil
    }

    package static let missingReason = "../shared/fixtures/gpsd is absent: recording tests skipped"
}

/// A `geofence run` (or any long-running geofence command) in the background, its stderr kept in a file,
/// for tests that watch its log and stop it like systemd would.
package final class DaemonProcess: @unchecked Sendable {
    // @unchecked: `process` is set once in init; the log is read from the file.
    package let process: Process
    package let logPath: String

    /// `launcher` goes in front of the binary (e.g. `setpriv --reuid=UID ...` to run it as another user).
    /// `blockingTermination` starts it with SIGTERM and SIGINT blocked, as a parent that spawns from a
    /// thread blocking them passes them on.
    package init(
        _ arguments: [String], logPath: String, environment: [String: String] = [:], launcher: [String] = [],
        blockingTermination: Bool = false
    ) throws {
        self.logPath = logPath
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        defer { try? log.close() }
        process = Process()
        if let first = launcher.first {
            process.executableURL = URL(fileURLWithPath: first)
            process.arguments = Array(launcher.dropFirst()) + [GeofenceBinary.path] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: GeofenceBinary.path)
            process.arguments = arguments
        }
        var env = ProcessInfo.processInfo.environment
        env["JOURNAL_STREAM"] = nil
        // Never systemd's own notification socket, should the tests run under a unit (a test gives its own).
        env["NOTIFY_SOCKET"] = nil
        env["WATCHDOG_USEC"] = nil
        env["WATCHDOG_PID"] = nil
        for (k, v) in environment { env[k] = v }
        process.environment = env
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = log
        process.standardError = log
        if blockingTermination {
            var blocked = sigset_t()
            var saved = sigset_t()
            sigemptyset(&blocked)
            sigaddset(&blocked, SIGTERM)
            sigaddset(&blocked, SIGINT)
            pthread_sigmask(SIG_BLOCK, &blocked, &saved)
            defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
            try process.run()
        } else {
            try GPSDHarness.withUnblockedSignals { try process.run() }
        }
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    package var pid: Int32 { process.processIdentifier }
    package var isRunning: Bool { process.isRunning }
    package var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Waits until the log holds a line containing `text` (counting from `after` occurrences already
    /// seen); returns false at the timeout.
    @discardableResult
    package func waitForLog(_ text: String, occurrences: Int = 1, timeout: Double) async -> Bool {
        func found() -> Bool { log.components(separatedBy: text).count - 1 >= occurrences }
        // An engine that has exited writes no more: what its log holds then is the answer.
        _ = await Wait.until(timeout: timeout, every: .milliseconds(50)) { found() || !process.isRunning }
        return found()
    }

    /// Sends `signal` and waits for the exit; returns the seconds it took, or nil if it did not exit in time
    /// (then it is killed).
    package func stop(signal: Int32 = SIGTERM, timeout: Double = 5) async -> Double? {
        let started = Date()
        kill(process.processIdentifier, signal)
        _ = await Wait.until(timeout: timeout) { !process.isRunning }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        return Date().timeIntervalSince(started)
    }
}

/// A gpsd client that records every JSON report, as `gpspipe -w` would print them.
package final class GPSDWatcher: @unchecked Sendable {
    // @unchecked: `lines` and `buffer` are only touched under `lock`.
    private let fd: Int32
    private let lock = NSLock()
    private var lines: [String] = []
    private var buffer: [UInt8] = []
    private var closed = false

    package init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let ok = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard ok == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .ECONNREFUSED) }
        let watch = Array("?WATCH={\"enable\":true,\"json\":true}\n".utf8)
        _ = watch.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let thread = Thread { self.readLoop() }
        thread.start()
    }

    deinit { close() }

    package func close() {
        lock.withLock {
            if !closed { shutdown(fd, Int32(SHUT_RDWR)) }
            closed = true
        }
    }

    /// Every line so far.
    package var reports: [String] { lock.withLock { lines } }

    /// The TPV lines so far.
    package var tpvs: [String] { reports.filter { $0.contains("\"class\":\"TPV\"") } }

    private func readLoop() {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            lock.withLock {
                buffer += chunk[0..<n]
                while let newline = buffer.firstIndex(of: 10) {
                    lines.append(String(decoding: buffer[..<newline], as: UTF8.self))
                    buffer.removeSubrange(...newline)
                }
            }
        }
        Glibc.close(fd)
    }
}
