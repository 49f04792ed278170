import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A private Mosquitto broker for one test: its own config file, a free loopback port, persistence in a
/// directory of its own (never the system's broker, its port 1883 or its config). It can be stopped and
/// started again on the same port with the same persistence, as a broker restart is.
package final class MosquittoBroker: @unchecked Sendable {
    // @unchecked: `process` is only touched by the test that owns the broker, one call at a time.
    package let port: UInt16
    package let directory: String
    /// The CA that signed a TLS broker's certificate (nil: plain MQTT).
    package let caFile: String?
    /// The broker lets in only clients with a certificate of its CA: this one (`client.crt`, `client.key`).
    package let requiresClientCertificate: Bool
    package var clientCertificate: String { directory + "/client.crt" }
    package var clientKey: String { directory + "/client.key" }
    private let config: String
    private var process: Process?

    package static let mosquittoPath = "/usr/sbin/mosquitto"
    package static let publishPath = "/usr/bin/mosquitto_pub"
    package static var isAvailable: Bool {
        FileManager.default.isExecutableFile(atPath: mosquittoPath)
            && FileManager.default.isExecutableFile(atPath: publishPath)
    }
    package static let unavailableReason = "mosquitto and mosquitto_pub are not installed (make deps)"

    /// Starts a broker in `directory` (which must exist); with `users`, only they may connect, each with
    /// their password (a `mosquitto_passwd` file).
    ///
    /// With `tls`, it speaks only TLS, with a server certificate for 127.0.0.1 signed by a CA of its own
    /// (`caFile`), both made here with openssl.
    ///
    /// With `clientCertificates` as well, it lets in only clients with a certificate signed by that CA
    /// (`require_certificate`): `clientCertificate` and `clientKey` are one.
    ///
    /// `settings` are more lines of `mosquitto.conf` (`max_queued_messages 0`).
    package init(
        directory: String, users: [String: String] = [:], tls: Bool = false, clientCertificates: Bool = false,
        settings: [String] = []
    ) throws {
        self.directory = directory
        caFile = tls ? directory + "/ca.crt" : nil
        requiresClientCertificate = tls && clientCertificates
        port = try GPSDHarness.freePort(type: Int32(SOCK_STREAM.rawValue))
        config = directory + "/mosquitto.conf"
        var text = """
            listener \(port) 127.0.0.1
            persistence true
            persistence_location \(directory)/
            log_dest file \(directory)/mosquitto.log

            """
        for line in settings { text += line + "\n" }
        // As root it would become the `mosquitto` user, who cannot read the test's private directory.
        if getuid() == 0 { text += "user root\n" }
        if tls {
            try Self.makeCertificates(in: directory)
            text += "cafile \(directory)/ca.crt\ncertfile \(directory)/server.crt\nkeyfile \(directory)/server.key\n"
            if clientCertificates { text += "require_certificate true\n" }
        }
        if users.isEmpty {
            text += "allow_anonymous true\n"
        } else {
            let passwords = directory + "/passwords"
            _ = FileManager.default.createFile(atPath: passwords, contents: nil)
            for (user, password) in users.sorted(by: { $0.key < $1.key }) {
                let p = Process()
                p.executableURL = URL(fileURLWithPath: "/usr/bin/mosquitto_passwd")
                p.arguments = ["-b", passwords, user, password]
                p.standardOutput = FileHandle.nullDevice
                p.standardError = FileHandle.nullDevice
                try p.run()
                p.waitUntilExit()
            }
            text += "allow_anonymous false\npassword_file \(passwords)\n"
        }
        try text.write(toFile: config, atomically: true, encoding: .utf8)
        try start()
    }

    deinit { kill(signal: SIGKILL) }

    /// Starts it (again) and waits until it accepts connections.
    package func start() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.mosquittoPath)
        p.arguments = ["-c", config]
        p.standardInput = FileHandle.nullDevice
        // What it says before its log is open (a bad config) goes here.
        let errors = directory + "/mosquitto.err"
        _ = FileManager.default.createFile(atPath: errors, contents: nil)
        let errorHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
        defer { try? errorHandle.close() }
        p.standardOutput = errorHandle
        p.standardError = errorHandle
        try GPSDHarness.withUnblockedSignals { try p.run() }
        process = p
        let listening = Wait.blocking(timeout: 10) { GPSDHarness.acceptsConnections(port: port) || !p.isRunning }
        if listening && p.isRunning { return }
        let said = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
        throw GPSDHarness.Failure.startFailed("mosquitto did not listen on \(port): \(said)\(log)")
    }

    /// Stops it (SIGTERM: it writes its persistence file first) and waits for the exit.
    package func stop() { kill(signal: SIGTERM) }

    private func kill(signal: Int32) {
        guard let p = process else { return }
        if p.isRunning {
            Glibc.kill(p.processIdentifier, signal)
            p.waitUntilExit()
        }
        process = nil
    }

    /// A CA (`ca.crt`), a server certificate for 127.0.0.1 it signed (`server.crt`, `server.key`) and a client
    /// certificate (`client.crt`, `client.key`), made with openssl in `directory`.
    package static func makeCertificates(in directory: String) throws {
        try "subjectAltName=IP:127.0.0.1\n".write(toFile: directory + "/san.ext", atomically: true, encoding: .utf8)
        let steps = [
            "req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=geofence-test-ca",
            "req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1",
            "x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile san.ext",
            "req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=geofence-test-client",
            "x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 2",
        ]
        for step in steps {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            p.arguments = step.split(separator: " ").map(String.init)
            p.currentDirectoryURL = URL(fileURLWithPath: directory)
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            p.waitUntilExit()
            guard p.terminationStatus == 0 else { throw GPSDHarness.Failure.startFailed("openssl \(step) failed") }
        }
    }

    /// Makes a persistent session (clean session off) for `clientID` subscribed to `topic` at QoS 1, and
    /// leaves: from now on the broker queues that topic's messages for it.
    package func makeSession(clientID: String, topic: String) throws {
        _ = try subscribe(["-c", "-i", clientID, "-t", topic, "-E"])
    }

    /// Connects as `clientID` (with `persistent`, to its session: what was queued for it comes first) and
    /// returns `topic payload` of each message received within `seconds`.
    package func receive(clientID: String, topic: String, persistent: Bool = true, seconds: Int) throws -> [String] {
        try subscribe((persistent ? ["-c"] : []) + ["-i", clientID, "-t", topic, "-v", "-W", String(seconds)])
            .split(separator: "\n").map(String.init)
    }

    private func subscribe(_ arguments: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/mosquitto_sub")
        p.arguments =
            ["-h", "127.0.0.1", "-p", String(port), "-q", "1"] + arguments + (caFile.map { ["--cafile", $0] } ?? [])
            + (requiresClientCertificate ? ["--cert", clientCertificate, "--key", clientKey] : [])
        let output = Pipe()
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = output
        p.standardError = FileHandle.nullDevice
        // `-W` is an alarm: SIGALRM must not stay blocked from the test's threads.
        try GPSDHarness.withUnblockedSignals { try p.run() }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    package var log: String { (try? String(contentsOfFile: directory + "/mosquitto.log", encoding: .utf8)) ?? "" }

    /// `mosquitto_pub` with QoS 1: the whole of `file` as one message to `topic`; returns its status.
    @discardableResult
    package func publish(_ topic: String, file: String) throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.publishPath)
        p.arguments =
            ["-h", "127.0.0.1", "-p", String(port), "-q", "1", "-t", topic, "-f", file]
            + (caFile.map { ["--cafile", $0] } ?? [])
            + (requiresClientCertificate ? ["--cert", clientCertificate, "--key", clientKey] : [])
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }

    /// `mosquitto_pub` with QoS 1: each of `messages` to `topic`, one message a line; returns its status.
    @discardableResult
    package func publish(_ topic: String, _ messages: [String]) throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.publishPath)
        p.arguments =
            ["-h", "127.0.0.1", "-p", String(port), "-q", "1", "-t", topic, "-l"]
            + (caFile.map { ["--cafile", $0] } ?? [])
            + (requiresClientCertificate ? ["--cert", clientCertificate, "--key", clientKey] : [])
        let input = Pipe()
        p.standardInput = input
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        input.fileHandleForWriting.write(Data((messages.joined(separator: "\n") + "\n").utf8))
        try input.fileHandleForWriting.close()
        p.waitUntilExit()
        return p.terminationStatus
    }
}
