import Foundation
import GeofenceCore
import GeofenceEngine

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence deliver`: a cluster's events, from its event stream, to this state directory's hooks and sinks.
struct DeliverCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "deliver",
        abstract: "Deliver a cluster's events (NATS JetStream) to this state directory's hooks and sinks.",
        discussion: """
            The engines of a cluster (`geofence run --source nats://…`) publish every event to the JetStream \
            stream GEOFENCE_EVENTS (subjects geofence.event.PARTITION). `deliver` reads that stream through a \
            durable consumer of its own and runs the hooks (`geofence hook add`) and sinks (`geofence sink \
            add`) of its state directory for every event, exactly as `geofence run` does for the events of \
            its own monitor: at least once, in order per region, with retries and dead deliveries (`geofence \
            events`). A delivery is so never tied to the engine that made the event: an engine can die, its \
            partitions move, and the hooks still run here, once per event.

            Each batch of messages is stored in the state directory's outbox (an event whose id is there \
            already is skipped) together with the stream position, and only then acknowledged to the \
            cluster: a kill at any moment loses nothing and doubles nothing. Messages that are not events \
            (take-over markers) are skipped; one that is not a valid event is logged and skipped (it stays in \
            the stream). The consumer (--consumer) keeps its place in the cluster, replicated as the stream \
            is; one state directory per consumer name. Run one `deliver` per place that delivers (a machine \
            with its hooks, a broker's bridge); several with their own state directories each deliver every \
            event.

            It starts when a server of the list answers and the stream exists; a stream that does not exist \
            yet (no engine has created it) is an error (exit 69), as is a server list none of which answers. \
            Afterwards it rides out server losses and reconnects by itself. SIGTERM or SIGINT stop it \
            cleanly: the batch in hand is stored and acknowledged, running hooks get their grace. Only one \
            engine (`run` or `deliver`) may run on a state directory at a time.

            A cluster whose servers want a user name and password: the user name in the URLs \
            (nats://USER@HOST:PORT), the password from --nats-password-file or GEOFENCE_NATS_PASSWORD, never \
            in the URL (it would show in `ps`: refused, exit 64). A wrong or missing password is one line, \
            exit 69. The password is never logged or shown.
            """,
        options: [
            .value(
                "--from", valueName: "nats://[user@]host:port[,host:port…]",
                help: """
                    The cluster's servers (any of them; the others are learned from it). No password in the URL: \
                    use --nats-password-file or GEOFENCE_NATS_PASSWORD.
                    """, required: true, environment: "GEOFENCE_DELIVER_FROM"),
            ClusterTarget.passwordFileOption(for: "--from", environment: "GEOFENCE_NATS_PASSWORD_FILE"),
            .value(
                "--consumer", valueName: "name",
                help: """
                    The durable consumer's name: letters, digits, '-' and '_', at most 64. One per state \
                    directory; another state directory's is refused.
                    """,
                defaultDescription: "deliver-HOST-HASH, from this host's name and the state directory",
                environment: "GEOFENCE_DELIVER_CONSUMER"),
            .value(
                "--batch", valueName: "n", help: "Messages read and stored at a time, at most (1 to 10000).",
                default: "256"),
            .value(
                "--ack-wait", valueName: "duration",
                help: "A message not acknowledged this long after its delivery is delivered again.",
                default: "30s"),
            .value(
                "--log-level", valueName: "level", help: "error, warning, notice, info or debug.", default: "info"),
        ] + CommandTree.hookOptions,
        examples: [
            Example(
                "This machine's hooks, for every event of the cluster:",
                "geofence deliver --from nats://10.0.0.1:4222,10.0.0.2:4222,10.0.0.3:4222"),
            Example(
                "A second place that delivers, with hooks of its own in its own state directory:",
                "geofence deliver --from nats://10.0.0.1:4222 --state-dir /var/lib/geofence-crm --consumer crm"),
            Example(
                "A cluster that wants a user name and password (the file readable by the user `deliver` runs as):",
                "geofence deliver --from nats://deliver@10.0.0.1:4222 --nats-password-file /etc/geofence/nats.pw"),
        ])

    let source: ClusterEventSource
    let hooks: HookConfiguration
    let level: LogLevel

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        let servers = try c.natsServers(a.value("--from") ?? "", option: "--from")
        let consumer = a.value("--consumer")
        if let consumer, let problem = Self.problem(consumer: consumer) { throw c.invalid("--consumer", problem) }
        // The default name and the owner are made in `run`, once the state directory exists (its canonical
        // path is in them).
        var source = ClusterEventSource(servers: servers, consumer: consumer ?? "", owner: "")
        if let n = try a.integer("--batch") {
            guard (1...10_000).contains(n) else { throw c.invalid("--batch", "must be between 1 and 10000") }
            source.batch = n
            source.maxAckPending = max(source.maxAckPending, n)
        }
        if let wait = try a.duration("--ack-wait") {
            guard wait >= 1, wait <= 86_400 else { throw c.invalid("--ack-wait", "must be between 1s and 1d") }
            source.ackWait = .milliseconds(Int64(wait * 1000))
        }
        hooks = try HookOptions.configuration(a, c)
        let levelText = a.value("--log-level") ?? "info"
        guard let level = LogLevel(name: levelText) else {
            throw c.invalid("--log-level", "\"\(levelText)\" is not error, warning, notice, info or debug")
        }
        self.level = level
        self.source = source
    }

    func run(_ c: CommandContext) throws {
        _ = try c.openStore()
        var source = self.source
        if source.consumer.isEmpty { source.consumer = Self.defaultConsumer(stateDirectory: c.stateDirectory) }
        source.owner = Self.owner(stateDirectory: c.stateDirectory)
        #if DEBUG
            // Fault injection for the kill tests (DeliverTests); not in release builds.
            source.holdBeforeCommit = c.environment["GEOFENCE_TEST_DELIVER_HOLD_BEFORE_COMMIT"]
            source.holdBeforeAck = c.environment["GEOFENCE_TEST_DELIVER_HOLD_BEFORE_ACK"]
        #endif
        let engine = DeliverEngine(
            stateDirectory: c.stateDirectory, source: source, hooks: hooks,
            logger: Logger(minimum: level, environment: c.environment))
        do {
            try waitFor { try await engine.run() }
        } catch let held as DaemonLock.Held {
            throw CommandFailure(held.description, exitCode: .tempFail)
        } catch let start as DeliverStartError {
            throw CommandFailure(start.description, exitCode: .unavailable)
        }
    }

    /// Why a consumer name is refused, or nil.
    static func problem(consumer: String) -> String? {
        guard !consumer.isEmpty, consumer.utf8.count <= 64 else { return "must be 1 to 64 characters" }
        guard consumer.unicodeScalars.allSatisfy({ $0.isASCII && (Self.nameCharacters.contains($0)) }) else {
            return "\"\(consumer)\" may hold only letters, digits, '-' and '_'"
        }
        return nil
    }

    private static let nameCharacters = CharacterSet(
        charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")

    /// `HOST:STATE_DIR` (the directory's canonical path when it exists).
    static func owner(stateDirectory: String) -> String {
        "\(hostName()):\(canonicalDirectory(stateDirectory) ?? stateDirectory)"
    }

    /// `deliver-HOST-HASH`: this host's name (letters, digits, '-' and '_' kept, at most 32) and 8 hex digits
    /// of a hash of the state directory, so two state directories on one host have two consumers.
    static func defaultConsumer(stateDirectory: String) -> String {
        let host = String(
            hostName().unicodeScalars.filter { $0.isASCII && nameCharacters.contains($0) }.map(Character.init)
                .prefix(32))
        // FNV-1a, 32 bits: stable across runs and builds (Hasher is seeded per process).
        var hash: UInt32 = 2_166_136_261
        for byte in (canonicalDirectory(stateDirectory) ?? stateDirectory).utf8 {
            hash = (hash ^ UInt32(byte)) &* 16_777_619
        }
        return "deliver-\(host.isEmpty ? "host" : host)-" + String(format: "%08x", hash)
    }

    private static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "host" }
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return String(decoding: bytes, as: UTF8.self)
    }
}
