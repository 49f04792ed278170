import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

/// `--nats URL[,URL…]` of `add`, `remove` and `import`: the change goes to the cluster's bucket
/// `geofence-regions` (Docs/cluster.md) instead of the local store. The user name may be in the URLs
/// (`nats://USER@HOST:PORT`); the password never is (it would be in `ps` and the shell's history): it comes
/// from `--nats-password-file` or `GEOFENCE_NATS_PASSWORD`, as the MQTT source takes its own, and is never
/// printed.
struct ClusterTarget {
    static let options: [OptionSpec] = [
        .value(
            "--nats", valueName: "urls",
            help: """
                Change the regions of a cluster instead of the local store: the NATS servers \
                (nats://[USER@]HOST:PORT, comma-separated), whose bucket geofence-regions every engine \
                follows (Docs/cluster.md). No password in the URL: use --nats-password-file or \
                GEOFENCE_NATS_PASSWORD.
                """),
        .value(
            "--nats-password-file", valueName: "file",
            help: """
                With --nats, read the NATS password from this file (one line), keeping it out of `ps` as \
                GEOFENCE_NATS_PASSWORD does.
                """),
    ]

    /// The servers, without user names.
    let servers: String
    let user: String?
    let password: String?

    /// The target `--nats` names, or nil without it. Refuses a password in a URL (without echoing it), an
    /// unreadable password file, a password without a user name.
    init?(parsing a: ParsedArguments, context c: CommandContext) throws {
        guard let text = a.value("--nats") else {
            if a.value("--nats-password-file") != nil { throw c.usage("--nats-password-file is for --nats") }
            return nil
        }
        var servers: [String] = []
        var user: String?
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            var rest = item.trimmingCharacters(in: .whitespaces)
            if let scheme = rest.range(of: "://") {
                guard rest[..<scheme.lowerBound] == "nats" else {
                    throw c.usage("invalid value for --nats: give nats://HOST:PORT servers, comma-separated")
                }
                rest = String(rest[scheme.upperBound...])
            }
            if let at = rest.lastIndex(of: "@") {
                let userInfo = rest[..<at]
                guard !userInfo.contains(":") else {
                    throw c.usage(
                        "invalid value for --nats: a password in the URL is seen by `ps` and kept in the shell's "
                            + "history; give it with --nats-password-file FILE or GEOFENCE_NATS_PASSWORD")
                }
                guard !userInfo.isEmpty, user == nil || user == String(userInfo) else {
                    throw c.usage("invalid value for --nats: give one user name, the same in every URL")
                }
                user = String(userInfo)
                rest = String(rest[rest.index(after: at)...])
            }
            guard !rest.isEmpty, !rest.contains("/") else {
                throw c.usage("invalid value for --nats: give nats://HOST:PORT servers, comma-separated")
            }
            servers.append("nats://" + rest)
        }
        var password: String?
        if let file = a.value("--nats-password-file") {
            guard let data = FileManager.default.contents(atPath: file) else {
                let reason = access(file, R_OK) == 0 ? "cannot be read" : String(cString: strerror(errno))
                throw CommandFailure("cannot read the NATS password file \(file): \(reason)", exitCode: .noInput)
            }
            var text = String(decoding: data, as: UTF8.self)
            if text.hasSuffix("\n") { text.removeLast() }
            password = text
        } else if let text = c.environment["GEOFENCE_NATS_PASSWORD"] {
            password = text
        }
        if password != nil, user == nil {
            throw c.usage("a NATS password needs a user name: --nats nats://USER@HOST:PORT")
        }
        self.servers = servers.joined(separator: ",")
        self.user = user
        self.password = password
    }

    /// Connects and opens the bucket (creating it when missing). A cluster that cannot be reached or
    /// refuses: exit 69, as a broker that cannot be reached.
    func connect() throws -> ClusterRegionStore {
        do {
            let connection = try NATSConnection(
                urls: servers, name: "geofence-cli", user: user, password: password)
            return try ClusterRegionStore(connection: connection)
        } catch let error as NATSError {
            throw Self.failure(error)
        }
    }

    /// A failure of the cluster as the CLI says it.
    static func failure(_ error: NATSError) -> CommandFailure {
        CommandFailure("\(error)", exitCode: .unavailable)
    }

    /// Runs a change on the cluster, saying a refusal of the rules (a duplicate, an unknown id, too many
    /// polygon positions) exactly as the local store's (`ControlHandler.translate`), and a failure of the
    /// cluster as one line with exit 69.
    @discardableResult
    static func perform<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as NATSError {
            throw failure(error)
        } catch let error as StoreError {
            let refusal = ControlHandler.translate(error)
            throw CommandFailure(refusal.message, exitCode: ExitCode(rawValue: refusal.exitStatus) ?? .failure)
        }
    }
}
