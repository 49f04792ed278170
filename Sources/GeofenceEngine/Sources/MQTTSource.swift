import Foundation
import GeofenceCore
import GeofenceGPSD
import GeofenceSystem

/// How an MQTT message names its vehicle (`run --mqtt-vehicle`).
public enum MQTTVehicleNaming: Sendable, Equatable, CustomStringConvertible {
    /// The payload's own name: a TPV's `device` (else the topic); OwnTracks' `USER/DEVICE` from its topic.
    case payload
    /// The whole topic (`gpsfleet/truck-1`).
    case topic
    /// One level of the topic, counted from 1 (`gpsfleet/truck-1`, level 2: `truck-1`).
    case level(Int)

    /// `payload`, `topic` or `level:N`.
    public init?(parsing text: String) {
        switch text {
        case "payload", "device": self = .payload
        case "topic": self = .topic
        default:
            guard text.hasPrefix("level:"), let n = Int(text.dropFirst(6)), n >= 1, n <= 64 else { return nil }
            self = .level(n)
        }
    }

    public var description: String {
        switch self {
        case .payload: "payload"
        case .topic: "topic"
        case .level(let n): "level:\(n)"
        }
    }

    /// The fix named by its topic, or why the topic gives no name; nil for `payload` (the fix keeps its name).
    package func rename(_ fix: Fix, topic: String) -> GPSDJSONReport? {
        let name: String
        switch self {
        case .payload: return nil
        case .topic: name = topic
        case .level(let n):
            let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
            guard n <= levels.count, !levels[n - 1].isEmpty else {
                return .malformed(MalformedLine(.badDevice, "the topic has no level \(n) to name the vehicle"))
            }
            name = String(levels[n - 1])
        }
        if let problem = SubjectName.problem(name) {
            return .malformed(MalformedLine(.badDevice, "a vehicle name from the topic that \(problem)"))
        }
        var fix = fix
        fix.subject = VisibleName.normalized(name)
        return .tpv(fix)
    }
}

/// When an MQTT source acknowledges a message to the broker (`run --mqtt-ack`).
public enum MQTTAcknowledgement: String, Sendable, Equatable, CaseIterable {
    /// Once its fix is committed to the store (or refused: nothing to commit): a kill loses nothing, the
    /// broker sends again what was not acknowledged. Plain TCP only; TLS (libmosquitto) acknowledges on
    /// receipt.
    case commit
    /// Once the message is taken from the socket and its fix queued: a kill loses what was queued and not
    /// yet committed (at most some 1,500 fixes).
    case receipt
}

