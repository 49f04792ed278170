import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// NATS credentials (issue 26: "as for MQTT, never in ps, logs or status"), run as the built binary against a
/// real 3-server cluster whose servers want a user name and password: `run --source`, `deliver --from`,
/// `status --nats` and `add --nats` log in with the password from `--nats-password-file` or
/// `GEOFENCE_NATS_PASSWORD`; a wrong or missing one is one line and exit 69; one in a URL is refused (64);
/// the password shows in no log, command line or status.
@Suite(
    "NATS credentials of run, deliver, status and add", .serialized, CredentialCluster(),
    .enabled(if: NATSCluster.isAvailable, "\(NATSCluster.unavailableReason)"))
struct ClusterCredentialTests {
    static let user = "engine"
    /// What a URL could not hold (so it must come from the file or the variable).
    static let password = "s3cret-p@ss:w/rd,x"

    /// Each command with the option that names its servers, and what else it needs.
    static func command(_ name: String, servers: String) -> [String] {
        switch name {
        case "run": ["run", "--source", servers, "--partitions", "4"]
        case "deliver": ["deliver", "--from", servers]
        case "status": ["status", "--nats", servers]
        default: ["add", "--id", "x", "--lat", "1", "--lon", "1", "--radius", "3", "--nats", servers]
        }
    }

