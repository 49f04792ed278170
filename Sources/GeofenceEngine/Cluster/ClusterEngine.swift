import Foundation
import GeofenceCore
import GeofenceSystem
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One engine of a cluster (`geofence run --source nats://…`): judges the fixes of the partitions it owns and
/// publishes their events to JetStream, checkpointing each partition's state so that another engine can take
/// it over (Docs/cluster.md).
///
/// Everything it decides runs on its one thread (`run()`), which owns the fix filter, the region monitor and
/// every JetStream call of the partitions (they block); the leases and the region bucket are followed by
/// threads of their own, which tell it what changed through its inbox.
///
/// For each fix, in the partition's stream order: the filter and the monitor judge it on its own time (as
/// `geofence replay` does: a partition replayed after a take-over reaches the same state and events), every
/// event it makes is stored in the event stream (de-duplicated by its identity, fenced by the last sequence),
/// and only then is the fix counted as covered. A checkpoint (every vehicle of the partition, and the last
/// covered sequence) is written now and then; a new owner restores it and replays from the next sequence.
package final class ClusterEngine: @unchecked Sendable {
    // @unchecked: every mutable field is touched only by the thread in `run()`; `inbox` and `validity` are
    // thread-safe.

    package struct Configuration: Sendable {
        package var layout: ClusterLayout
        package var engineID: String
        /// Seconds between a partition's checkpoints (when it has taken fixes since).
        package var checkpointInterval: Double = 5
        package var filter = FixFilterConfiguration()
        package var monitor = MonitorConfiguration()

        package init(layout: ClusterLayout, engineID: String) {
            self.layout = layout
            self.engineID = engineID
        }

        /// The decision settings as one short text (FNV-1a of the filter's and the monitor's settings): engines
        /// whose fingerprints differ judge a partition differently, so a take-over would change its events.
        /// `status --nats` compares them.
        package var settingsFingerprint: String {
            StableHash.hex("\(filter)|\(monitor)|\(layout.partitions)")
        }
    }

    package let configuration: Configuration
    package let inbox: ClusterInbox
    private let connection: NATSConnection
    private let logger: Logger
    private let monotonic: @Sendable () -> Double
    /// Seconds left of this engine's lease of a partition (the leases' own judge; 0 or less: not the owner):
    /// asked before every fix is judged and every event published, and every blocking call for the partition
    /// waits at most this long, so that nothing is decided or sent past the lease's deadline.
    private let remaining: @Sendable (Int) -> Double

    private var filter: FixFilter
    private var monitor: RegionMonitor
    private var owned: [Int: Owned] = [:]
    /// Partitions acquired whose checkpoint needs region changes not taken yet, with their terms.
    private var waiting: [Int: UInt64] = [:]
    /// When the partitions in `waiting` are tried again (monotonic): not at every turn of the loop.
    private var retryAt = 0.0
    /// The partition each vehicle held belongs to.
    private var partitionOf: [String: Int] = [:]
    /// Counts for `status`.
    package private(set) var statistics = Statistics()

    /// Regions' `expired` events this engine's monitor made and not yet found stored, stored off the engine's
    /// thread (a region's expiry is no partition's: nothing bounds its calls by a lease, so the thread that
    /// must give partitions up at their deadlines never waits on them), tried again every second.
    private let expiries = Shared(Expiries())
    private var expiryRetryAt = 0.0

    /// A value the engine's thread and the status queue share.
    final class Shared<Value: Sendable>: Sendable {
        private let value: Mutex<Value>
        init(_ value: Value) { self.value = Mutex(value) }
        func withLock<R>(_ body: (inout Value) -> R) -> R { value.withLock { body(&$0) } }
    }

    struct Expiries: Sendable {
        var pending: [RegionEvent] = []
        var inFlight = false
        var stored = 0
        var found = 0
    }

    /// Regions' expiries this engine stored, and those it made and found stored by another.
    package var expiryCounts: (stored: Int, found: Int) { expiries.withLock { ($0.stored, $0.found) } }

    private func publishExpiries() {
        expiryRetryAt = monotonic() + 1
        let start = expiries.withLock { state in
            guard !state.inFlight, !state.pending.isEmpty else { return false }
            state.inFlight = true
            return true
        }
        guard start else { return }
        let log = RegionExpiryLog(connection: connection, layout: configuration.layout, owner: configuration.engineID)
        let (expiries, logger) = (self.expiries, self.logger)
        statusQueue.async {
            let batch = expiries.withLock { $0.pending }
            var done = 0
            var stored = 0
            for event in batch {
                do {
                    if try log.publish(event, timeout: .seconds(2)) { stored += 1 }
                    done += 1
                } catch {
                    logger.warning("region \(event.region): its expiry is not stored yet (\(error)); trying again")
                    break
                }
            }
            expiries.withLock { state in
                state.pending.removeFirst(done)
                state.stored += stored
                state.found += done - stored
                state.inFlight = false
            }
        }
    }

    /// The terms given up lately, newest last, with what their owner tried to publish: `status` shows them, so
    /// that publish attempts are counted per partition and owner, not only what the stream kept.
    private var released: [Released] = []
    static let releasedKept = 64

    struct Released {
        let partition: Int
        let term: UInt64
        let attempted: Int
        let stored: Int
        let lastAttempt: Date
        let givenUp: Date
    }

    package struct Statistics: Sendable, Equatable {
        package var fixes = 0
        package var malformed = 0
        package var events = 0
        package var duplicates = 0
        package var fenced = 0
        package var checkpoints = 0
        package var takeOvers = 0
        /// Vehicles restored from checkpoints at take-overs.
        package var restoredVehicles = 0
        package var givenUp = 0
    }

    private final class Owned {
        let term: UInt64
        let log: PartitionEventLog
        var consumer: NATSOrderedSubscription?
        /// The last fix-stream sequence whose fix and events are taken.
        var covered: UInt64
        /// Fixes of the partition still in the stream after the last one delivered (the consumer's count).
        var lag: UInt64 = 0
        let takenAt: Double
        var takeOverSeconds = 0.0
        /// When the last fix was delivered (monotonic; nil: none yet).
        var lastDelivery: Double?
        var checkpointed: UInt64
        var lastCheckpoint: Double
        var vehicles: Set<String>

        init(term: UInt64, log: PartitionEventLog, covered: UInt64, vehicles: Set<String>, now: Double) {
            self.term = term
            self.log = log
            self.covered = covered
            checkpointed = covered
            lastCheckpoint = now
            takenAt = now
            self.vehicles = vehicles
        }
    }

    package init(
        configuration: Configuration, connection: NATSConnection, logger: Logger,
        remaining: @escaping @Sendable (Int) -> Double,
        monotonic: @escaping @Sendable () -> Double = { MonotonicClock.seconds() },
        inbox: ClusterInbox = ClusterInbox()
    ) {
        self.configuration = configuration
        self.connection = connection
        self.logger = logger
        self.remaining = remaining
        self.monotonic = monotonic
        self.inbox = inbox
        filter = FixFilter(configuration: configuration.filter)
        monitor = RegionMonitor(configuration: configuration.monitor)
        // The partitions' fixes come in separate streams: a region's expiry, reported at the first fix past it, must
        // not take the region from another partition's fixes from before it.
        monitor.removesExpiredRegions = false
    }

    private func validity(_ partition: Int) -> Bool { remaining(partition) > 0 }

    /// How long a call for `partition` may block: the lease's time left, at most `cap`.
    private func budget(_ partition: Int, cap: Double = 5) -> Duration {
        .milliseconds(Int(max(0.001, min(cap, remaining(partition))) * 1000))
    }

    /// The partitions owned now (for tests and status; read on the engine's thread, or after `run` returned).
    package var ownedPartitions: [Int] { owned.keys.sorted() }

    /// Runs until the inbox is stopped: takes what the inbox holds, judges, publishes, checkpoints. At the end
    /// every partition's consumer is stopped and a last checkpoint written for each (a clean stop).
    package func run() {
        while let (control, fixes) = inbox.take(limit: 512, timeout: 0.25) {
            heartbeat?()
            for input in control { handle(input) }
            for input in fixes { handle(input) }
            if !waiting.isEmpty, monotonic() >= retryAt {
                let retry = waiting
                waiting.removeAll()
                for (partition, term) in retry { take(partition, term: term) }
            }
            checkpointDue(force: false)
            if monotonic() >= expiryRetryAt { publishExpiries() }
            publishStatusIfDue()
        }
        checkpointDue(force: true)
        for partition in Array(owned.keys) { giveUp(partition, reason: "the engine stops", checkpoint: false) }
    }

    private func handle(_ input: ClusterInput) {
        switch input {
        case .acquired(let partition, let term): take(partition, term: term)
        case .lost(let partition):
            waiting[partition] = nil
            giveUp(partition, reason: "its lease is lost", checkpoint: false)
        case .regionPut(let region, let seq):
            _ = monitor.remove(id: region.id)
            monitor.insert(region, seq: seq)
        case .regionRemoved(let id): _ = monitor.remove(id: id)
        case .regionsTaken(let revision): monitor.noteRegionSeq(revision)
        case .fix(let delivery, let partition, let term): judge(delivery, partition: partition, term: term)
        }
    }

    // MARK: Ownership

    /// Takes a partition over: its checkpoint restored, its event subject fenced by a take-over marker, and its
    /// fixes consumed from the sequence after the checkpoint's.
    private func take(_ partition: Int, term: UInt64) {
        if let current = owned[partition] {
            if current.term == term { return }
            giveUp(partition, reason: "a new term began", checkpoint: false)
        }
        guard validity(partition) else { return }
        let layout = configuration.layout
        let started = monotonic()
        do {
            var covered: UInt64 = 0
            var vehicles = Set<String>()
            do {
                if let stored = try CheckpointLog(connection: connection, layout: layout).read(
                    partition: partition, timeout: budget(partition))
                {
                    vehicles = try restore(stored.bytes)
                    covered = stored.covered
                }
            } catch let corrupt as CheckpointLog.Corrupt {
                logger.error("partition \(partition): \(corrupt); replaying its fixes from the first kept")
            } catch let bad as PartitionCheckpointError {
                if case .regionsBehind = bad {
                    // The regions bucket has changes this engine has not taken yet: taken again shortly.
                    logger.info("partition \(partition): waiting for region changes before taking it (\(bad))")
                    retry(partition, term: term, after: 0.1)
                    return
                }
                logger.error("partition \(partition): \(bad); replaying its fixes from the first kept")
            }
            for vehicle in vehicles { partitionOf[vehicle] = partition }
            statistics.restoredVehicles += vehicles.count
            // The lease may have run out while the checkpoint was read: then nothing is written for the partition.
            guard validity(partition) else {
                logger.warning("partition \(partition): its lease ran out while it was being taken over")
                return
            }
            let log = try PartitionEventLog(
                connection: connection, layout: layout, partition: partition, owner: configuration.engineID,
                term: term, timeout: budget(partition))
            let entry = Owned(term: term, log: log, covered: covered, vehicles: vehicles, now: monotonic())
            owned[partition] = entry
            let inbox = self.inbox
            entry.consumer = try NATSOrderedSubscription(
                connection: connection, stream: layout.fixStream,
                filterSubject: layout.fixSubject(partition: partition),
                startSequence: covered + 1
            ) { delivery in
                inbox.post(fix: .fix(delivery, partition: partition, term: term))
            }
            statistics.takeOvers += 1
            entry.takeOverSeconds = monotonic() - started
            logger.notice(
                "partition \(partition): taken (term \(term)), \(vehicles.count) vehicles from the checkpoint at "
                    + "fix \(covered), in \(Int((monotonic() - started) * 1000)) ms")
        } catch {
            // NATS is electing a leader, say: the lease is still this engine's, so the partition is taken again
            // shortly (the lease's loss, if it comes, cancels that).
            logger.error("partition \(partition): cannot take it over: \(error); trying again in a second")
            giveUp(partition, reason: "taking it over failed", checkpoint: false)
            retry(partition, term: term, after: 1)
        }
    }

    /// Takes `partition` again after `seconds`, unless its lease is lost meanwhile.
    private func retry(_ partition: Int, term: UInt64, after seconds: Double) {
        waiting[partition] = term
        let at = monotonic() + seconds
        retryAt = waiting.count == 1 ? at : min(retryAt, at)
    }

    /// Stops judging a partition and forgets its vehicles (the next owner restores them from the checkpoint).
    private func giveUp(_ partition: Int, reason: String, checkpoint: Bool) {
        guard let entry = owned.removeValue(forKey: partition) else { return }
        // Stopping an ordered consumer asks the server to delete it, which blocks (for the request timeout when
        // NATS is unreachable): done elsewhere, so that giving a partition up never waits. A delivery of it that
        // still arrives is dropped (the partition is not owned under its term any more).
        if let consumer = entry.consumer {
            entry.consumer = nil
            statusQueue.async { consumer.stop() }
        }
        if checkpoint { write(entry, partition: partition) }
        monitor.forget(subjects: entry.vehicles)
        filter.forget(Array(entry.vehicles))
        for vehicle in entry.vehicles { partitionOf[vehicle] = nil }
        statistics.givenUp += 1
        let counts = entry.log.counts
        released.append(
            Released(
                partition: partition, term: entry.term, attempted: counts.attempted, stored: counts.stored,
                lastAttempt: entry.log.lastAttempt, givenUp: Date()))
        if released.count > Self.releasedKept { released.removeFirst(released.count - Self.releasedKept) }
        logger.notice(
            "partition \(partition): given up (\(reason)), at fix \(entry.covered); term \(entry.term): \(counts.attempted) publishes attempted, the last at \(TimestampParser.format(entry.log.lastAttempt))"
        )
    }

    // MARK: Fixes

    private func judge(_ delivery: NATSDelivery, partition: Int, term: UInt64) {
        // A delivery of a consumer stopped since (a partition given up, or taken again under a new term).
        guard let entry = owned[partition], entry.term == term, delivery.streamSequence > entry.covered else {
            return
        }
        guard validity(partition) else {
            giveUp(partition, reason: "its lease ran out", checkpoint: false)
            return
        }
        statistics.fixes += 1
        entry.lag = delivery.pending
        entry.lastDelivery = monotonic()
        guard let (_, vehicle) = configuration.layout.partitionAndVehicle(of: delivery.subject) else {
            statistics.malformed += 1
            entry.covered = delivery.streamSequence
            return
        }
        // The subject names the vehicle (what the server's mapping partitioned by), whatever the payload says.
        guard case .tpv(var fix) = FleetPayload.decode(topic: vehicle, payload: delivery.payload) else {
            statistics.malformed += 1
            entry.covered = delivery.streamSequence
            return
        }
        fix.subject = vehicle
        if partitionOf[vehicle] == nil {
            partitionOf[vehicle] = partition
            entry.vehicles.insert(vehicle)
        }
        if case .accepted(let weighted) = filter.evaluate(fix) {
            // Judged on its own time, ids and all: the same fixes give the same events on any engine.
            let out = monitor.process(weighted, now: weighted.time)
            for var event in out.events {
                event.id = EventIdentity.id(of: event)
                guard event.subject != nil else {
                    // A region's own event (`expired`): no partition's; stored once by whichever engine comes first.
                    if event.type == .expired { expiries.withLock { $0.pending.append(event) } }
                    continue
                }
                guard publish(event, entry, partition: partition) else { return }
            }
            if out.events.contains(where: { $0.type == .expired }) { publishExpiries() }
        }
        entry.covered = delivery.streamSequence
    }

    /// Stores an event, trying again while the outcome is unknown and the lease holds. False when the
    /// partition was given up (fenced, or the lease ran out before the event was stored).
    private func publish(_ event: RegionEvent, _ entry: Owned, partition: Int) -> Bool {
        while true {
            guard validity(partition) else {
                giveUp(partition, reason: "its lease ran out while an event was being stored", checkpoint: false)
                return false
            }
            do {
                if try entry.log.publish(event, timeout: budget(partition)) {
                    statistics.events += 1
                } else {
                    statistics.duplicates += 1
                }
                return true
            } catch let error as NATSError where error.kind == .wrongLastSequence {
                statistics.fenced += 1
                logger.warning("partition \(partition): fenced: another engine wrote its events (\(error))")
                giveUp(partition, reason: "fenced", checkpoint: false)
                // The lease says whether this engine is the owner: if it still holds it, the other writer is the
                // stale one, and taking the partition again (a new marker) fences that one out.
                retry(partition, term: entry.term, after: 1)
                return false
            } catch {
                logger.warning("partition \(partition): event \(event.id) not stored yet (\(error)); trying again")
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
    }

    // MARK: Status

    /// Called from the engine's loop at least every quarter second while it runs (systemd's watchdog: a loop
    /// that is stuck stops it). Set before `run()`.
    package var heartbeat: (@Sendable () -> Void)?

    /// Where the engine's status goes every `statusInterval` seconds (nil: nowhere): the cluster's status
    /// bucket, which `geofence status --nats` reads.
    package var statusBucket: NATSKeyValue?
    package var statusInterval = 2.0
    private var lastStatus = -Double.infinity
    /// Where the status is written and consumers are stopped: never the engine's thread, which must not wait
    /// on either.
    private let statusQueue = DispatchQueue(label: "geofence.cluster-status")
    private let startedAt = Date()

    /// The engine's status now, as `geofence status --nats` shows it (Docs/cluster.md, "Status").
    package func status(now: Double) -> JSONObject {
        var partitions: [JSONValue] = []
        for (partition, entry) in owned.sorted(by: { $0.key < $1.key }) {
            partitions.append(
                .object([
                    "partition": .number(Double(partition)), "term": .string(String(entry.term)),
                    "covered": .string(String(entry.covered)), "lag": .number(Double(entry.lag)),
                    "checkpoint": .string(String(entry.checkpointed)),
                    "checkpoint_age": .number(((now - entry.lastCheckpoint) * 10).rounded() / 10),
                    "vehicles": .number(Double(entry.vehicles.count)),
                    "last_fix_age": entry.lastDelivery.map { .number(((now - $0) * 10).rounded() / 10) } ?? .null,
                    "take_over_ms": .number((entry.takeOverSeconds * 1000).rounded()),
                    "attempted": .number(Double(entry.log.counts.attempted)),
                    "last_attempt": .string(TimestampParser.format(entry.log.lastAttempt)),
                    "events": .number(Double(entry.log.counts.stored)),
                    "duplicates": .number(Double(entry.log.counts.duplicates)),
                    "fenced": .number(Double(entry.log.counts.fenced)),
                ]))
        }
        let s = statistics
        return [
            "engine": .string(configuration.engineID), "pid": .number(Double(getpid())),
            "partitions_total": .number(Double(configuration.layout.partitions)),
            "settings": .string(configuration.settingsFingerprint),
            "started": .string(TimestampParser.format(startedAt)), "updated": .string(TimestampParser.format(Date())),
            "partitions": .array(partitions), "fixes": .number(Double(s.fixes)),
            "malformed": .number(Double(s.malformed)), "events": .number(Double(s.events)),
            "duplicates": .number(Double(s.duplicates)), "fenced": .number(Double(s.fenced)),
            "checkpoints": .number(Double(s.checkpoints)), "take_overs": .number(Double(s.takeOvers)),
            "given_up": .number(Double(s.givenUp)), "regions": .number(Double(monitor.regionCount)),
            "waiting_fixes": .number(Double(inbox.waitingFixes)),
            "released": .array(
                released.map { term in
                    .object([
                        "partition": .number(Double(term.partition)), "term": .string(String(term.term)),
                        "attempted": .number(Double(term.attempted)), "stored": .number(Double(term.stored)),
                        "last_attempt": .string(TimestampParser.format(term.lastAttempt)),
                        "given_up": .string(TimestampParser.format(term.givenUp)),
                    ])
                }),
        ]
    }

    private func publishStatusIfDue() {
        guard let statusBucket else { return }
        let now = monotonic()
        guard now - lastStatus >= statusInterval else { return }
        lastStatus = now
        // Written off the engine's thread: a put waits for its answer (the request timeout when NATS is out of
        // reach), and the engine's thread must give its partitions up at their deadlines meanwhile. One put at a
        // time: a status not written in time is replaced by the next.
        let claimed = statusInFlight.withLock { busy -> Bool in
            if busy { return false }
            busy = true
            return true
        }
        guard claimed else { return }
        let value = Array(JSONValue.object(status(now: now)).serialized().utf8)
        let (engineID, logger, inFlight) = (configuration.engineID, self.logger, statusInFlight)
        statusQueue.async {
            do {
                _ = try statusBucket.put(engineID, value)
            } catch {
                logger.debug("status not published: \(error)")
            }
            inFlight.withLock { $0 = false }
        }
    }

    private let statusInFlight = Shared(false)

    // MARK: Checkpoints

    private func checkpointDue(force: Bool) {
        let now = monotonic()
        for (partition, entry) in owned
        where entry.covered > entry.checkpointed
            && (force || now - entry.lastCheckpoint >= configuration.checkpointInterval)
        {
            guard validity(partition) else { continue }
            write(entry, partition: partition)
        }
    }

    private func write(_ entry: Owned, partition: Int) {
        let started = monotonic()
        let bytes = snapshot(entry.vehicles, covered: entry.covered)
        do {
            try CheckpointLog(connection: connection, layout: configuration.layout).write(
                partition: partition, bytes: bytes, covered: entry.covered, term: entry.term,
                owner: configuration.engineID, timeout: budget(partition))
            entry.checkpointed = entry.covered
            entry.lastCheckpoint = monotonic()
            statistics.checkpoints += 1
            logger.debug(
                "partition \(partition): checkpoint at fix \(entry.covered), \(entry.vehicles.count) vehicles, "
                    + "\(bytes.count) bytes, \(Int((monotonic() - started) * 1000)) ms")
        } catch {
            // Tried again at the next interval; until then a take-over replays a little more.
            entry.lastCheckpoint = monotonic()
            logger.warning("partition \(partition): checkpoint not written: \(error)")
        }
    }

    /// The encoded state of `vehicles`, covering fix `covered`.
    private func snapshot(_ vehicles: Set<String>, covered: UInt64) -> [UInt8] {
        PartitionCheckpoint(fixSequence: covered, monitor: monitor, filter: filter, subjects: vehicles).encode()
    }

    /// Restores a checkpoint's vehicles into the monitor and the filter; returns their names.
    private func restore(_ bytes: [UInt8]) throws -> Set<String> {
        let checkpoint = try PartitionCheckpoint(decoding: bytes)
        try checkpoint.restore(into: &monitor, filter: &filter)
        return Set(checkpoint.vehicles.keys)
    }
}