/// Fleet ingest from an MQTT broker: a QoS 1 subscription to one topic filter with a persistent session,
/// so that fixes published while the engine is down are delivered when it returns.
///
/// Payloads are gpsd TPV JSON (the subject is its `device`, else the topic) or OwnTracks `location` JSON
/// (the subject `USER/DEVICE` of the topic `owntracks/USER/DEVICE`, else the topic). Everything else is
/// counted by reason and skipped, as the JSON-lines source counts its lines, with the same first-fix
/// deadline and staleness watchdog; `status` shows the broker connected or not (and why), messages
/// received, usable fixes, the last one and its age.
///
/// Batching and back-pressure: the client's thread decodes each message and queues its fix; one
/// sender thread hands the queue to the engine as one report (at most `maximumBatch` fixes) whenever the
/// engine has room, so a busy engine gets fixes a batch at a time (one transaction each), an idle one at
/// once. The loop thread waits while `maximumQueued` fixes are queued, so a broker faster than the engine
/// holds its messages (its QoS 1 in-flight window) instead of the engine's memory filling.
public final class MQTTSource: LocationSource, @unchecked Sendable {
    // @unchecked: `client` is only touched under `lock`; the rest of the state is in `intake`.
    /// The broker, the login and TLS settings, and the topic filter subscribed to.
    public let address: MQTTAddress
    /// The MQTT client id, which names the broker's persistent session: keep it across restarts to get what
    /// was published meanwhile (`MQTTAddress.clientID(stateDirectory:)` makes one).
    public let clientID: String
    private let intake: FleetIntake
    private let lock = NSLock()
    private var client: (any MQTTClient)?
    private let logger: Logger?
    /// Fixes decoded and not yet handed over, in arrival order; guarded by `queue`.
    private var queued: [Fix] = []
    private var closing = false
    private var senderStarted = false
    private var senderDone = false
    private let queue = NSCondition()
    /// Fixes handed over at most in one report (one transaction of the engine's).
    public static let maximumBatch = 512
    /// Few: acknowledging on receipt (`--mqtt-ack receipt`, or libmosquitto for TLS), the client acknowledges
    /// a message once its fix is queued here, and a kill loses what waits (at most 2 batches being judged and
    /// 512 queued). After commit (the default), the broker's in-flight window bounds it too.
    public static let maximumQueued = 512
    /// Reports (batches) handed over and not yet judged before the sender waits: the sequence's high
    /// watermark.
    public static let maximumReports = 2
    /// How messages name their vehicles.
    public let naming: MQTTVehicleNaming
    /// When messages are acknowledged to the broker; `.commit` is honoured by the plain-TCP client only
    /// (`acknowledgesAfterCommit` says whether it is).
    public let acknowledgement: MQTTAcknowledgement
    /// Messages received and not yet acknowledged (`.commit`), in the order received, each with the number of
    /// fixes queued up to and including its own: acknowledged once the engine's committed mark reaches it.
    /// Guarded by `ackLock`, with the counts.
    private var unacknowledged: [(receipt: MQTTReceipt, fixes: Int64)] = []
    private var unacknowledgedHead = 0
    /// Fixes queued since start (the engine numbers them the same way, `FixPipeline.offered`), and the mark.
    private var fixesQueued: Int64 = 0
    private var committedMark: Int64 = 0
    private let ackLock = NSLock()
    /// Under `payload` naming, the topic each vehicle name was first seen on (at most `maximumNamesTracked`),
    /// and the names already said to arrive on several: two receivers that share a `device` (every
    /// `gpspipe` says `/dev/ttyACM0`) become one vehicle, which is warned about once and counted.
    private var topicOfName: [String: String] = [:]
    private var sharedNames: Set<String> = []
    static let maximumNamesTracked = 100_000
    /// How long the sender waits for a batch to fill once a fix is queued: the latency a fix may gain.
    static let gathering = 0.002
    /// Where OwnTracks `waypoint` and `waypoints` messages become regions (`--mqtt-waypoints regions`); nil:
    /// they are ignored, as any message that is no fix. Set before `connect`.
    package var waypointWriter: OwnTracksRegionWriter? {
        get { lock.withLock { writer } }
        set { lock.withLock { writer = newValue } }
    }
    private var writer: OwnTracksRegionWriter?

    /// A subscription to `address` as `clientID`; nothing is connected before `connect(timeout:)`. Vehicles
    /// are named as `naming` says (by the payload by default), messages acknowledged on receipt by default,
    /// and `liveness` defaults to 60 s for a first fix and 10 s between fixes.
    public init(
        address: MQTTAddress, clientID: String, liveness: SourceLiveness.Configuration = .init(),
        filter: FixFilterConfiguration = .init(), logger: Logger? = nil, naming: MQTTVehicleNaming = .payload,
        acknowledgement: MQTTAcknowledgement = .receipt
    ) {
        self.naming = naming
        self.acknowledgement = acknowledgement
        self.address = address
        self.clientID = clientID
        self.logger = logger
        intake = FleetIntake(
            status: SourceStatus(mqtt: address.description), liveness: liveness, filter: filter, logger: logger,
            backPressure: LocationReports.BackPressure(high: Self.maximumReports, low: Self.maximumReports - 1))
    }

    /// The fixes, in batches of up to `maximumBatch`, and news of the connection and of liveness.
    public var reports: LocationReports { intake.reports }

    /// `MQTT mqtt[s]://[USER@]HOST:PORT/FILTER` (never the password), for logs and `status`.
    public var label: String { intake.label }

    /// The subscription's own account: connected or not (and why), messages received, usable fixes.
    public var status: SourceStatus? { intake.status }

    /// Connects and subscribes, before the engine loads its regions: a broker that is unreachable or
    /// refuses (credentials, client id) is said at once, in one line, and the engine does not start.
    /// Messages that arrive before `start()` wait in the stream (at most `maximumReports` batches).
    public func connect(timeout: Double = 10) throws(MQTTError) {
        let options = MQTTOptions(
            host: address.host, port: address.port, clientID: clientID, username: address.username,
            password: address.password, topicFilter: address.topicFilter, tls: address.tls, caFile: address.caFile,
            certificateFile: address.certificateFile, keyFile: address.keyFile,
            deferAcknowledgements: acknowledgesAfterCommit)
        let client = try makeMQTTClient(options: options) { [weak self] event in self?.handle(event) }
        try client.start(timeout: timeout)
        lock.withLock { self.client = client }
    }

