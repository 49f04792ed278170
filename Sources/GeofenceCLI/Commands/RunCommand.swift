import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceGPSD

#if canImport(Glibc)
    import Glibc
#endif

/// Runs async work from the synchronous command line, blocking the calling (main) thread, never a
/// thread of the cooperative pool.
func waitFor<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let done = DispatchSemaphore(value: 0)
    let box = ResultBox<T>()
    Task.detached {
        do { box.set(.success(try await body())) } catch { box.set(.failure(error)) }
        done.signal()
    }
    done.wait()
    return try box.get()
}

private final class ResultBox<T: Sendable>: @unchecked Sendable {
    // @unchecked: written once before the semaphore is signalled, read after it is waited for.
    private var result: Result<T, any Error>?
    func set(_ r: Result<T, any Error>) { result = r }
    func get() throws -> T { try result!.get() }
}

extension CommandContext {
    /// `--gpsd`, else `GEOFENCE_GPSD` (the parser applies the environment), else localhost:2947.
    func gpsdAddress() throws -> GPSDAddress {
        try sourceOptions { try GPSDSourceKind.parse("gpsd", $0).address }
    }

    /// A duration option, required to be more than zero.
    func positiveDuration(_ option: String, default value: Double) throws -> Double {
        guard let seconds = try arguments.duration(option) else { return value }
        guard seconds > 0 else { throw invalid(option, "must be more than 0") }
        return seconds
    }

    func positiveNumber(_ option: String, default value: Double) throws -> Double {
        guard let n = try arguments.double(option) else { return value }
        guard n > 0, n.isFinite else { throw invalid(option, "must be more than 0") }
        return n
    }
}

/// `geofence run`: the daemon. Its spec: RunCommand+Spec.swift.
struct RunCommand: GeofenceSubcommand {
    /// The engine's settings, every option checked.
    let configuration: DaemonConfiguration
    let level: LogLevel
    /// `--source` as given, whose password is hidden from `ps` before the engine starts.
    let sourceText: String
    let printConfig: Bool

