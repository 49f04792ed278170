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
    // @unchecked: the mutable fields are only touched under `lock` (the in-flight count under `room`).
    public let address: MQTTAddress
    public let clientID: String
    public let reports: AsyncStream<GPSDReport>
    private let continuation: AsyncStream<GPSDReport>.Continuation
    private let lock = NSLock()
    private var stopped = false
    private var inFlight = 0
    private let room = NSCondition()
    public var maximumInFlight = 16
    private var liveness: SourceLiveness
    private var counts: SourceStatus
    private let logger: Logger?
    private let clock = MonotonicClock()
    private var lastSummary = -Double.infinity
    private var unusableAtSummary = 0
    private var client: MQTTClient?

    public init(
        address: MQTTAddress, clientID: String, liveness: SourceLiveness.Configuration = .init(),
        logger: Logger? = nil
    ) {
        self.address = address
        self.clientID = clientID
        self.logger = logger
        self.liveness = SourceLiveness(configuration: liveness, startedAt: clock.now)
        counts = SourceStatus(mqtt: address.description)
        (reports, continuation) = AsyncStream.makeStream(of: GPSDReport.self)
    }

    public var label: String { counts.label }

    public var status: SourceStatus? {
        lock.withLock {
            var status = counts
            switch liveness.state {
            case .awaitingFirstFix: status.liveness = "awaiting-first-fix"
            case .receiving: status.liveness = "receiving"
            case .silent: status.liveness = "silent"
            case .lost: status.liveness = "lost"
            }
            return status
        }
    }

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

    public func start() {
        lock.withLock { liveness.restart(at: clock.now) }
        let watchdog = Thread { self.watch() }
        watchdog.name = "geofence.mqtt-watchdog"
        watchdog.start()
    }

    public func stop() async { halt() }

    private func halt() {
        lock.withLock { stopped = true }
        room.withLock { room.broadcast() }
        // Disconnected first, so that no message is taken from the broker that the stream would not carry.
        let client = lock.withLock {
            defer { self.client = nil }
            return self.client
        }
        client?.stop()
        continuation.finish()
    }

    private var isStopped: Bool { lock.withLock { stopped } }

    public func consumed() {
        room.lock()
        inFlight -= 1
        if inFlight < maximumInFlight / 2 { room.signal() }
        room.unlock()
    }

    private func send(_ report: GPSDReport) {
        room.lock()
        while inFlight >= maximumInFlight && !isStopped { _ = room.wait(until: Date().addingTimeInterval(0.2)) }
        inFlight += 1
        room.unlock()
        continuation.yield(report)
    }

    private func sendNow(_ report: GPSDReport) {
        room.lock()
        inFlight += 1
        room.unlock()
        continuation.yield(report)
    }

    private func watch() {
        while !isStopped {
            let transition = lock.withLock { liveness.advance(to: clock.now) }
            if let transition { sendNow(.liveness(transition)) }
            Thread.sleep(forTimeInterval: 0.1)
        }
    }

    /// On libmosquitto's loop thread.
    private func handle(_ event: MQTTClient.Event) {
        switch event {
        case .connected:
            let wasDown = lock.withLock {
                defer {
                    counts.open = true
                    counts.problem = nil
                }
                return !counts.open && counts.problem != nil
            }
            if wasDown { logger?.notice("\(label): connected again") }
            sendNow(.connected)
        case .refused(let why), .disconnected(let why):
            let first = lock.withLock {
                defer {
                    counts.open = false
                    counts.problem = why
                }
                return counts.problem != why
            }
            if first { logger?.warning("\(label): \(why); reconnecting with backoff (1 s doubling to 30 s)") }
        case .message(let topic, let payload):
            if let fix = take(topic: topic, payload: payload) { send(.fix(fix)) }
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

    private func take(topic: String, payload: [UInt8]) -> Fix? {
        let unusable: (kind: String, why: String)?
        var fix: Fix?
        switch Self.decode(topic: topic, payload: payload) {
        case .tpv(let decoded):
            fix = decoded
            unusable = SourceStatus.Unusable.reason(decoded)
        case .other:
            lock.withLock {
                counts.lines += 1
                counts.ignored += 1
            }
            return nil
        case .malformed(let problem):
            unusable = (problem.kind.rawValue, problem.description)
        }
        let now = clock.now
        var restored: SourceLiveness.Transition?
        var first = false
        var summary: String?
        lock.withLock {
            counts.lines += 1
            if let unusable {
                first = counts.unusable[unusable.kind] == nil
                counts.unusable[unusable.kind, default: 0] += 1
                let total = counts.unusableTotal
                if !first, now - lastSummary >= 60, total > unusableAtSummary + 1 {
                    summary = "\(total) message(s) from \(label) gave no usable fix so far: \(counts.unusableSummary)"
                    lastSummary = now
                    unusableAtSummary = total
                }
                if first { lastSummary = now }
            } else if let fix {
                counts.usableFixes += 1
                counts.lastFixTime = fix.time
                counts.lastFixRead = Date()
                restored = liveness.usableFix(at: now)
            }
        }
        if let unusable, first {
            let on = JSONValue.string(topic).serialized()
            logger?.warning(
                "\(label): skipped a message on \(on) (\(unusable.kind)): \(unusable.why); further ones are counted")
        }
        if let summary { logger?.warning(summary) }
        if let restored { sendNow(.liveness(restored)) }
        return fix
    }
}