    /// Whether messages are acknowledged once their fixes are committed (`.commit`, and a plain-TCP
    /// connection: libmosquitto, for TLS, acknowledges on receipt). The engine then reports its committed
    /// mark to `committed(through:)`.
    public var acknowledgesAfterCommit: Bool {
        acknowledgement == .commit && !address.tls && MQTTClientKind.forPlainConnections == .native
    }

    /// What the monitor calls after each commit, for a source that acknowledges after commit (nil: one that
    /// acknowledges on receipt). The daemon and the library both wire it: a source that holds its
    /// acknowledgements back and never hears the mark would stall once the broker's in-flight window is full.
    package static func commitMark(for source: any LocationSource) -> (@Sendable (Int64) -> Void)? {
        guard let mqtt = source as? MQTTSource, mqtt.acknowledgesAfterCommit else { return nil }
        return { mark in mqtt.committed(through: mark) }
    }

    /// The engine has committed (or refused) every fix this source handed over, up to the `mark`th (counted
    /// from 1): the messages that carried them, and those before them, are acknowledged to the broker.
    public func committed(through mark: Int64) {
        let (client, receipts): ((any MQTTClient)?, [MQTTReceipt]) = ackLock.withLock {
            committedMark = max(committedMark, mark)
            return (lock.withLock { self.client }, dueReceipts())
        }
        client?.acknowledge(receipts)
    }

    /// Under `ackLock`: the receipts the mark has reached, taken from the front.
    private func dueReceipts() -> [MQTTReceipt] {
        var due: [MQTTReceipt] = []
        while unacknowledgedHead < unacknowledged.count, unacknowledged[unacknowledgedHead].fixes <= committedMark {
            due.append(unacknowledged[unacknowledgedHead].receipt)
            unacknowledgedHead += 1
        }
        if unacknowledgedHead == unacknowledged.count {
            unacknowledged.removeAll(keepingCapacity: true)
            unacknowledgedHead = 0
        } else if unacknowledgedHead >= 1_024 && unacknowledgedHead * 2 >= unacknowledged.count {
            unacknowledged.removeFirst(unacknowledgedHead)
            unacknowledgedHead = 0
        }
        return due
    }

    /// On the client's thread, after a message's fix (if any) is queued: its receipt waits for the mark (or
    /// is acknowledged at once, when every fix before it is committed).
    private func received(_ receipt: MQTTReceipt?, queuedFix: Bool) {
        guard let receipt else { return }
        let (client, receipts): ((any MQTTClient)?, [MQTTReceipt]) = ackLock.withLock {
            if queuedFix { fixesQueued += 1 }
            unacknowledged.append((receipt, fixesQueued))
            guard unacknowledged[unacknowledgedHead].fixes <= committedMark else { return (nil, []) }
            return (lock.withLock { self.client }, dueReceipts())
        }
        client?.acknowledge(receipts)
    }

    /// Starts the liveness watchdog and the thread that hands fixes over; returns at once. Call
    /// `connect(timeout:)` first: without it no message arrives.
    public func start() {
        intake.startWatchdog(name: "geofence.mqtt-watchdog")
        queue.withLock { senderStarted = true }
        let sender = Thread { [self] in send() }
        sender.name = "geofence.mqtt-in"
        sender.start()
    }

    /// The only thread that hands fixes over, so they keep their order.
    ///
    /// Woken by the first fix queued, it waits up to `gathering` seconds for a whole batch before handing
    /// over what is there: a stream of messages becomes reports of `maximumBatch` fixes (one transaction
    /// each) instead of one report for every message or two the loop thread decoded meanwhile, and the loop
    /// thread wakes this one once a batch, not once a message.
    private func send() {
        nameThisThread("geofence.mqtt-in")
        while true {
            queue.lock()
            while queued.isEmpty && !closing { queue.wait() }
            let deadline = Date().addingTimeInterval(Self.gathering)
            while queued.count < Self.maximumBatch && !closing && queue.wait(until: deadline) {}
            if queued.isEmpty {
                senderDone = true
                queue.broadcast()
                queue.unlock()
                return
            }
            let batch = Array(queued.prefix(Self.maximumBatch))
            queued.removeFirst(batch.count)
            queue.broadcast()
            queue.unlock()
            // Waits while the engine has `maximumReports` reports to judge: meanwhile the queue grows into the next batch.
            intake.send(.fixes(batch))
        }
    }

