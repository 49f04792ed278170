import Foundation
import GeofenceCore

#if canImport(Glibc)
    import Glibc
#endif

/// A webhook receiver for one test: `Scripts/webhook-receiver.py` (Python's http.server, HTTP/1.1 with
/// keep-alive) on a free loopback port, in a directory of its own. It records every request (the connection it
/// came on, its headers and body, what it answered, whether its signature verified with Python's own `hmac`),
/// answers as its plan says (`plan`), and can be stopped and started again on the same port.
package final class WebhookReceiver: @unchecked Sendable {
    // @unchecked: `process` is only touched by the test that owns the receiver, one call at a time.
    package let directory: String
    package let port: UInt16
    private let secretFile: String?
    private let delay: Double
    /// With TLS: the CA that signed its certificate for 127.0.0.1 (nil: plain HTTP).
    package let caFile: String?
    private var process: Process?

    package static let pythonPath = "/usr/bin/python3"
    package static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: pythonPath) }
    package static let unavailableReason = "python3 is not installed"

    /// `Scripts/webhook-receiver.py` of this checkout.
    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Scripts/webhook-receiver.py").path
    }

    /// Where a sink is to POST: `/events` on the receiver.
    package var url: String { (caFile == nil ? "http" : "https") + "://127.0.0.1:\(port)/events" }
    package var logFile: String { directory + "/requests.jsonl" }
    var planFile: String { directory + "/plan" }

    /// Starts a receiver in `directory` (which must exist); with `secretFile`, it verifies signatures; with
    /// `delay`, it waits that long before each answer; with `tls`, it speaks HTTPS with a certificate of a CA of
    /// its own (`caFile`).
    package init(directory: String, secretFile: String? = nil, delay: Double = 0, tls: Bool = false) throws {
        self.directory = directory
        self.secretFile = secretFile
        self.delay = delay
        if tls { try MosquittoBroker.makeCertificates(in: directory) }
        caFile = tls ? directory + "/ca.crt" : nil
        port = try GPSDHarness.freePort(type: Int32(SOCK_STREAM.rawValue))
        try start()
    }

    deinit { kill(signal: SIGKILL) }

    /// The answers to the next requests, counted from the receiver's (re)start: `STATUS [BODY]` or
    /// `hang SECONDS`; 200 after them.
    package func plan(_ answers: [String]) throws {
        try (answers.joined(separator: "\n") + "\n").write(toFile: planFile, atomically: true, encoding: .utf8)
    }

    /// Starts it (again, on the same port) and waits until it accepts connections.
    package func start() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.pythonPath)
        // Listening once it has written its port file (not probed: a probe would be a connection it counts).
        let portFile = directory + "/port"
        try? FileManager.default.removeItem(atPath: portFile)
        var arguments = [
            Self.script, "--port", String(port), "--port-file", portFile, "--log", logFile, "--plan", planFile,
        ]
        if let secretFile { arguments += ["--secret-file", secretFile] }
        if delay > 0 { arguments += ["--delay", String(delay)] }
        if caFile != nil {
            arguments += ["--tls-cert", directory + "/server.crt", "--tls-key", directory + "/server.key"]
        }
        p.arguments = arguments
        p.standardInput = FileHandle.nullDevice
        let errors = directory + "/receiver.err"
        _ = FileManager.default.createFile(atPath: errors, contents: nil)
        let errorHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
        defer { try? errorHandle.close() }
        p.standardOutput = errorHandle
        p.standardError = errorHandle
        try GPSDHarness.withUnblockedSignals { try p.run() }
        process = p
        let listening = Wait.blocking(timeout: 10) {
            FileManager.default.fileExists(atPath: portFile) || !p.isRunning
        }
        if listening && p.isRunning { return }
        let said = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
        throw GPSDHarness.Failure.startFailed("the webhook receiver did not listen on \(port): \(said)")
    }

    /// Stops it (its connections are dropped) and waits for the exit.
    package func stop() { kill(signal: SIGTERM) }

    private func kill(signal: Int32) {
        guard let p = process else { return }
        if p.isRunning {
            Glibc.kill(p.processIdentifier, signal)
            p.waitUntilExit()
        }
        process = nil
    }

    /// A request as the receiver saw it.
    package struct Request: Sendable {
        /// Which request of the receiver's run (from 1), and on which of its connections (from 1).
        package var number: Int
        package var connection: Int
        /// Lower-case names.
        package var headers: [String: String]
        package var body: String
        /// What it answered: a status (`200`) or `hang`.
        package var answer: String
        /// Whether the signature verified (nil: the receiver has no secret).
        package var verified: Bool?

        package var eventID: String? { headers["x-geofence-event-id"] }
    }

    /// Every request so far, in the order they came (across restarts).
    package func requests() -> [Request] {
        guard let text = try? String(contentsOfFile: logFile, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            guard let o = try? JSON.parse(String(line)) else { return nil }
            var headers: [String: String] = [:]
            for (name, value) in o["headers"]?.objectValue ?? [:] { headers[name] = value.stringValue }
            return Request(
                number: o["request"]?.intValue ?? 0, connection: o["connection"]?.intValue ?? 0, headers: headers,
                body: o["body"]?.stringValue ?? "", answer: o["answer"]?.stringValue ?? "",
                verified: o["verified"]?.boolValue)
        }
    }
}
