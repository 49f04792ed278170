import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

/// `--nats URL[,URL…]` of `add`, `remove` and `import`: the change goes to the cluster's bucket
/// `geofence-regions` (Docs/cluster.md) instead of the local store. The servers and credentials are read as
/// every command that talks to a cluster reads them (`NATSServers`, `CommandContext.natsServers`): the user
/// name may be in the URLs (`nats://USER@HOST:PORT`); the password never is (it would be in `ps` and the
/// shell's history): it comes from `--nats-password-file` or `GEOFENCE_NATS_PASSWORD`, as the MQTT source
/// takes its own, and is never printed.
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
        passwordFileOption(for: "--nats"),
    ]

    /// `--nats-password-file` of a command whose servers `option` names.
    static func passwordFileOption(for option: String, environment: String? = nil) -> OptionSpec {
        .value(
            NATSServers.passwordFileOption, valueName: "file",
            help: """
                With \(option), read the NATS password from this file (one line), keeping it out of `ps` as \
                GEOFENCE_NATS_PASSWORD does.
                """, environment: environment)
    }

    let servers: NATSServers

    /// The target `--nats` names, or nil without it. Refuses a password in a URL (without echoing it), an
    /// unreadable password file, a password without a user name.
    init?(parsing a: ParsedArguments, context c: CommandContext) throws {
        guard let text = a.value("--nats") else {
            try Self.refuseOrphanPasswordFile(a, c)
            return nil
        }
        servers = try c.natsServers(text, option: "--nats")
    }

    /// `--nats-password-file` without `--nats`: refused, not ignored.
    static func refuseOrphanPasswordFile(_ a: ParsedArguments, _ c: CommandContext) throws {
        if a.value(NATSServers.passwordFileOption) != nil {
            throw c.usage("\(NATSServers.passwordFileOption) is for --nats")
        }
    }

    /// Connects and opens the bucket (creating it when missing). A cluster that cannot be reached or
    /// refuses: exit 69, as a broker that cannot be reached.
    func connect() throws -> ClusterRegionStore {
        do {
            let connection = try NATSConnection(servers, name: "geofence-cli")
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

extension CommandContext {
    /// The NATS servers and credentials `text` (the value of `option`) names, with the password from
    /// `--nats-password-file` or `GEOFENCE_NATS_PASSWORD` (`NATSServers`); a refusal said as the CLI says its
    /// own (64, or 66 for a password file that cannot be read), never with the password.
    func natsServers(_ text: String, option: String) throws -> NATSServers {
        do {
            return try NATSServers(
                parsing: text, option: option, passwordFile: arguments.value(NATSServers.passwordFileOption),
                environment: environment)
        } catch let refusal as NATSServers.Refusal {
            switch refusal {
            case .invalid(let option, let reason): throw invalid(option, reason)
            case .usage(let message): throw usage(message)
            case .unreadable(let message): throw CommandFailure(message, exitCode: .noInput)
            }
        }
    }
}