    private func enqueue(_ fix: Fix) {
        queue.lock()
        while queued.count >= Self.maximumQueued && !closing { queue.wait() }
        queued.append(fix)
        // The sender waits for a first fix, then for a whole batch: nothing else to wake it for.
        if queued.count == 1 || queued.count >= Self.maximumBatch { queue.broadcast() }
        queue.unlock()
    }

    /// Disconnects, hands over the fixes already taken from the broker (waiting up to 5 s), then ends
    /// `reports`.
    public func stop() async { halt() }

    private func halt() {
        intake.stop()
        // Disconnected first, so that no message is taken from the broker that the stream would not carry.
        let client = lock.withLock {
            defer { self.client = nil }
            return self.client
        }
        client?.stop()
        // What was taken from the broker is handed over before the stream ends (the sender runs only after
        // `start`).
        queue.lock()
        closing = true
        queue.broadcast()
        let deadline = Date().addingTimeInterval(5)
        while senderStarted && !senderDone && queue.wait(until: deadline) {}
        queue.unlock()
        intake.finish()
    }

    /// On the client's thread.
    private func handle(_ event: MQTTEvent) {
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
            intake.sendNow(.up)
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
        case .message(let topic, let payload, let receipt):
            if let writer = waypointWriter, let object = Self.waypoints(payload) {
                intake.countMessage()
                writer.apply(object, topic: topic, naming: naming, label: label)
                // Acknowledged once stored (or refused), as a fix once committed.
                received(receipt, queuedFix: false)
                return
            }
            if let fix = intake.take(
                Self.decode(topic: topic, payload: payload, naming: naming),
                context: " on " + JSONValue.string(topic).serialized())
            {
                if naming == .payload { noteName(fix.subject, topic: topic) }
                // Counted before it is queued: the engine may commit it before `enqueue` returns.
                received(receipt, queuedFix: true)
                enqueue(fix)
            } else {
                received(receipt, queuedFix: false)
            }
        case .tooLong(let topic, let bytes, let receipt):
            _ = intake.take(Self.tooLong(bytes), context: " on " + JSONValue.string(topic).serialized())
            received(receipt, queuedFix: false)
        }
    }

    /// On the client's thread: a vehicle name that arrives on a second topic is said once and counted.
    private func noteName(_ name: String, topic: String) {
        guard let first = topicOfName[name] else {
            if topicOfName.count < Self.maximumNamesTracked { topicOfName[name] = topic }
            return
        }
        guard first != topic, !sharedNames.contains(name) else { return }
        sharedNames.insert(name)
        intake.update { $0.sharedNames += 1 }
        logger?.warning(
            "\(label): vehicle \(JSONValue.string(name).serialized()) arrives on more than one topic "
                + "(\(JSONValue.string(first).serialized()), \(JSONValue.string(topic).serialized())): their fixes "
                + "are taken as one vehicle's; if they are different vehicles, name them by the topic "
                + "(--mqtt-vehicle topic, or level:N)")
    }

    static func tooLong(_ bytes: Int) -> GPSDJSONReport { FleetPayload.tooLong(bytes) }

    /// The payload when it is an OwnTracks `waypoint` or `waypoints` message: parsed only when its bytes say
    /// `waypoint`, so that a location is not parsed twice (a `_type` spelt with escapes is not looked for).
    static func waypoints(_ payload: [UInt8]) -> JSONValue? {
        guard payload.count <= GPSDJSON.maximumLineLength, payload.firstRange(of: waypointBytes) != nil,
            let object = try? JSON.parse(payload), OwnTracksWaypoints.isWaypoints(object)
        else { return nil }
        return object
    }

    private static let waypointBytes = Array("\"waypoint".utf8)

    /// Decodes one message: gpsd TPV or OwnTracks location, named as `naming` says.
    static func decode(topic: String, payload: [UInt8], naming: MQTTVehicleNaming) -> GPSDJSONReport {
        let report = decode(topic: topic, payload: payload)
        guard case .tpv(let fix) = report else { return report }
        return naming.rename(fix, topic: topic) ?? report
    }

    /// Decodes one message: gpsd TPV or OwnTracks location (`FleetPayload`), named by the payload.
    static func decode(topic: String, payload: [UInt8]) -> GPSDJSONReport {
        FleetPayload.decode(topic: topic, payload: payload)
    }
}
