import Foundation
import GeofenceCore
import GeofenceStore
import Synchronization

/// Publishes events to an MQTT broker at QoS 1 (libmosquitto): an event is acknowledged when the broker's
/// PUBACK for each of its messages (the event, and the retained state of its pair) has come back.
///
/// A batch is handed to libmosquitto at once, which keeps up to `window` messages in flight and the rest
/// queued; across a lost connection it keeps them all and sends the unacknowledged ones again after it
/// reconnects (a persistent session under a fixed client id), so a broker outage during a batch costs a
/// wait, not a loss. The connection carries a last will (`offline`, retained, on the status topic), and
/// says `online` (retained) at every connection and `offline` at a graceful stop.
public final class MQTTSink: EventSink, @unchecked Sendable {
    // @unchecked: every mutable field is guarded by `lock`; `client` is set in `open` and read under it.
    public let id: String
    public let address: MQTTAddress
    public let clientID: String
    private let events: [String]
    private let format: SinkFormat
    private let topic: TopicTemplate
    private let stateTopic: TopicTemplate?
    private let statusTopic: String?
    private let logger: Logger
    /// QoS 1 messages in flight at once.
    public var window: Int32 = 1_000
    /// A batch whose acknowledgements stop coming for this long, while connected, is cut short there (the
    /// rest is offered again: duplicates, never a loss).
    public var stallTimeout = 30.0

    private let lock = NSLock()
    private var client: MQTTClient?
    private var connected = false
    private var problem: String?
    /// Per event of the batch being delivered: its messages not yet acknowledged.
    private var remaining: [Int] = []
    private var outstanding = 0
    private var byMessage: [Int32: Int] = [:]
    /// Acknowledgements that came before `publish` returned their id.
    private var early: Set<Int32> = []
    private var statusMessage: Int32?
    private var statusAcknowledged = false
    private var waiter: CheckedContinuation<Void, Never>?

    public init(
        id: String, address: MQTTAddress, clientID: String, events: [String], format: SinkFormat,
        topic: TopicTemplate, stateTopic: TopicTemplate?, statusTopic: String?, logger: Logger
    ) {
        self.id = id
        self.address = address
        self.clientID = clientID
        self.events = events
        self.format = format
        self.topic = topic
        self.stateTopic = stateTopic
        self.statusTopic = statusTopic
        self.logger = logger
    }

    public func accepts(eventType: String) -> Bool { events.isEmpty || events.contains(eventType) }

    public var health: SinkHealth {
        lock.withLock { SinkHealth(address: address.broker, connected: connected, problem: problem) }
    }

