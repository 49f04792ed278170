// swift-format-ignore-file: AmbiguousTrailingClosureOverload
// `withCLI` has a synchronous and an async form of the same name on purpose: `try withCLI { cli in ... }` in a
// synchronous test, `try await withCLI { cli in ... }` in others.

import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The built binary, run as a user runs it, against a fresh state directory per test.
struct CLI {
    let dir: TemporaryDirectory

    init() throws { dir = try TemporaryDirectory("geofence-cli") }

    var stateDir: String { dir.file("state") }
    /// Each test's own control socket, so no test ever talks to another test's engine (or the system's).
    var socket: String { dir.file("control.sock") }
    var environment: [String: String] { ["GEOFENCE_SOCKET": socket, "GEOFENCE_STATE_DIR": stateDir] }

    @discardableResult
    func run(_ args: String..., stdin: String? = nil) throws -> GeofenceBinary.Result {
        try run(args, stdin: stdin)
    }

    @discardableResult
    func run(_ args: [String], stdin: String? = nil, environment extra: [String: String] = [:])
        throws -> GeofenceBinary.Result
    {
        try GeofenceBinary.run(
            args + ["--state-dir", stateDir], stdin: stdin, environment: environment.merging(extra) { $1 })
    }

    /// `geofence run ...` in the background with this test's state directory and socket.
    func daemon(_ args: [String], log: String = "run.log") throws -> DaemonProcess {
        try DaemonProcess(
            ["run"] + args + ["--state-dir", stateDir], logPath: dir.file(log), environment: environment)
    }

    /// The store's regions as `list --json` prints them.
    func regions() throws -> [JSONValue] {
        let result = try run("list", "--json")
        #expect(result.status == 0, "\(result.stderr)")
        return try JSON.parse(result.stdout).arrayValue ?? []
    }

    func ids() throws -> [String] { try regions().compactMap { $0["id"]?.stringValue } }
}

/// Runs `body` with a fresh `CLI` (its own state directory and control socket) and removes the directory
/// afterwards, whatever happens.
func withCLI<T>(_ body: (CLI) throws -> T) throws -> T {
    let cli = try CLI()
    defer { cli.dir.remove() }
    return try body(cli)
}

/// Runs `body` with a fresh `CLI` and removes its directory afterwards, whatever happens.
func withCLI<T>(_ body: (CLI) async throws -> T) async throws -> T {
    let cli = try CLI()
    defer { cli.dir.remove() }
    return try await body(cli)
}

/// What tells a test that an engine it started is ready.
enum EngineReady: Sendable {
    /// The control socket accepts a connection.
    case socketAnswers
    /// The engine's log holds a line containing this text.
    case log(String)
}

extension CLI {
    /// Waits until `condition` holds for `daemon`, polling; false at the timeout or when the engine exits first.
    func wait(for condition: EngineReady, of daemon: DaemonProcess, timeout: Double) async -> Bool {
        switch condition {
        case .log(let text):
            return await daemon.waitForLog(text, timeout: timeout)
        case .socketAnswers:
            _ = await Wait.until(timeout: timeout) { Self.answers(socket) || !daemon.isRunning }
            return Self.answers(socket)
        }
    }

    /// Whether a unix stream socket at `path` accepts a connection now.
    static func answers(_ path: String) -> Bool {
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { Glibc.close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in bytes.enumerated() { raw[i] = byte }
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
    }
}

/// Starts `geofence run ARGS` for `cli`, waits until `readyWhen` holds (recording an issue with the log if it
/// does not within `timeout` seconds), runs `body`, and stops the engine afterwards if it is still running.
func withEngine<T>(
    _ cli: CLI, _ args: [String], log: String = "run.log", readyWhen ready: EngineReady = .socketAnswers,
    timeout: Double = 10, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: (DaemonProcess) async throws -> T
) async throws -> T {
    let daemon = try cli.daemon(args, log: log)
    let isReady = await cli.wait(for: ready, of: daemon, timeout: timeout)
    #expect(isReady, "the engine was not ready: \(daemon.log)", sourceLocation: sourceLocation)
    do {
        let result = try await body(daemon)
        if daemon.isRunning { _ = await daemon.stop() }
        return result
    } catch {
        if daemon.isRunning { _ = await daemon.stop() }
        throw error
    }
}
