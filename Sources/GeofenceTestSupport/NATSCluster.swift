import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A private 3-server NATS cluster with JetStream for one test, started by `Scripts/nats-cluster.sh` (the
/// configuration of `Packaging/nats/`, as the docs and the bench use it): free loopback ports, each server's
/// store, configuration and log in a directory of the test's own (never the system's server or port 4222).
/// One server can be killed and started again with the same ports and store, as a crashed node comes back.
package final class NATSCluster: @unchecked Sendable {
    // @unchecked: the servers are the script's; this object holds only constants and is used by the test that
    // owns it, one call at a time.

    /// The client URL list the script printed (`nats://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`).
    package let urls: String
    package let directory: String
    /// The partitions the servers' subject mapping spreads `geofence.fix.VEHICLE` over
    /// (`geofence.fixp.N.VEHICLE`, N from 0; `NATSPartition.of(_:partitions:)` says which).
    package let partitions: Int
    /// The user name and password the servers want from clients; nil: none (the default).
    package let credentials: (user: String, password: String)?
    private var stopped = false

    package static let serverPath = "/usr/sbin/nats-server"
    package static var isAvailable: Bool {
        FileManager.default.isExecutableFile(atPath: serverPath) && FileManager.default.isExecutableFile(atPath: script)
    }
    package static let unavailableReason = "nats-server is not installed (make deps)"

    /// `Scripts/nats-cluster.sh` of this checkout.
    package static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Scripts/nats-cluster.sh").path
    }

    /// Starts the three servers with files in `directory` (which must exist), their subject mapping over
    /// `partitions` partitions (1 to 1024), and waits until JetStream has a meta leader. With `credentials`,
    /// the servers take only clients that log in with them (no `"`, `\\`, `$` or line break in them).
    package init(
        directory: String, partitions: Int = 12, credentials: (user: String, password: String)? = nil
    ) throws {
        self.directory = directory
        self.partitions = partitions
        self.credentials = credentials
        var environment = ["GEOFENCE_PARTITIONS": String(partitions)]
        if let credentials {
            environment["NATS_CLUSTER_USER"] = credentials.user
            environment["NATS_CLUSTER_PASSWORD"] = credentials.password
        }
        let printed = try Self.run(["up", directory], in: directory, environment: environment)
        guard let last = printed.split(separator: "\n").last, last.hasPrefix("nats://") else {
            throw GPSDHarness.Failure.startFailed("nats-cluster.sh up printed no URL list: \(printed)")
        }
        urls = String(last)
    }

    deinit { if !stopped { _ = try? Self.run(["down", directory], in: directory) } }

    /// `urls` with the user name of `credentials` in each (`nats://USER@127.0.0.1:P1,USER@127.0.0.1:P2,…`);
    /// the password is never in a URL.
    package var urlsWithUser: String {
        guard let user = credentials?.user else { return urls }
        return serverURLs.map { "nats://\(user)@" + $0.dropFirst("nats://".count) }.joined(separator: ",")
    }

    /// Each server's client URL (`nats://127.0.0.1:P`), n1 first.
    package var serverURLs: [String] {
        urls.dropFirst("nats://".count).split(separator: ",").map { "nats://" + $0 }
    }

    /// Server `n`'s (1, 2 or 3) client port.
    package func clientPort(server n: Int) -> UInt16? {
        (try? String(contentsOfFile: "\(directory)/n\(n)/client-port", encoding: .utf8))
            .flatMap { UInt16($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// Stops all three (SIGTERM) and waits for their exits.
    package func stop() throws {
        guard !stopped else { return }
        _ = try Self.run(["down", directory], in: directory)
        stopped = true
    }

    /// SIGKILLs server `n` (1, 2 or 3) and waits for its exit, as a crash is.
    package func kill(server n: Int) throws { _ = try Self.run(["kill", directory, String(n)], in: directory) }

    /// Starts server `n` again (same ports, same store) and waits until the running servers agree on a meta
    /// leader.
    package func restart(server n: Int) throws { _ = try Self.run(["start", directory, String(n)], in: directory) }

    /// Server `n`'s own state of `stream`, from its monitoring port (`/jsz`): `messages first..last, deleted
    /// N, leader NAME`; nil when the server does not answer or holds no such stream. Replicas of one stream
    /// should agree once they have caught up.
    package func streamState(server n: Int, stream: String) -> String? {
        guard
            let port = (try? String(contentsOfFile: "\(directory)/n\(n)/monitor-port", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        else { return nil }
        let script = """
            import json, sys, urllib.request
            with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/jsz?streams=true", timeout=2) as r:
                data = json.load(r)
            for account in data.get("account_details") or []:
                for s in account.get("stream_detail") or []:
                    if s.get("name") == sys.argv[2]:
                        st = s.get("state", {})
                        print(f"{st.get('messages')} {st.get('first_seq')}..{st.get('last_seq')}, deleted "
                              f"{st.get('num_deleted', 0)}, leader {s.get('cluster', {}).get('leader', '')}")
            """
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = ["-c", script, port, stream]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return nil }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }

    /// Server `n`'s log.
    package func log(server n: Int) -> String {
        (try? String(contentsOfFile: "\(directory)/n\(n)/nats.log", encoding: .utf8)) ?? ""
    }

    /// Runs the script; its standard output, or a failure with what it said on standard error. Its output
    /// goes to files, not pipes: the servers it starts would inherit a pipe and keep it open for ever.
    private static func run(_ arguments: [String], in directory: String, environment: [String: String] = [:]) throws
        -> String
    {
        let out = directory + "/nats-cluster.out"
        let err = directory + "/nats-cluster.err"
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        let outHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        let errHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: err))
        defer {
            try? outHandle.close()
            try? errHandle.close()
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: script)
        p.arguments = arguments
        if !environment.isEmpty {
            p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = outHandle
        p.standardError = errHandle
        try GPSDHarness.withUnblockedSignals { try p.run() }
        p.waitUntilExit()
        let printed = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        guard p.terminationStatus == 0 else {
            let said = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
            throw GPSDHarness.Failure.startFailed(
                "nats-cluster.sh \(arguments.joined(separator: " ")) failed (\(p.terminationStatus)): \(said)")
        }
        return printed
    }
}
