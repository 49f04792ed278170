import Foundation
import GeofenceCore
import GeofenceStore
import Synchronization

/// Publishes events to an MQTT broker at QoS 1 (through `MQTTClient`): an event is acknowledged when the broker's
/// PUBACK for each of its messages (the event, and the retained state of its pair) has come back.
///
/// A batch is handed to the client `window` messages at a time: the first ones by `deliver`, each next one
/// as a PUBACK comes back (on the client's thread, from its handler), so that the client holds no more
/// than `window` messages (libmosquitto, for TLS, walks a list of them for every message and PUBACK).
/// Across a lost connection the client keeps what it holds and sends the unacknowledged messages again after it
/// reconnects (a persistent session under a fixed client id), and the rest of the batch waits for their
/// PUBACKs, so a broker outage during a batch costs a wait, not a loss. The connection carries a last will (`offline`, retained, on the status topic), and
/// says `online` (retained) at every connection and `offline` at a graceful stop.
package final class MQTTSink: EventSink, @unchecked Sendable {
    // @unchecked: every mutable field is guarded by `lock`; `client` is set in `open` and read under it.
    package let id: String
    package let address: MQTTAddress
    package let clientID: String
    private let events: [String]
    private let format: SinkFormat
    private let topic: TopicTemplate
    private let stateTopic: TopicTemplate?
    private let statusTopic: String?
    private let logger: Logger
    /// QoS 1 messages handed to the client and not yet acknowledged, at most; nil: the client's own
    /// (`MQTTClient.preferredWindow`: 1,000 for geofence's own client, 128 for libmosquitto).
    package var window: Int?
    /// Events read from the outbox and published as one batch. Each batch ends with a wait for its last
    /// PUBACKs, during which the broker has nothing new: with 2,000 events that tail was a third of a
    /// backlog's drain, with 10,000 the messages a second are 1.35 times as many (`Docs/benchmarks.md`).
    /// (A pair's states are also coalesced within a batch: more in a bigger one, during a backlog.)
    package let batchSize = 10_000
    /// The client's own limit of messages in flight: at least `window`, so that it never holds one back.
    static let libraryWindow: Int32 = 1_000
    /// A batch whose acknowledgements stop coming for this long, while connected, is cut short there (the
    /// rest is offered again: duplicates, never a loss).
    package var stallTimeout = 30.0

    private let lock = NSLock()
    private var client: (any MQTTClient)?
    private var connected = false
    private var problem: String?
    /// Per event of the batch being delivered: its messages not yet acknowledged.
    private var remaining: [Int] = []
    private var outstanding = 0
    /// The batch's messages, each with the event it counts for; the next one to hand to the client; how
    /// many were handed over and not acknowledged; the event of the first that the client refused.
    private var plan: [(message: SinkMessage, event: Int)] = []
    private var next = 0
    private var inFlight = 0
    private var refusedAt: Int?
    /// Held while handing messages over, by `deliver` or by the loop thread: one at a time, in order.
    private let publishing = NSLock()
    private var ids = MessageIDs()
    private var statusAcknowledged = false
    private var waiter: CheckedContinuation<Void, Never>?
    /// With `--format homeassistant`: the vehicles' trackers, kept in step with the store by `sync`.
    private let trackers: HomeAssistantTrackers?
    /// One tracker sync at a time (a batch's vehicles, or all of them), so an older reading of the store is
    /// never published after a newer one.
    private let syncing = AsyncLock()
    /// Where the trackers' SQLite reads and writes run: a thread of its own, not the cooperative pool.
    private let trackerWorker = StoreWorker(name: "geofence.sink-ha")
    /// Per group of tracker messages handed to the client, how many are not yet acknowledged.
    private var pendingExtra: [Int: Int] = [:]
    private var extraGroups = 0
    /// The connection came back: publish every tracker again (a broker without persistence lost them).
    private var resync = false
    /// Every second: a full tracker sync when regions or vehicles changed (`HomeAssistantTrackers`).
    private var housekeeping: Task<Void, Never>?

    package init(
        id: String, address: MQTTAddress, clientID: String, events: [String], format: SinkFormat,
        topic: TopicTemplate, stateTopic: TopicTemplate?, statusTopic: String?, logger: Logger,
        trackers: HomeAssistantTrackers? = nil
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
        self.trackers = trackers
    }

    package func accepts(eventType: String) -> Bool { events.isEmpty || events.contains(eventType) }

    package var health: SinkHealth {
        lock.withLock { SinkHealth(address: address.broker, connected: connected, problem: problem) }
    }

    package func open() async throws {
        var options = MQTTOptions(
            host: address.host, port: address.port, clientID: clientID, username: address.username,
            password: address.password, topicFilter: nil, tls: address.tls, caFile: address.caFile,
            certificateFile: address.certificateFile, keyFile: address.keyFile)
        options.will = statusTopic.map { MQTTWill(topic: $0, payload: "offline") }
        options.sendMaximum = Self.libraryWindow
        options.reconnectDelayMax = 5
        lock.withLock { problem = problem ?? "connecting to \(address.broker)" }
        let made = try makeMQTTClient(options: options) { [weak self] event in self?.handle(event) }
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
        if trackers != nil {
            let task = Task { [weak self] in
                while !Task.isCancelled {
                    guard let self else { return }
                    await self.keepTrackers()
                    try? await Task.sleep(for: .seconds(1))
                }
            }
            lock.withLock { housekeeping = task }
        }
    }

    package func deliver(_ batch: [StoredEvent]) async throws -> Int {
        let (client, up, why) = lock.withLock { (self.client, connected, problem) }
        guard let client else { throw SinkUnavailable("not connected") }
        guard up else { throw SinkUnavailable(why ?? "not connected to \(address.broker)") }
        // Each message with the event it counts for; a pair's states in this batch coalesced into its last.
        let planned = SinkFormat.plan(batch, format: format, topic: topic, stateTopic: stateTopic)
        // Under `publishing` too: a message of the batch before, being handed over on the client's thread
        // (its PUBACK's `pump`), is recorded for that batch before this one starts, never for this one, whose
        // event of the same index it would acknowledge (or whose `remaining` it would index past the end).
        publishing.withLock {
            lock.withLock {
                remaining = Array(repeating: 0, count: batch.count)
                for (_, index) in planned { remaining[index] += 1 }
                outstanding = planned.count
                plan = planned
                next = 0
                inFlight = 0
                refusedAt = nil
                ids.startBatch()
            }
        }
        pump(client)
        // Wait for the acknowledgements, noticing a stall while connected.
        var lastProgress = Date()
        var seen = -1
        while !Task.isCancelled {
            let (left, up, refused) = lock.withLock { (outstanding, connected, refusedAt != nil && inFlight == 0) }
            if left == 0 || refused { break }
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
        let delivered = publishing.withLock {
            lock.withLock {
                let acknowledged = remaining.firstIndex { $0 > 0 } ?? remaining.count
                let published = refusedAt ?? batch.count
                ids.endBatch()
                // PUBACKs still to come for this batch (cut short) hand nothing more over.
                plan = []
                next = 0
                return min(acknowledged, published)
            }
        }
        // The trackers of the vehicles these events moved: acknowledged too before the events count as
        // delivered, so the cursor never passes an event whose vehicle's tracker is not on the broker.
        if trackers != nil, delivered > 0 {
            var seen: Set<String> = []
            let subjects = batch[..<delivered].compactMap { e -> String? in
                guard e.region != nil, let subject = e.subject, seen.insert(subject).inserted else { return nil }
                return subject
            }
            if !subjects.isEmpty, !(await sync(subjects)) { return 0 }
        }
        return delivered
    }

    /// Publishes the trackers of `subjects` (nil: of every vehicle, and clears those of vehicles gone) as the
    /// store has them now, and waits for the broker's acknowledgements; false when they did not all come.
    private func sync(_ subjects: [String]?) async -> Bool {
        guard let trackers else { return true }
        await syncing.lock()
        defer { syncing.unlock() }
        guard let client = lock.withLock({ self.client }) else { return false }
        let plan: HomeAssistantTrackers.Plan
        do {
            plan = try await trackerWorker.run {
                let plan = try trackers.plan(subjects)
                try trackers.willPublish(plan)
                return plan
            }
        } catch {
            logger.warning("sink \(id): cannot read the vehicles for Home Assistant: \(error)")
            return false
        }
        guard await publishAndWait(plan.messages, client: client) else { return false }
        do {
            try await trackerWorker.run { try trackers.didPublish(plan) }
        } catch {
            logger.warning("sink \(id): cannot record the Home Assistant trackers: \(error)")
            return false
        }
        if !plan.forget.isEmpty {
            logger.info("sink \(id): cleared the Home Assistant trackers of \(plan.forget.count) vehicle(s) gone")
        }
        return true
    }

    /// Every second while connected: a full sync when the store's regions or vehicles changed since the last
    /// one (or none succeeded yet, or the connection came back).
    private func keepTrackers() async {
        guard let trackers, lock.withLock({ connected }) else { return }
        await syncing.lock()
        let again = lock.withLock {
            defer { resync = false }
            return resync
        }
        let due = await trackerWorker.run { () -> Bool in
            if again { trackers.forgetPublished() }
            return trackers.fingerprint == nil || (try? trackers.currentFingerprint()) != trackers.fingerprint
        }
        syncing.unlock()
        if due { _ = await sync(nil) }
    }

    /// Hands `messages` to the client, 256 at a time, each time waiting for all their PUBACKs; false when
    /// one was refused, the task was cancelled, or acknowledgements stopped for `stallTimeout`.
    private func publishAndWait(_ messages: [SinkMessage], client: any MQTTClient) async -> Bool {
        for start in stride(from: 0, to: messages.count, by: 256) {
            let chunk = messages[start..<min(start + 256, messages.count)]
            let group = lock.withLock {
                extraGroups += 1
                pendingExtra[extraGroups] = 0
                return extraGroups
            }
            defer {
                lock.withLock {
                    pendingExtra[group] = nil
                    ids.dropExtra(group: group)
                }
            }
            let handed = publishing.withLock { () -> Bool in
                for message in chunk {
                    do {
                        let mid = try client.publish(
                            topic: message.topic, payload: message.payload, retain: message.retain)
                        lock.withLock {
                            if !ids.publishedExtra(mid, group: group) { pendingExtra[group, default: 0] += 1 }
                        }
                    } catch {
                        logger.error("sink \(id): \(error)")
                        return false
                    }
                }
                return true
            }
            guard handed else { return false }
            var seen = -1
            var lastProgress = Date()
            while true {
                if Task.isCancelled { return false }
                let left = lock.withLock { pendingExtra[group] ?? 0 }
                if left <= 0 { break }
                if left != seen {
                    seen = left
                    lastProgress = Date()
                } else if Date().timeIntervalSince(lastProgress) > stallTimeout {
                    return false
                }
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        return true
    }

    /// Hands messages of the plan to the client while fewer than `window` are unacknowledged. Called by
    /// `deliver`, then on the loop thread for every PUBACK.
    private func pump(_ client: any MQTTClient) {
        publishing.lock()
        defer { publishing.unlock() }
        while true {
            let taken: (message: SinkMessage, event: Int)? = lock.withLock {
                guard next < plan.count, inFlight < window ?? client.preferredWindow, refusedAt == nil else {
                    return nil
                }
                defer {
                    next += 1
                    inFlight += 1
                }
                return plan[next]
            }
            guard let (message, index) = taken else { return }
            let mid: Int32
            do {
                mid = try client.publish(topic: message.topic, payload: message.payload, retain: message.retain)
            } catch {
                // Not taken by the client (a malformed topic, memory): what came before still counts (a
                // coalesced state counts for an earlier event: that one is not acknowledged either).
                lock.withLock {
                    problem = error.description
                    refusedAt = index
                    inFlight -= 1
                }
                logger.error("sink \(id): \(error)")
                wakeWaiter()
                return
            }
            lock.withLock {
                if ids.published(mid, event: index) { acknowledge(index) }
            }
        }
    }

    package func close() async {
        if let task = lock.withLock({ housekeeping }) {
            task.cancel()
            await task.value
            trackerWorker.finish()
        }
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

    private func publishStatus(_ word: String, client: any MQTTClient) {
        guard let statusTopic else { return }
        lock.withLock { statusAcknowledged = false }
        if let mid = try? client.publish(topic: statusTopic, payload: Array(word.utf8), retain: true) {
            lock.withLock { if ids.publishedStatus(mid) { statusAcknowledged = true } }
        }
    }

    /// Under `lock`.
    private func acknowledge(_ index: Int) {
        remaining[index] -= 1
        outstanding -= 1
        inFlight -= 1
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

    /// On the client's thread.
    private func handle(_ event: MQTTEvent) {
        switch event {
        case .published(let mid):
            let more: (any MQTTClient)? = lock.withLock {
                switch ids.acknowledged(mid) {
                case .event(let index): acknowledge(index)
                case .status: statusAcknowledged = true
                case .extra(let group): if let n = pendingExtra[group] { pendingExtra[group] = n - 1 }
                case nil: break
                }
                guard let client, next < plan.count, inFlight < window ?? client.preferredWindow else { return nil }
                return client
            }
            // The next messages of the batch, from here: the loop thread keeps the window full.
            if let more { pump(more) }
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
                lock.withLock { resync = true }
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
        case .message, .tooLong:
            break
        }
    }
}

/// Which message a PUBACK acknowledges: the sink's bookkeeping of the client's message ids (16 bits,
/// counting up and wrapping, one sequence for every message of the connection's client).
///
/// A PUBACK can come back before `publish` has returned its id to the thread that published (the loop
/// thread reads it meanwhile): it is kept as early, and matched when the id is recorded. An event's message
/// is looked up before the status message, and the status's id is forgotten once matched: an id left over
/// from a status message whose PUBACK went by unmatched (early, between batches) must not take the PUBACK
/// of an event's message that has the same id 65,535 messages later, or that event is never acknowledged
/// and its batch stalls until offered again.
package struct MessageIDs {
    package enum Acknowledged: Equatable {
        case event(Int)
        case status
        /// A message of a group handed over outside the batch (a Home Assistant tracker's).
        case extra(Int)
    }

    private var events: [Int32: Int] = [:]
    private var extra: [Int32: Int] = [:]
    private var early: Set<Int32> = []
    private var status: Int32?

    package init() {}

    package mutating func startBatch() {
        events.removeAll(keepingCapacity: true)
        early.removeAll()
    }

    /// The batch is over: PUBACKs still to come for it acknowledge nothing.
    mutating func endBatch() { events.removeAll(keepingCapacity: true) }

    /// `publish` returned `mid` for a message of event `event`; true: its PUBACK has already come.
    package mutating func published(_ mid: Int32, event: Int) -> Bool {
        if early.remove(mid) != nil { return true }
        events[mid] = event
        return false
    }

    /// `publish` returned `mid` for the status message; true: its PUBACK has already come.
    package mutating func publishedStatus(_ mid: Int32) -> Bool {
        if early.remove(mid) != nil { return true }
        status = mid
        return false
    }

    /// `publish` returned `mid` for a message of group `group`; true: its PUBACK has already come.
    package mutating func publishedExtra(_ mid: Int32, group: Int) -> Bool {
        if early.remove(mid) != nil { return true }
        extra[mid] = group
        return false
    }

    /// The group is over (acknowledged, or given up): its PUBACKs still to come acknowledge nothing.
    package mutating func dropExtra(group: Int) { extra = extra.filter { $0.value != group } }

    package mutating func acknowledged(_ mid: Int32) -> Acknowledged? {
        if let event = events.removeValue(forKey: mid) { return .event(event) }
        if mid == status {
            status = nil
            return .status
        }
        if let group = extra.removeValue(forKey: mid) { return .extra(group) }
        early.insert(mid)
        return nil
    }
}

/// A lock for async code: `lock()` waits (without blocking a thread) until the holder calls `unlock()`.
final class AsyncLock: Sendable {
    private let state = Mutex<(held: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    func lock() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if !s.held {
                    s.held = true
                    return true
                }
                s.waiting.append(c)
                return false
            }
            if now { c.resume() }
        }
    }

    func unlock() {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if s.waiting.isEmpty {
                s.held = false
                return nil
            }
            return s.waiting.removeFirst()
        }
        next?.resume()
    }
}
