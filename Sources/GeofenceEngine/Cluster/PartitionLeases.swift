import Foundation
import GeofenceSystem
import Synchronization

/// One engine's handling of the leases of P partitions (issue 26, Docs/cluster.md "Ownership"): it claims its
/// share of them in the replicated bucket `geofence-leases` (key `p-N`, a `LeaseRecord`), renews its own every
/// `ttl / 3`, takes over those whose owner stopped renewing, and gives back extras when engines join (they
/// announce themselves by heartbeats in `geofence-engines`), so that the live engines hold `P / engines` each,
/// rounded up for the first ones in id order.
///
/// Single ownership rests on two things: every write of a lease is compare-and-set on the revision read *and*
/// carries `Nats-Msg-Id = lease-p-N-after-REV`, so of writers racing from one revision exactly one is stored
/// (the race test in `PartitionLeasesTests`); and an owner counts its lease valid only until the send time of
/// its last stored write plus `ttl - margin`, while others claim it only after `ttl` without seeing a new
/// revision, on their own clocks. `lost` is delivered `lostLead` before that validity deadline (or at once
/// when a renewal is refused or the lease given back); the owner must stop judging and publishing for the
/// partition then, and asks `isValid(_:at:)` before each publish.
///
/// Threads: a worker (the NATS writes: claims, renewals, releases, heartbeats, each **blocking**), one per
/// watch (leases, engines), and a deadline watchdog that delivers `lost` on time even while the worker is
/// blocked in a write. `onEvent` is called on one of them at a time, in order; it must return quickly (hand
/// the event to the owner's own thread) and must not call `stop()`. The threads hold the manager until
/// `stop()`: call it.
package final class PartitionLeases: @unchecked Sendable {
    // @unchecked: every mutable field is used under `condition`; `onEvent` is called under `delivery`.
    package let engineID: String
    package let settings: LeaseSettings
    private let connection: NATSConnection
    private let clock: @Sendable () -> Double
    private let onEvent: @Sendable (LeaseEvent) -> Void

    private enum Phase { case idle, running, halted, stopping, stopped }
    /// Guards the state below; the worker waits on it for news (a watch saw something, an outcome came in, a
    /// stop), and `stop()` for the threads' ends.
    private let condition = NSCondition()
    private var phase = Phase.idle
    private var book: LeaseBook
    private var threadsRunning = 0
    /// The worker has ended (after `halt()`): no write is in flight any more.
    private var workerStopped = false
    /// Held while events are handed to `onEvent`, so that they go one at a time and in order.
    private let delivery = Mutex<Void>(())
    private var leases: NATSKeyValue?
    private var engines: NATSKeyValue?

    /// A manager for `engineID` (a key-value key: letters, digits, `-`, `_`, `=`, `.` inside), writing through
    /// `connection`, whose request timeout should be below `settings.renewalInterval` (a renewal that hangs
    /// longer is tried again only after its answer). `clock` is monotonic seconds (one clock for every
    /// judgement of this manager); `onEvent` hears every acquisition and loss.
    package init(
        engineID: String, settings: LeaseSettings, connection: NATSConnection,
        clock: @escaping @Sendable () -> Double = { MonotonicClock.seconds() },
        onEvent: @escaping @Sendable (LeaseEvent) -> Void
    ) throws {
        try Self.validate(engineID: engineID)
        self.engineID = engineID
        self.settings = settings
        self.connection = connection
        self.clock = clock
        self.onEvent = onEvent
        book = LeaseBook(settings: settings, engineID: engineID, now: clock())
    }

    /// Throws unless `engineID` can be a key of the engines' bucket and part of a lease record.
    package static func validate(engineID: String) throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.")
        guard !engineID.isEmpty, engineID.count <= 128, engineID.allSatisfy({ allowed.contains($0) }),
            !engineID.hasPrefix("."), !engineID.hasSuffix(".")
        else {
            throw NATSError(
                kind: .invalidArgument, operation: "partition leases",
                text: "engine id \"\(engineID)\": use 1 to 128 letters, digits, '-', '_', '=' or inner '.'")
        }
    }

    /// Creates the buckets if they are missing (replicated as `settings.replicas`; no TTL for the leases, whose
    /// expiry the engines judge themselves; the heartbeats' bucket forgets an engine ten TTLs after its last
    /// one) and starts the threads. **Blocks** for a few JetStream requests.
    package func start() throws {
        let leases = try connection.ensureKeyValue(bucket: settings.leaseBucket, replicas: settings.replicas)
        let engines = try connection.ensureKeyValue(
            bucket: settings.engineBucket, replicas: settings.replicas,
            ttl: .milliseconds(Int64(max(60, settings.ttl * 10) * 1000)))
        condition.lock()
        defer { condition.unlock() }
        guard phase == .idle else { return }
        self.leases = leases
        self.engines = engines
        book = LeaseBook(settings: settings, engineID: engineID, now: clock())
        phase = .running
        spawn("geofence.lease") { $0.work() }
        spawn("geofence.leasew") { $0.watchLeases(leases) }
        spawn("geofence.enginew") { $0.watchEngines(engines) }
        spawn("geofence.leased") { $0.enforceDeadlines() }
    }

    /// Gives every lease back (`lost` for each first, then a delete, so another engine can claim it at once),
    /// removes this engine's heartbeat and ends the threads. **Blocks** until they have ended.
    package func stop() {
        condition.lock()
        switch phase {
        case .running: phase = .stopping
        case .halted:
            book.giveUpAll(now: clock())
            phase = .stopped
        case .idle: phase = .stopped
        case .stopping, .stopped: break
        }
        condition.broadcast()
        condition.unlock()
        deliver()
        condition.lock()
        while threadsRunning > 0 { condition.wait() }
        condition.unlock()
    }

    /// Stops all NATS work and writes nothing more (no renewal, no release, no heartbeat), as when the
    /// engine's NATS side hangs or its process dies: the leases are left to expire, and the watchdog still
    /// delivers `lost` for each before its validity deadline. Returns once the worker has ended (a write in
    /// flight ends first), so `held()` then shows the last writes. For tests of a crash; `stop()` afterwards.
    package func halt() {
        condition.lock()
        if phase == .running { phase = .halted }
        condition.broadcast()
        while phase == .halted && !workerStopped { condition.wait() }
        condition.unlock()
    }

    /// Whether this engine may still act as `partition`'s owner at `time` (on the manager's clock): it holds
    /// the lease and `time` is before the validity deadline.
    package func isValid(_ partition: Int, at time: Double) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return book.isValid(partition, at: time)
    }

    /// Seconds left at `time` (the manager's clock) before this engine must stop acting as `partition`'s owner:
    /// every blocking call the owner makes for the partition waits at most this long (0 or less: not the owner).
    package func remaining(_ partition: Int, at time: Double) -> Double {
        condition.lock()
        defer { condition.unlock() }
        return book.remaining(partition, at: time)
    }

    /// A lease this engine holds.
    package struct Lease: Equatable, Sendable {
        package let partition: Int
        package let term: UInt64
        /// The lease key's revision of the last write known stored.
        package let revision: UInt64
        /// The send time of that write, and the validity deadline it gives (manager's clock).
        package let renewedAt: Double
        package let validUntil: Double
    }

    /// The leases held now, by partition.
    package func held() -> [Lease] {
        condition.lock()
        defer { condition.unlock() }
        return book.held.sorted { $0.key < $1.key }.map { partition, lease in
            Lease(
                partition: partition, term: lease.term, revision: lease.revision, renewedAt: lease.renewedAt,
                validUntil: lease.validUntil)
        }
    }

    /// The engines this one counts alive now (itself included), in id order.
    package func liveEngines() -> [String] {
        condition.lock()
        defer { condition.unlock() }
        return book.liveEngines(now: clock())
    }

    package func statistics() -> LeaseStatistics {
        condition.lock()
        defer { condition.unlock() }
        return book.statistics
    }

    // MARK: Threads

    private func spawn(_ name: String, _ body: @escaping @Sendable (PartitionLeases) -> Void) {
        threadsRunning += 1
        let thread = Thread { [self] in
            nameThisThread(name)
            body(self)
            condition.lock()
            threadsRunning -= 1
            condition.broadcast()
            condition.unlock()
        }
        thread.start()
    }

    /// How long a thread waits at most before it looks again.
    private var pollInterval: Double { min(0.1, settings.ttl / 30) }

    /// Waits (with `condition` locked) until signalled or `seconds` (at most `pollInterval`) have passed.
    /// `NSCondition` counts the wait on the wall clock: a step back could stretch it, so it is always short
    /// (the worker is woken by every watch update anyway), and the watchdog does not use it.
    private func waitLocked(_ seconds: Double) {
        _ = condition.wait(until: Date(timeIntervalSinceNow: max(0.001, min(seconds, pollInterval))))
    }

    private func work() {
        condition.lock()
        while phase == .running {
            let actions = book.plan(now: clock())
            condition.unlock()
            for action in actions {
                // A halt stops between two writes (one in flight ends first).
                guard running else { break }
                perform(action)
            }
            deliver()
            condition.lock()
            if phase == .running, actions.isEmpty { waitLocked(pollInterval) }
        }
        guard phase == .stopping else {
            workerStopped = true
            condition.broadcast()
            condition.unlock()
            return
        }
        book.giveUpAll(now: clock())
        let releases = book.releasesDue(now: clock())
        condition.unlock()
        deliver()
        for release in releases { perform(release) }
        _ = try? engines?.delete(engineID)
        condition.lock()
        phase = .stopped
        condition.broadcast()
        condition.unlock()
    }

    private func perform(_ action: LeaseBook.Action) {
        guard let leases, let engines else { return }
        switch action {
        case .heartbeat(let beat):
            do {
                let revision = try engines.put(
                    engineID, Array("{\"engine\":\"\(engineID)\",\"beat\":\(beat)}".utf8))
                update { $0.heartbeatStored(revision: revision, now: clock()) }
            } catch {
                update { $0.failed(now: clock(), error: "\(error)") }
            }
        case .claim(let partition, let from, let record):
            let key = LeaseSettings.key(partition)
            let sentAt = clock()
            do {
                let revision =
                    from == 0
                    ? try leases.create(key, record.bytes) { LeaseSettings.messageID(partition, after: $0) }
                    : try leases.update(
                        key, record.bytes, revision: from, messageID: LeaseSettings.messageID(partition, after: from))
                update { $0.claimed(partition, record: record, revision: revision, sentAt: sentAt, now: clock()) }
            } catch let error as NATSError where Self.refused(error) {
                update { $0.claimRefused(partition, from: from, now: clock()) }
            } catch {
                print(
                    connection.connectedURL ?? "-")
                update { $0.claimUncertain(partition, record: record, now: clock(), error: "\(error)") }
            }
        case .renew(let partition, let from, let record):
            let key = LeaseSettings.key(partition)
            let sentAt = clock()
            update { $0.renewalSending(partition, record: record, sentAt: sentAt) }
            do {
                let revision = try leases.update(
                    key, record.bytes, revision: from, messageID: LeaseSettings.messageID(partition, after: from))
                update { $0.renewed(partition, record: record, revision: revision, sentAt: sentAt, now: clock()) }
            } catch let error as NATSError where Self.refused(error) {
                do {
                    let current = try leases.latest(key).flatMap {
                        $0.operation == .put ? ($0.revision, LeaseRecord(bytes: $0.value)) : nil
                    }
                    update { $0.renewalRefused(partition, record: record, current: current) }
                } catch {
                    update { $0.renewalUncertain(partition, now: clock(), error: "\(error)") }
                }
            } catch {
                update { $0.renewalUncertain(partition, now: clock(), error: "\(error)") }
            }
        case .release(let partition, let from):
            do {
                try leases.delete(
                    LeaseSettings.key(partition), revision: from,
                    messageID: LeaseSettings.messageID(partition, after: from))
                update { $0.releaseDone(partition, now: clock(), error: nil) }
            } catch let error as NATSError where Self.refused(error) {
                update { $0.releaseDone(partition, now: clock(), error: nil) }
            } catch {
                update { $0.releaseDone(partition, now: clock(), error: "\(error)") }
            }
        }
    }

    /// Another writer won: the revision moved on, or a write with the same message id was stored first.
    private static func refused(_ error: NATSError) -> Bool {
        [.wrongRevision, .duplicate, .keyExists, .wrongLastSequence].contains(error.kind)
    }

    private func update(_ change: (inout LeaseBook) -> Void) {
        condition.lock()
        change(&book)
        condition.broadcast()
        condition.unlock()
    }

    private var running: Bool {
        condition.lock()
        defer { condition.unlock() }
        return phase == .running
    }

    private var watching: Bool {
        condition.lock()
        defer { condition.unlock() }
        return phase == .running
    }

    /// Follows `bucket` until the manager stops: each update to `apply` (locked). A watch that fails, or lags
    /// behind this engine's own writes, is made again (its first values are the keys' latest, which the book
    /// takes only when newer).
    private func follow(
        _ bucket: NATSKeyValue, leases: Bool, _ apply: (inout LeaseBook, NATSKeyValue.Watcher.Update, Double) -> Void
    ) {
        var watcher: NATSKeyValue.Watcher?
        while watching {
            do {
                let current = try watcher ?? bucket.watch()
                watcher = current
                let update = try current.next(timeout: .milliseconds(Int64(pollInterval * 1000)))
                var lags = false
                self.update { book in
                    if let update { apply(&book, update, clock()) }
                    lags = book.watchLags(leases: leases, now: clock())
                }
                if lags { watcher = nil }
                deliver()
            } catch {
                watcher = nil
                Thread.sleep(forTimeInterval: pollInterval)
            }
        }
    }

    private func watchLeases(_ bucket: NATSKeyValue) {
        follow(bucket, leases: true) { book, update, now in
            switch update {
            case .caughtUp: book.markLeasesCaughtUp(now: now)
            case .entry(let entry):
                let record = entry.operation == .put ? LeaseRecord(bytes: entry.value) : nil
                book.observeLease(key: entry.key, revision: entry.revision, record: record, now: now)
            }
        }
    }

    private func watchEngines(_ bucket: NATSKeyValue) {
        follow(bucket, leases: false) { book, update, now in
            switch update {
            case .caughtUp: book.markEnginesCaughtUp()
            case .entry(let entry):
                book.observeEngine(entry.key, revision: entry.revision, alive: entry.operation == .put, now: now)
            }
        }
    }

    /// Delivers `lost` before each validity deadline, whatever the worker is blocked in; runs while the
    /// manager runs, and after `halt()` until every lease has run out.
    private func enforceDeadlines() {
        condition.lock()
        while phase == .running || phase == .stopping || (phase == .halted && !book.held.isEmpty) {
            let next = book.expire(now: clock())
            if !book.events.isEmpty {
                condition.unlock()
                deliver()
                condition.lock()
                continue
            }
            // A relative sleep (nanosleep, on the monotonic clock): no wall-clock step delays a `lost`.
            condition.unlock()
            Thread.sleep(forTimeInterval: max(0.001, min(next - clock(), pollInterval)))
            condition.lock()
        }
        condition.unlock()
    }

    /// Hands the queued events to `onEvent`, in order, one thread at a time.
    private func deliver() {
        delivery.withLock { _ in
            while true {
                condition.lock()
                let event = book.events.isEmpty ? nil : book.events.removeFirst()
                condition.unlock()
                guard let event else { return }
                onEvent(event)
            }
        }
    }
}