    public func open() async throws {
        var options = MQTTClient.Options(
            host: address.host, port: address.port, clientID: clientID, username: address.username,
            password: address.password, topicFilter: nil, tls: address.tls, caFile: address.caFile)
        options.will = statusTopic.map { MQTTClient.Will(topic: $0, payload: "offline") }
        options.sendMaximum = window
        options.reconnectDelayMax = 5
        lock.withLock { problem = problem ?? "connecting to \(address.broker)" }
        let made = try MQTTClient(options: options) { [weak self] event in self?.handle(event) }
        // `start` waits for the broker's answer (a blocking connect, up to 10 s for CONNACK): on a thread of
        // its own, not the cooperative pool's, and given up at once when the engine stops, so that a broker
        // that never answers cannot hold the engine's stop (the thread then drops the client when done).
        let answer = Mutex<CheckedContinuation<Result<Void, MQTTError>, Never>?>(nil)
        let started: Result<Void, MQTTError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                answer.withLock { $0 = continuation }
                let thread = Thread {
                    let result: Result<Void, MQTTError>
                    do throws(MQTTError) {
                        try made.start(timeout: 10)
                        result = .success(())
                    } catch {
                        result = .failure(error)
                    }
                    if let waiting = answer.withLock({ c in
                        defer { c = nil }
                        return c
                    }) {
                        waiting.resume(returning: result)
                    } else {
                        made.stop()
                    }
                }
                thread.name = "geofence.sink-connect"
                thread.start()
                // Cancelled before the continuation was stored: the handler found nothing to resume.
                if Task.isCancelled {
                    answer.withLock { c in
                        defer { c = nil }
                        return c
                    }?.resume(returning: .failure(MQTTError(description: "stopped while connecting")))
                }
            }
        } onCancel: {
            answer.withLock { c in
                defer { c = nil }
                return c
            }?.resume(
                returning: .failure(MQTTError(description: "stopped while connecting")))
        }
        if case .failure(let error) = started {
            lock.withLock {
                connected = false
                problem = error.description
            }
            throw error
        }
        lock.withLock {
            client = made
            connected = true
            problem = nil
        }
        publishStatus("online", client: made)
        logger.info("sink \(id): connected to \(address.broker) as client \(clientID)")
    }

    public func deliver(_ batch: [StoredEvent]) async throws -> Int {
        let (client, up, why) = lock.withLock { (self.client, connected, problem) }
        guard let client else { throw SinkUnavailable("not connected") }
        guard up else { throw SinkUnavailable(why ?? "not connected to \(address.broker)") }
        let messages = batch.map {
            SinkFormat.messages(for: $0, format: format, topic: topic, stateTopic: stateTopic)
        }
        lock.withLock {
            remaining = messages.map(\.count)
            outstanding = remaining.reduce(0, +)
            byMessage.removeAll(keepingCapacity: true)
            early.removeAll()
        }
        var published = batch.count
        publishing: for (index, list) in messages.enumerated() {
            for message in list {
                let mid: Int32
                do {
                    mid = try client.publish(topic: message.topic, payload: message.payload, retain: message.retain)
                } catch {
                    // Not taken by libmosquitto (a malformed topic, memory): what came before still counts.
                    lock.withLock { problem = error.description }
                    logger.error("sink \(id): \(error)")
                    published = index
                    break publishing
                }
                lock.withLock {
                    if early.remove(mid) != nil {
                        acknowledge(index)
                    } else {
                        byMessage[mid] = index
                    }
                }
            }
        }
        // Wait for the acknowledgements, noticing a stall while connected.
        var lastProgress = Date()
        var seen = -1
        while !Task.isCancelled {
            let (left, up) = lock.withLock { (outstanding, connected) }
            if left == 0 { break }
            if left != seen {
                seen = left
                lastProgress = Date()
            } else if up && Date().timeIntervalSince(lastProgress) > stallTimeout {
                logger.warning(
                    "sink \(id): \(left) messages unacknowledged for \(Int(stallTimeout)) s; offering them again")
                break
            }
            await waitForAcknowledgements(seconds: 1)
        }
        return lock.withLock {
            let acknowledged = remaining.firstIndex { $0 > 0 } ?? remaining.count
            byMessage.removeAll(keepingCapacity: true)
            return min(acknowledged, published)
        }
    }

    public func close() async {
        guard let client = lock.withLock({ self.client }) else { return }
        if lock.withLock({ connected }) {
            publishStatus("offline", client: client)
            // Bounded: the whole engine is to be gone within 2 s of SIGTERM.
            let deadline = Date().addingTimeInterval(1)
            while !lock.withLock({ statusAcknowledged }), Date() < deadline {
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
        client.stop()
        lock.withLock {
            self.client = nil
            connected = false
        }
    }

    private func publishStatus(_ word: String, client: MQTTClient) {
        guard let statusTopic else { return }
        lock.withLock { statusAcknowledged = false }
        if let mid = try? client.publish(topic: statusTopic, payload: Array(word.utf8), retain: true) {
            lock.withLock { statusMessage = mid }
        }
    }

    /// Under `lock`.
    private func acknowledge(_ index: Int) {
        remaining[index] -= 1
        outstanding -= 1
        if outstanding == 0, let waiter {
            self.waiter = nil
            waiter.resume()
        }
    }

    private func waitForAcknowledgements(seconds: Double) async {
        let timer = Task {
            guard (try? await Task.sleep(for: .seconds(seconds))) != nil else { return }
            self.wakeWaiter()
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = lock.withLock { () -> Bool in
                    if outstanding == 0 || Task.isCancelled { return true }
                    waiter = c
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            self.wakeWaiter()
        }
        timer.cancel()
    }

    private func wakeWaiter() {
        let waiter = lock.withLock {
            defer { self.waiter = nil }
            return self.waiter
        }
        waiter?.resume()
    }

    /// On libmosquitto's loop thread.
    private func handle(_ event: MQTTClient.Event) {
        switch event {
        case .published(let mid):
            lock.withLock {
                if mid == statusMessage {
                    statusAcknowledged = true
                    statusMessage = nil
                } else if let index = byMessage.removeValue(forKey: mid) {
                    acknowledge(index)
                } else if outstanding > 0 {
                    early.insert(mid)
                }
            }
        case .connected:
            let (wasDown, client) = lock.withLock {
                defer {
                    connected = true
                    problem = nil
                }
                return (!connected, self.client)
            }
            if wasDown, let client {
                logger.notice("sink \(id): connected again to \(address.broker)")
                publishStatus("online", client: client)
            }
        case .disconnected(let why), .refused(let why):
            let first = lock.withLock {
                defer {
                    connected = false
                    problem = why
                }
                return connected
            }
            if first { logger.warning("sink \(id): \(address.broker): \(why); reconnecting with backoff") }
            wakeWaiter()
        case .message:
            break
        }
    }
}
