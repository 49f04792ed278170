import Foundation
import GeofenceCore
import GeofenceGPSD

/// Fleet ingest from an MQTT broker: a QoS 1 subscription to one topic filter with a persistent session,
/// so that fixes published while the engine is down are delivered when it returns.
///
/// Payloads are gpsd TPV JSON (the subject is its `device`, else the topic) or OwnTracks `location` JSON
/// (the subject `USER/DEVICE` of the topic `owntracks/USER/DEVICE`, else the topic). Everything else is
/// counted by reason and skipped, as the JSON-lines source counts its lines, with the same first-fix
/// deadline and staleness watchdog; `status` shows the broker connected or not (and why), messages
/// received, usable fixes, the last one and its age.
///
/// Back-pressure: a message is handed over on libmosquitto's loop thread, which waits while 16 reports
/// are in flight, so a broker faster than the engine holds its messages (QoS 1 in-flight window) instead
/// of the engine's memory filling.
public final class MQTTSource: FixSource, @unchecked Sendable {
    // @unchecked: `client` is only touched under `lock`; the rest of the state is in `intake`.
    public let address: MQTTAddress
    public let clientID: String
    private let intake: FleetIntake
    private let lock = NSLock()
    private var client: MQTTClient?
    private let logger: Logger?

    public init(
        address: MQTTAddress, clientID: String, liveness: SourceLiveness.Configuration = .init(),
        logger: Logger? = nil
    ) {
        self.address = address
        self.clientID = clientID
        self.logger = logger
        intake = FleetIntake(status: SourceStatus(mqtt: address.description), liveness: liveness, logger: logger)
    }

    public var reports: AsyncStream<GPSDReport> { intake.reports }

    public var label: String { intake.label }

    public var status: SourceStatus? { intake.status }

    /// Connects and subscribes, before the engine loads its regions: a broker that is unreachable or
    /// refuses (credentials, client id) is said at once, in one line, and the engine does not start.
    /// Messages that arrive before `start()` wait in the stream (at most `maximumInFlight`).
    public func connect(timeout: Double = 10) throws(MQTTError) {
        let options = MQTTClient.Options(
            host: address.host, port: address.port, clientID: clientID, username: address.username,
            password: address.password, topicFilter: address.topicFilter, tls: address.tls, caFile: address.caFile)
        let client = try MQTTClient(options: options) { [weak self] event in self?.handle(event) }
        try client.start(timeout: timeout)
        lock.withLock { self.client = client }
    }

    public func start() { intake.startWatchdog(name: "geofence.mqtt-watchdog") }

    public func stop() async { halt() }

    private func halt() {
        intake.stop()
        // Disconnected first, so that no message is taken from the broker that the stream would not carry.
        let client = lock.withLock {
            defer { self.client = nil }
            return self.client
        }
        client?.stop()
        intake.finish()
    }

    public func consumed() { intake.consumed() }

    /// On libmosquitto's loop thread.
    private func handle(_ event: MQTTClient.Event) {
        switch event {
        case .connected:
            let wasDown = intake.update { status in
                defer {
                    status.open = true
                    status.problem = nil
                }
                return !status.open && status.problem != nil
            }
            if wasDown { logger?.notice("\(label): connected again") }
            intake.sendNow(.connected)
        case .refused(let why), .disconnected(let why):
            let first = intake.update { status in
                defer {
                    status.open = false
                    status.problem = why
                }
                return status.problem != why
            }
            if first { logger?.warning("\(label): \(why); reconnecting with backoff (1 s doubling to 30 s)") }
        case .published:
            break
        case .message(let topic, let payload):
            let on = " on " + JSONValue.string(topic).serialized()
            if let fix = intake.take(Self.decode(topic: topic, payload: payload), context: on) {
                intake.send(.fix(fix))
            }
        }
    }

    /// Decodes one message: gpsd TPV or OwnTracks location.
    static func decode(topic: String, payload: [UInt8]) -> GPSDJSONReport {
        if payload.count > GPSDJSON.maximumLineLength {
            return .malformed(.init(.tooLong, "message of \(payload.count) bytes is too long"))
        }
        // OwnTracks says `_type`, gpsd `class`; only an object with `_type` is parsed whole.
        if payload.contains(UInt8(ascii: "_")), let object = try? JSON.parse(payload),
            OwnTracksJSON.isOwnTracks(object)
        {
            return OwnTracksJSON.decode(object, subject: OwnTracksJSON.subject(topic: topic) ?? topic)
        }
        let report = GPSDJSON.decode(payload, defaultSubject: topic)
        // A TPV without `device` is named by its topic, which is held to the same naming rule.
        if case .tpv(var fix) = report, fix.subject == topic {
            if let problem = SubjectName.problem(topic) {
                return .malformed(.init(.badDevice, "a TPV without \"device\" on a topic that \(problem)"))
            }
            fix.subject = VisibleName.normalized(topic)
            return .tpv(fix)
        }
        return report
    }
}
