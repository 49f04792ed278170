import Foundation
import GeofenceCore

/// `--source nats://[USER@]HOST:PORT[,HOST:PORT…]`: one engine of a cluster on NATS JetStream. It judges the
/// partitions of the fleet it owns, with the options `--partitions`, `--lease-ttl`, `--checkpoint-interval`,
/// `--engine-id` and `--nats-password-file` (Docs/cluster.md; its servers and credentials: `NATSServers`). Its
/// state and events live in JetStream, not in the state directory.
package struct NATSSourceKind: SourceKind {
    /// The servers (`urls`, without the user name) and the credentials.
    package var servers: NATSServers
    /// The servers as nats.c takes them and logs and errors show them: no user name, no password.
    package var urls: String { servers.urls }
    package var partitions: Int
    package var leaseTTL: Double
    package var checkpointInterval: Double
    /// Names this engine in leases and status; nil: the host name and the process id.
    package var engineID: String?
    /// Connect only to the servers of `urls`, not to those the cluster announces (`GEOFENCE_NATS_NO_DISCOVERY=1`:
    /// servers whose announced addresses this machine cannot reach, or a test's fault proxy).
    package var ignoreDiscoveredServers = false

    package static let form = "nats://HOST:PORT[,HOST:PORT…]"
    package static let prefix = "nats://"
    package static let valueName = "nats://host:port,…"
    package static let help = """
        a NATS JetStream cluster, nats://[USER@]HOST:PORT[,HOST:PORT…] (the password from \
        --nats-password-file or GEOFENCE_NATS_PASSWORD): this engine joins the engines that share the fleet's \
        partitions (with --partitions; Docs/cluster.md)
        """

    package static let options: [SourceOption] = [
        SourceOption(
            "--partitions", valueName: "n",
            help: """
                With nats://, the number of partitions the server's subject mapping spreads vehicles over \
                (the same on every engine and in the mapping); required.
                """),
        SourceOption(
            "--lease-ttl", valueName: "seconds",
            help: """
                With nats://, how long a partition's lease lasts unrenewed: an engine that cannot renew stops \
                judging before it ends, and another takes the partition over after it.
                """, default: "6"),
        SourceOption(
            "--checkpoint-interval", valueName: "seconds",
            help: """
                With nats://, how often each partition's state is checkpointed to JetStream (a take-over \
                replays the fixes since the last).
                """, default: "5"),
        SourceOption(
            "--engine-id", valueName: "id",
            help: "With nats://, this engine's name in leases and status.",
            defaultDescription: "the host name and the process id"),
        SourceOption(
            NATSServers.passwordFileOption, valueName: "file",
            help: """
                With nats://USER@HOST:PORT, read the NATS password from this file (one line), keeping it out of \
                `ps` as GEOFENCE_NATS_PASSWORD does; never in the URL.
                """),
    ]

    package static func names(_ text: String) -> Bool { text.hasPrefix("nats://") }

    package static func parse(_ text: String, _ arguments: SourceArguments) throws -> NATSSourceKind {
        let servers: NATSServers
        do {
            servers = try NATSServers(
                parsing: text, option: "--source", passwordFile: arguments.value(NATSServers.passwordFileOption),
                environment: arguments.environment)
        } catch let refusal as NATSServers.Refusal {
            switch refusal {
            case .invalid(let option, let reason): throw SourceOptionError.invalid(option: option, reason: reason)
            case .usage(let message): throw SourceOptionError.usage(message)
            case .unreadable(let message): throw SourceOptionError.unreadable(message)
            }
        }
        guard let partitionText = arguments.value("--partitions") else {
            throw SourceOptionError.usage(
                "--source nats:// needs --partitions N, the number in the server's subject mapping")
        }
        guard let partitions = Int(partitionText), (1...4096).contains(partitions) else {
            throw SourceOptionError.invalid(option: "--partitions", reason: "must be a whole number from 1 to 4096")
        }
        var kind = NATSSourceKind(
            servers: servers, partitions: partitions, leaseTTL: 6, checkpointInterval: 5, engineID: nil)
        kind.leaseTTL = try seconds("--lease-ttl", arguments, default: 6, range: 1...3600)
        kind.checkpointInterval = try seconds("--checkpoint-interval", arguments, default: 5, range: 0.1...3600)
        kind.ignoreDiscoveredServers = arguments.environment["GEOFENCE_NATS_NO_DISCOVERY"] == "1"
        if let id = arguments.value("--engine-id") {
            guard !id.isEmpty, id.utf8.count <= 200, id.allSatisfy({ $0.isLetter || $0.isNumber || "-_".contains($0) })
            else {
                throw SourceOptionError.invalid(
                    option: "--engine-id", reason: "must be 1 to 200 letters, digits, - or _")
            }
            kind.engineID = id
        }
        return kind
    }

    package func printedSecrets(_ arguments: SourceArguments) -> [PrintedSecret] {
        guard servers.password != nil else { return [] }
        let option = arguments.value(NATSServers.passwordFileOption) != nil ? NATSServers.passwordFileOption : nil
        return [PrintedSecret(name: "nats-password", variable: NATSServers.passwordVariable, option: option)]
    }

    private static func seconds(
        _ option: String, _ arguments: SourceArguments, default value: Double, range: ClosedRange<Double>
    ) throws -> Double {
        guard let text = arguments.value(option) else { return value }
        guard let seconds = Double(text), seconds.isFinite, range.contains(seconds) else {
            throw SourceOptionError.invalid(
                option: option,
                reason: "must be a number of seconds from \(range.lowerBound.formatted()) to "
                    + "\(range.upperBound.formatted())")
        }
        return seconds
    }

    package func makeSource(configuration: DaemonConfiguration, logger: Logger) throws -> any LocationSource {
        // `run` starts a cluster engine (`ClusterNode`) for this kind instead of the single-box daemon.
        throw SourceOptionError.usage("--source nats:// runs as a cluster engine, not as a source of the local engine")
    }
}
