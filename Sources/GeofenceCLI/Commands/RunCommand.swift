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
        guard let text = arguments.value("--gpsd") else { return .default }
        do {
            return try GPSDAddress(parsing: text)
        } catch {
            throw invalid("--gpsd", "\(error)")
        }
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
        if sourceText == "gpsd" {
            configuration.source = .gpsd(try c.gpsdAddress())
        } else if sourceText.hasPrefix("json:"), sourceText.count > 5 {
            configuration.source = .jsonLines(String(sourceText.dropFirst(5)))
        } else if sourceText.hasPrefix("mqtt://") || sourceText.hasPrefix("mqtts://") {
            configuration.source = try Self.mqttSource(c, sourceText)
        } else {
            throw c.invalid("--source", "\"\(sourceText)\" is not gpsd, json:PATH or mqtt://HOST[:PORT]/TOPIC")
        }
        if let subject = c.arguments.value("--subject") {
            guard case .gpsd = configuration.source else {
                throw c.usage(
                    "--subject names a gpsd receiver: a fleet's vehicles are named by their fixes (--source json: or mqtt://)"
                )
            }
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
        if let text = c.arguments.value("--mqtt-vehicle") {
            guard let naming = MQTTVehicleNaming(parsing: text) else {
                throw c.usage(
                    "invalid value for --mqtt-vehicle: \"\(text)\" is not payload, topic or level:N (N from 1)")
            }
            configuration.mqttVehicle = naming
        }
        if let text = c.arguments.value("--mqtt-ack") {
            guard let mode = MQTTAcknowledgement(rawValue: text) else {
                throw c.invalid("--mqtt-ack", "\"\(text)\" is not commit or receipt")
            }
            configuration.mqttAcknowledgement = mode
        }
        if let text = c.arguments.value("--metrics") {
            do {
                configuration.metrics = try MetricsAddress(parsing: text)
            } catch {
                throw c.usage("invalid value for --metrics: \(error)")
            }
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
        Self.useHugePages(c.environment, arguments: Self.hidingPassword(sourceText))
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

    /// A password given in the `--source` URL is blanked in this process's command line (what `ps` and
    /// /proc/PID/cmdline show), and the arguments for the re-execution leave it out, passing it on in
    /// `GEOFENCE_MQTT_PASSWORD` (which only the same user and root can read). Returns those arguments.
    static func hidingPassword(_ sourceText: String) -> [String] {
        guard let span = MQTTAddress.passwordSpan(in: sourceText),
            let password = (try? MQTTAddress(parsing: sourceText))?.password
        else { return CommandLine.arguments }
        let bytes = Array(sourceText.utf8)
        setenv("GEOFENCE_MQTT_PASSWORD", password, 1)
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

    /// `--source mqtt://...`, with its password from the URL, `--mqtt-password-file` or
    /// `GEOFENCE_MQTT_PASSWORD` (the last two keep it out of `ps`); never echoed, even in errors.
    static func mqttSource(_ c: CommandContext, _ text: String) throws -> DaemonConfiguration.Source {
        var address: MQTTAddress
        do {
            address = try MQTTAddress(parsing: text)
        } catch {
            throw c.invalid("--source", "\(error)")
        }
        if let file = c.arguments.value("--mqtt-password-file") {
            guard address.password == nil else {
                throw c.usage("--mqtt-password-file and a password in the --source URL: give only one")
            }
            guard let data = FileManager.default.contents(atPath: file) else {
                let reason = access(file, R_OK) == 0 ? "cannot be read" : String(cString: strerror(errno))
                throw CommandFailure("cannot read the MQTT password file \(file): \(reason)", exitCode: .noInput)
            }
            var password = String(decoding: data, as: UTF8.self)
            if password.hasSuffix("\n") { password.removeLast() }
            address.password = password
        } else if address.password == nil, let password = c.environment["GEOFENCE_MQTT_PASSWORD"] {
            address.password = password
        }
        if let ca = c.arguments.value("--mqtt-ca") {
            guard address.tls else { throw c.usage("--mqtt-ca is for TLS: use mqtts:// in --source") }
            guard access(ca, R_OK) == 0 else {
                throw CommandFailure(
                    "cannot read the MQTT CA file \(ca): \(String(cString: strerror(errno)))", exitCode: .noInput)
            }
            address.caFile = ca
        }
        let certificate = c.arguments.value("--mqtt-cert")
        let key = c.arguments.value("--mqtt-key")
        if certificate != nil || key != nil {
            guard address.tls else { throw c.usage("--mqtt-cert and --mqtt-key are for TLS: use mqtts:// in --source") }
            guard let certificate, let key else {
                throw c.usage("--mqtt-cert and --mqtt-key go together: the certificate and its private key")
            }
            for (what, file) in [("certificate", certificate), ("key", key)] where access(file, R_OK) != 0 {
                throw CommandFailure(
                    "cannot read the MQTT \(what) file \(file): \(String(cString: strerror(errno)))", exitCode: .noInput
                )
            }
            address.certificateFile = certificate
            address.keyFile = key
        }
        if address.password != nil, address.username == nil {
            throw c.usage("an MQTT password needs a user name: mqtt://USER@HOST[:PORT]/TOPIC")
        }
        var clientID: String?
        if let id = c.arguments.value("--mqtt-client-id") {
            guard !id.isEmpty, id.utf8.count <= 65535, !id.contains(where: \.isNewline) else {
                throw c.invalid("--mqtt-client-id", "must be 1 to 65535 bytes, one line")
            }
            clientID = id
        }
        return .mqtt(address, clientID: clientID)
    }
}