    /// The engine's memory is mostly a few large arrays (region records and the spatial index) read at
    /// random; with glibc's malloc asking for transparent huge pages, far fewer TLB misses cost each fix
    /// (Docs/benchmarks.md). The tunable is read at process start, so the engine re-executes itself once
    /// with it set. GEOFENCE_NO_HUGEPAGES=1, or a GLIBC_TUNABLES of one's own, leaves things alone.
    static func useHugePages(_ environment: [String: String], arguments: [String]) {
        guard environment["GLIBC_TUNABLES"] == nil, environment["GEOFENCE_NO_HUGEPAGES"] == nil else { return }
        setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1)
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) }
        argv.append(nil)
        execv("/proc/self/exe", &argv)
        // Not replaced (no /proc?): run as is.
        unsetenv("GLIBC_TUNABLES")
    }

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        var configuration = DaemonConfiguration(stateDirectory: c.stateDirectory)
        let sourceText = c.arguments.value("--source") ?? "gpsd"
        guard let kind = SourceKinds.kind(named: sourceText) else {
            throw c.invalid("--source", SourceKinds.notAKind(sourceText))
        }
        configuration.source = try c.sourceOptions { try kind.parse(sourceText, $0) }
        if let subject = c.arguments.value("--subject") {
            guard kind.takesSubject else { throw c.usage(SourceKinds.subjectRefusal) }
            if let problem = SubjectName.problem(subject) { throw c.invalid("--subject", "the name \(problem)") }
            configuration.subject = subject
        }
        configuration.liveness = .init(
            firstFixDeadline: try c.positiveDuration("--first-fix-deadline", default: 60),
            stalenessLimit: try c.positiveDuration("--stale-after", default: 10))
        configuration.filter.maxAccuracy = try c.positiveNumber(
            "--max-accuracy", default: FixFilterConfiguration().maxAccuracy)
        configuration.filter.maxFutureSkew = try c.positiveDuration(
            "--max-future-skew", default: FixFilterConfiguration().maxFutureSkew)
        configuration.monitor.minMargin = try c.positiveNumber("--min-margin", default: 5)
        configuration.monitor.acceleration = try c.positiveNumber(
            "--acceleration", default: MonitorConfiguration().acceleration)
        if c.arguments.value("--pass-acceleration") == "off" {
            configuration.monitor.inferPasses = false
        } else {
            configuration.monitor.passAcceleration = try c.positiveNumber(
                "--pass-acceleration", default: MonitorConfiguration().passAcceleration)
        }
        if c.arguments.value("--pass-turn-acceleration") == "off" {
            configuration.monitor.passTurnAcceleration = 0
        } else {
            configuration.monitor.passTurnAcceleration = try c.positiveNumber(
                "--pass-turn-acceleration", default: MonitorConfiguration().passTurnAcceleration)
        }
        if c.arguments.value("--track-factor") == "off" {
            configuration.monitor.fusedDecisions = false
        } else {
            configuration.monitor.fusedFactor = try c.positiveNumber(
                "--track-factor", default: MonitorConfiguration().fusedFactor)
        }
        if c.arguments.value("--idle-after") == "never" {
            configuration.idleLimit = nil
        } else {
            configuration.idleLimit = try c.positiveDuration("--idle-after", default: 86_400)
        }
        configuration.socketPath = ControlSocket.listenPath(
            option: c.arguments.value("--socket"), environment: c.environment)
        configuration.restricted = try PolicyFile.restricted(environment: c.environment)
        configuration.hooks = try HookOptions.configuration(c.arguments, c)
        if let n = try c.arguments.integer("--max-regions") {
            guard n > 0 else { throw c.invalid("--max-regions", "must be more than 0") }
            configuration.maxRegions = n
        }
        // A kind's own options are checked whatever the source, in this place of `run`'s order (a unit file's
        // mistake shows at once, not when the source is changed).
        try c.sourceOptions { arguments in
            for kind in SourceKinds.all { try kind.check(arguments) }
        }
        if let text = c.arguments.value("--metrics") {
            do {
                configuration.metrics = try MetricsAddress(parsing: text)
            } catch {
                throw c.usage("invalid value for --metrics: \(error)")
            }
        }
        switch c.arguments.value("--api") ?? "off" {
        case "on":
            guard configuration.metrics != nil else {
                throw c.usage("--api on serves the API on the server of --metrics: give --metrics ADDRESS too")
            }
            configuration.api = true
        case "off": configuration.api = false
        case let other: throw c.invalid("--api", "\"\(other)\" is not on or off")
        }
        if let template = c.arguments.value("--map-tiles") {
            guard configuration.api else { throw c.usage("--map-tiles is for the map of --api on: give --api on too") }
            do {
                configuration.mapTiles = try MapTiles(template)
            } catch {
                throw c.usage("invalid value for --map-tiles: \(error)")
            }
        }
        let certificate = c.arguments.value("--tls-cert")
        let key = c.arguments.value("--tls-key")
        if certificate != nil || key != nil {
            guard let certificate, let key else { throw c.usage("--tls-cert and --tls-key go together") }
            guard configuration.metrics != nil else {
                throw c.usage("--tls-cert and --tls-key are for the server of --metrics: give --metrics ADDRESS too")
            }
            configuration.tlsCertificateFile = certificate
            configuration.tlsKeyFile = key
        }
        let levelText = c.arguments.value("--log-level") ?? "info"
        guard let level = LogLevel(name: levelText) else {
            throw c.invalid("--log-level", "\"\(levelText)\" is not error, warning, notice, info or debug")
        }
        self.configuration = configuration
        self.level = level
        self.sourceText = sourceText
        printConfig = a.flag("--print-config")
    }

    func run(_ c: CommandContext) throws {
        if printConfig {
            RunSettings.print(c, configuration: configuration)
            return
        }
        #if DEBUG
            // Fault injection for the systemd watchdog's test (Docs/operations.md); not in release builds.
            var configuration = self.configuration
            configuration.stallMonitorWhile = c.environment["GEOFENCE_TEST_STALL_MONITOR"]
        #endif
        if configuration.socketPath == ControlSocket.systemPath {
            // Made by systemd (RuntimeDirectory=geofence) under the unit; by the engine itself when root runs it
            // by hand. Nothing else is put there.
            mkdir(ControlSocket.systemDirectory, 0o755)
        }
        if let cluster = configuration.source as? NATSSourceKind {
            return try runCluster(cluster, c)
        }
        Self.useHugePages(
            c.environment,
            arguments: Self.hidingSecret(
                type(of: configuration.source).commandLineSecret(in: sourceText), in: sourceText))
        let daemon = Daemon(
            configuration: configuration, logger: Logger(minimum: level, environment: c.environment),
            version: GeofenceCommand.version)
        do {
            try waitFor { try await daemon.run() }
        } catch let held as DaemonLock.Held {
            throw CommandFailure(held.description, exitCode: .tempFail)
        } catch let socket as ControlSocketError {
            throw CommandFailure(socket.description, exitCode: .unavailable)
        } catch let source as SourceOpenError {
            throw CommandFailure(source.description, exitCode: .noInput)
        } catch let mqtt as MQTTError {
            throw CommandFailure(mqtt.description, exitCode: .unavailable)
        } catch let metrics as MetricsServer.StartError {
            throw CommandFailure(metrics.description, exitCode: .unavailable)
        } catch let shortfall as UncommittedAtStop {
            throw CommandFailure(shortfall.description, exitCode: .ioError)
        }
    }

    /// `--source nats://…`: one engine of a cluster (Docs/cluster.md); its state and events live in JetStream,
    /// so no state directory, control socket, hooks or metrics of a local engine are started.
    func runCluster(_ kind: NATSSourceKind, _ c: CommandContext) throws {
        let node = ClusterNode(
            kind: kind, filter: configuration.filter, monitor: configuration.monitor,
            logger: Logger(minimum: level, environment: c.environment))
        do {
            try waitFor { try await node.run() }
        } catch let error as NATSError {
            throw CommandFailure("the cluster at \(kind.urls): \(error)", exitCode: .unavailable)
        }
    }

    /// A secret given in the `--source` text (a password in an MQTT URL) is blanked in this process's command
    /// line (what `ps` and /proc/PID/cmdline show), and the arguments for the re-execution leave it out,
    /// passing it on in its variable (`GEOFENCE_MQTT_PASSWORD`, which only the same user and root can read).
    /// Returns those arguments.
    static func hidingSecret(_ secret: CommandLineSecret?, in sourceText: String) -> [String] {
        guard let secret else { return CommandLine.arguments }
        let span = secret.span
        let bytes = Array(sourceText.utf8)
        setenv(secret.variable, secret.value, 1)
        let hidden = String(decoding: bytes[..<span.lowerBound] + bytes[span.upperBound...], as: UTF8.self)
        for i in 0..<Int(CommandLine.argc) {
            guard let argument = CommandLine.unsafeArgv[i] else { continue }
            let length = strlen(argument)
            guard length >= bytes.count, String(cString: argument).hasSuffix(sourceText) else { continue }
            let offset = length - bytes.count
            for j in span.dropFirst() { argument[offset + j] = CChar(UInt8(ascii: "x")) }
        }
        return CommandLine.arguments.map { argument in
            argument == sourceText ? hidden : argument == "--source=" + sourceText ? "--source=" + hidden : argument
        }
    }
}

extension CommandContext {
    /// What a source kind reads besides its `--source` text.
    var sourceArguments: SourceArguments {
        let arguments = self.arguments
        return SourceArguments(value: { arguments.value($0) }, environment: environment)
    }

    /// Runs a source kind's parse, saying its refusal as the CLI says its own.
    func sourceOptions<T>(_ parse: (SourceArguments) throws -> T) throws -> T {
        do {
            return try parse(sourceArguments)
        } catch let refusal as SourceOptionError {
            switch refusal {
            case .invalid(let option, let reason): throw invalid(option, reason)
            case .usage(let message): throw usage(message)
            case .unreadable(let message): throw CommandFailure(message, exitCode: .noInput)
            }
        }
    }
}
