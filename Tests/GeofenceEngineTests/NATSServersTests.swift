import Foundation
import GeofenceEngine
import GeofenceTestSupport
import Testing

/// `NATSServers`: the one parser of a NATS server list and its credentials that `run --source`, `deliver
/// --from`, `status --nats` and the region commands share (the commands themselves: ClusterCredentialTests).
@Suite("NATS servers and credentials")
struct NATSServersTests {
    static func parse(
        _ text: String, option: String = "--from", file: String? = nil, environment: [String: String] = [:]
    ) throws -> NATSServers {
        try NATSServers(parsing: text, option: option, passwordFile: file, environment: environment)
    }

    static func refusal(
        _ text: String, option: String = "--from", file: String? = nil, environment: [String: String] = [:]
    ) -> NATSServers.Refusal? {
        do {
            _ = try parse(text, option: option, file: file, environment: environment)
            return nil
        } catch {
            return error as? NATSServers.Refusal
        }
    }

    @Test(
        "the user name comes out of the URLs, which keep the servers only; the password from a file or the environment")
    func accepted() throws {
        let plain = try Self.parse("nats://10.0.0.1:4222, 10.0.0.2:4223,host-3")
        #expect(plain == NATSServers(urls: "nats://10.0.0.1:4222,nats://10.0.0.2:4223,nats://host-3"))
        #expect(try Self.parse("[::1]:4222,nats://[fe80::1]").urls == "nats://[::1]:4222,nats://[fe80::1]")

        let user = try Self.parse(
            "nats://engine@10.0.0.1:4222,10.0.0.2:4222,engine@10.0.0.3:4222",
            environment: ["GEOFENCE_NATS_PASSWORD": "p@ss:w/rd"])
        #expect(user.urls == "nats://10.0.0.1:4222,nats://10.0.0.2:4222,nats://10.0.0.3:4222")
        #expect(user.user == "engine" && user.password == "p@ss:w/rd")
        #expect(try Self.parse("nats://engine@h:1").password == nil, "a user name alone")

        let directory = try TemporaryDirectory("nats-servers")
        defer { directory.remove() }
        let file = directory.file("nats.pw")
        try "from file, one line\n".write(toFile: file, atomically: true, encoding: .utf8)
        let fromFile = try Self.parse(
            "nats://engine@h:1", file: file, environment: ["GEOFENCE_NATS_PASSWORD": "the file wins"])
        #expect(fromFile.password == "from file, one line")
    }

    @Test("refused with the option named, never echoing a password")
    func refused() throws {
        let passwordReason =
            "a password in the URL is seen by `ps` and kept in the shell's history; give it with "
            + "--nats-password-file FILE or GEOFENCE_NATS_PASSWORD"
        let cases: [(String, String, NATSServers.Refusal)] = [
            ("", "--nats", .invalid(option: "--nats", reason: "give nats://HOST:PORT, or several separated by commas")),
            (
                "h:1,,h:2", "--from",
                .invalid(option: "--from", reason: "give nats://HOST:PORT, or several separated by commas")
            ),
            ("nats://engine:s3cret@h:4222", "--source", .invalid(option: "--source", reason: passwordReason)),
            ("h:1,engine:s3cret@h:2", "--nats", .invalid(option: "--nats", reason: passwordReason)),
            // A password holding a comma is cut in two: neither half is echoed.
            (
                "nats://engine:s3c,ret@h:4222", "--from",
                .invalid(option: "--from", reason: "server 1 of 2 is not HOST:PORT (as in nats://127.0.0.1:4222)")
            ),
            ("tls://h:4222", "--from", .invalid(option: "--from", reason: "\"tls://h:4222\" is not a nats:// URL")),
            (
                "nats://a@h:1,b@h:2", "--from",
                .invalid(option: "--from", reason: "give one user name, the same in every URL")
            ),
            ("nats://@h:1", "--from", .invalid(option: "--from", reason: "give one user name, the same in every URL")),
        ]
        for (text, option, expected) in cases {
            #expect(Self.refusal(text, option: option) == expected, "\(text)")
        }
        for bad in ["h:0", "h:65536", "h:+5", "h:", "h/x", "nats://h:4222/x", "h:1 2", "a:b:1", "[::1", "h?x"] {
            #expect(
                Self.refusal(bad)
                    == .invalid(option: "--from", reason: "\"\(bad)\" is not HOST:PORT (as in nats://127.0.0.1:4222)"),
                "\(bad)")
        }

        #expect(
            Self.refusal("nats://h:1", option: "--source", environment: ["GEOFENCE_NATS_PASSWORD": "s3cret"])
                == .usage("a NATS password needs a user name: --source nats://USER@HOST:PORT"))
        #expect(
            Self.refusal("nats://engine@h:1", file: "/nonexistent/nats.pw")
                == .unreadable("cannot read the NATS password file /nonexistent/nats.pw: No such file or directory"))
    }
}