    static func commandLine(of pid: Int32) -> String {
        let bytes = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") ?? Data()
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test("run, deliver, status and add log in with the password from a file or the environment; it shows nowhere")
    func logsIn() async throws {
        let cluster = try CredentialCluster.cluster()
        try await withCLI { cli in
            let file = cli.dir.file("nats.pw")
            try (Self.password + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            let servers = cluster.urlsWithUser
            let variable = ["GEOFENCE_NATS_PASSWORD": Self.password]

            let engine = try cli.daemon(
                [
                    "--source", servers, "--partitions", "4", "--engine-id", "cred-a", "--lease-ttl", "3",
                    "--nats-password-file", file,
                ], log: "engine.log")
            defer { kill(engine.pid, SIGKILL) }
            #expect(await engine.waitForLog("joined the cluster", timeout: 30), "\(engine.log)")
            for partition in 0..<4 {
                #expect(await engine.waitForLog("partition \(partition): taken", timeout: 30), "\(engine.log)")
            }
            // The server it joined at, without the user name or password.
            let joined = engine.log.split(separator: "\n").first { $0.contains("joined the cluster at") } ?? ""
            #expect(joined.contains("joined the cluster at nats://127.0.0.1:") && !joined.contains("@"), "\(joined)")

            for environment in [variable, [:]] {
                let options = environment.isEmpty ? ["--nats-password-file", file] : []
                let status = try cli.run(
                    ["status", "--nats", servers, "--json"] + options, environment: environment)
                #expect(status.status == 0 || status.status == 3, "\(status.stderr)")
                let report = try JSON.parse(status.stdout)
                let engines = report["engines"]?.arrayValue ?? []
                #expect(engines.contains { $0["engine"]?.stringValue == "cred-a" }, "\(status.stdout)")
                #expect(!status.stdout.contains("s3cret") && !status.stderr.contains("s3cret"))
            }

            // The engine follows the region bucket: a region added through the cluster reaches it.
            let added = try cli.run(
                ["add", "--id", "depot", "--lat", "1", "--lon", "2", "--radius", "30", "--nats", servers]
                    + ["--nats-password-file", file])
            #expect(added.status == 0, "\(added.stderr)")
            #expect(await engine.waitForLog("region depot: put", timeout: 10), "\(engine.log)")

            let deliverState = cli.dir.file("deliver")
            let deliver = try DaemonProcess(
                ["deliver", "--from", servers, "--state-dir", deliverState], logPath: cli.dir.file("deliver.log"),
                environment: cli.environment.merging(variable) { $1 })
            defer { kill(deliver.pid, SIGKILL) }
            #expect(
                await deliver.waitForLog("deliver: reading GEOFENCE_EVENTS at nats://127.0.0.1:", timeout: 30),
                "\(deliver.log)")

            for (name, process) in [("run", engine), ("deliver", deliver)] {
                #expect(process.isRunning, "\(name): \(process.log)")
                let line = Self.commandLine(of: process.pid)
                #expect(line.contains(Self.user) && !line.contains("s3cret"), "\(name): \(line)")
            }
            #expect(await deliver.stop() != nil)
            #expect(await engine.stop(timeout: 20) != nil)
            for (name, process) in [("run", engine), ("deliver", deliver)] {
                #expect(!process.log.contains("s3cret"), "\(name): \(process.log)")
            }
        }
    }

    @Test("a wrong or missing password is one line and exit 69; one in the URL, or without a user name, exit 64")
    func refused() throws {
        let cluster = try CredentialCluster.cluster()
        try withCLI { cli in
            let port = try #require(cluster.clientPort(server: 1))
            for name in ["run", "deliver", "status", "add"] {
                let option = name == "run" ? "--source" : name == "deliver" ? "--from" : "--nats"
                func run(_ servers: String, _ environment: [String: String] = [:], _ extra: [String] = [])
                    throws -> GeofenceBinary.Result
                {
                    try cli.run(Self.command(name, servers: servers) + extra, environment: environment)
                }
                // Wrong, missing, or no user name at all: the servers refuse, said in one line.
                for (servers, environment) in [
                    (cluster.urlsWithUser, ["GEOFENCE_NATS_PASSWORD": "wr0ng-guess"]),
                    (cluster.urlsWithUser, [:]),
                    (cluster.urls, [:]),
                ] {
                    let result = try run(servers, environment)
                    #expect(result.status == 69, "\(name): \(result.stderr)")
                    #expect(
                        result.stderr.hasPrefix("Error: ") && result.stderr.split(separator: "\n").count == 1
                            && result.stderr.contains("authorization failed"), "\(name): \(result.stderr)")
                    #expect(!result.stderr.contains("wr0ng"), "\(name): \(result.stderr)")
                }

                let inURL = try run("nats://\(Self.user):s3cret@127.0.0.1:\(port)")
                #expect(inURL.status == 64, "\(name): \(inURL.stderr)")
                #expect(
                    inURL.stderr.hasPrefix("Error: invalid value for \(option): a password in the URL is seen by `ps`"),
                    "\(name): \(inURL.stderr)")
                #expect(!inURL.stderr.contains("s3cret") && inURL.stderr.contains("--nats-password-file"))

                let noUser = try run(cluster.urls, ["GEOFENCE_NATS_PASSWORD": "s3cret"])
                #expect(noUser.status == 64, "\(name): \(noUser.stderr)")
                #expect(
                    noUser.stderr.hasPrefix(
                        "Error: a NATS password needs a user name: \(option) nats://USER@HOST:PORT"),
                    "\(name): \(noUser.stderr)")

                let unreadable = try run(cluster.urlsWithUser, [:], ["--nats-password-file", cli.dir.file("none")])
                #expect(unreadable.status == 66, "\(name): \(unreadable.stderr)")
                #expect(
                    unreadable.stderr.hasPrefix("Error: cannot read the NATS password file "), "\(unreadable.stderr)")
            }
            let orphan = try cli.run(["status", "--nats-password-file", cli.dir.file("none")])
            #expect(orphan.status == 64 && orphan.stderr.hasPrefix("Error: --nats-password-file is for --nats"))
        }
    }
}

/// One 3-server cluster whose servers want `ClusterCredentialTests.user` and `.password`, shared by the suite's
/// tests (starting one takes about 3 s).
struct CredentialCluster: SuiteTrait, TestScoping {
    @TaskLocal static var current: NATSCluster?

    static func cluster() throws -> NATSCluster { try #require(current, "the suite has no CredentialCluster trait") }

    var isRecursive: Bool { false }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard NATSCluster.isAvailable else { return try await function() }
        let directory = try TemporaryDirectory("geofence-nats-credentials")
        defer { directory.remove() }
        let cluster = try NATSCluster(
            directory: directory.path, partitions: 4,
            credentials: (ClusterCredentialTests.user, ClusterCredentialTests.password))
        defer { try? cluster.stop() }
        try await Self.$current.withValue(cluster) { try await function() }
    }
}
