import Foundation
import GeofenceCore

/// A change of the cluster's regions, as an engine applies it.
package enum ClusterRegionChange: Sendable, Equatable {
    /// The region is this one now (added, or replaced: same id, new seq). `seq` is the revision of its
    /// entry in the bucket: global, and the same on every engine.
    case put(Region, seq: Int64)
    /// The region with this id is gone (removed; or its entry was overwritten with something that is not a
    /// region, which is logged). An id the engine does not hold is to be ignored.
    case remove(String)
}

/// An engine's copy of the cluster's regions: every region of the bucket `geofence-regions` at start, then
/// every change as it is written, read from the bucket's stream in order by an ordered consumer (with
/// history 1, each key's latest write, then everything new) on a thread of its own, and handed to `apply`
/// in batches.
///
/// The first batch (`initial`) holds every region of the bucket as `.put`s in revision order; each later
/// batch the changes since, in the order they were written. The first batch is the bucket as the server
/// the consumer runs on holds it: a write acknowledged by the others but not yet applied there comes as a
/// change right after. An entry that is not a region (someone wrote
/// something else to the bucket) is skipped with one log line, and a region it overwrote is removed; nothing
/// in the bucket can make this trap.
package final class ClusterRegions: @unchecked Sendable {
    // @unchecked: the mutable fields are touched with `condition` held; the rest is constant.

    /// What `apply` is given.
    package struct Batch: Sendable {
        /// Every region of the bucket when the engine started (then the only batch with `initial`).
        package let initial: Bool
        package let changes: [ClusterRegionChange]
        /// The highest revision of the bucket the batch covers, deletions and skipped entries included: a monitor
        /// that took the batch has taken every region change up to it (`RegionMonitor.noteRegionSeq`), so that a
        /// checkpoint taken by an engine that saw a region removed restores on one that started after.
        package let revision: Int64
    }

    private let connection: NATSConnection
    private let log: @Sendable (String) -> Void
    private let apply: @Sendable (Batch) -> Void
    private let condition = NSCondition()
    private var consumer: NATSOrderedConsumer?
    private var loaded = false
    private var stopping = false
    private var running = false

    /// `apply` is called on this object's thread, one batch at a time; `log` with each skipped entry.
    package init(
        connection: NATSConnection, log: @escaping @Sendable (String) -> Void,
        apply: @escaping @Sendable (Batch) -> Void
    ) {
        self.connection = connection
        self.log = log
        self.apply = apply
    }

    deinit { stop() }

    /// Creates the bucket if it is missing, subscribes, and starts the thread that loads and follows it.
    /// **Blocks** for a few JetStream requests; throws what they threw.
    package func start() throws {
        _ = try ClusterRegionStore.ensureBucket(connection)
        let empty = (try connection.streamInfo(name: ClusterRegionCodec.stream)?.messages ?? 0) == 0
        let consumer = try NATSOrderedConsumer(
            connection: connection, stream: ClusterRegionCodec.stream, subject: ClusterRegionCodec.subjects,
            lastPerSubject: ClusterRegionCodec.readLastPerSubject, headers: ["KV-Operation"])
        condition.withLock {
            self.consumer = consumer
            running = true
        }
        let thread = Thread { [self] in run(consumer, empty: empty) }
        thread.name = "geofence.cluster-regions"
        thread.start()
    }

    /// Waits until the first batch has been applied; false when `timeout` passed first.
    package func waitUntilLoaded(timeout: Duration) -> Bool {
        let deadline = Date().addingTimeInterval(Double(natsMilliseconds(timeout)) / 1000)
        return condition.withLock {
            while !loaded && running {
                if !condition.wait(until: deadline) { break }
            }
            return loaded
        }
    }

    /// Stops following; returns once the thread has ended (no `apply` after this). Harmless twice.
    package func stop() {
        let consumer: NATSOrderedConsumer? = condition.withLock {
            stopping = true
            return self.consumer
        }
        consumer?.stop()
        condition.withLock {
            while running { condition.wait() }
            self.consumer = nil
        }
    }

    private func run(_ consumer: NATSOrderedConsumer, empty: Bool) {
        var initial: [String: (region: Region, seq: Int64)] = [:]
        var isLoaded = false
        var revision: Int64 = 0
        func finishLoading() {
            isLoaded = true
            let changes = initial.values.sorted { $0.seq < $1.seq }.map {
                ClusterRegionChange.put($0.region, seq: $0.seq)
            }
            initial = [:]
            apply(Batch(initial: true, changes: changes, revision: revision))
            condition.withLock {
                loaded = true
                condition.broadcast()
            }
        }
        if empty { finishLoading() }
        var quiet = 0
        while !condition.withLock({ stopping }) {
            let messages = consumer.take(timeout: .milliseconds(250))
            if messages.isEmpty {
                // A bucket emptied between the stream's count and the subscription gives no message at all.
                quiet += 1
                if !isLoaded, quiet % 8 == 0, (try? consumer.serverPending()) == 0 { finishLoading() }
                continue
            }
            quiet = 0
            var changes: [ClusterRegionChange] = []
            for message in messages {
                revision = max(revision, Int64(clamping: message.sequence))
                if let change = change(message) {
                    if isLoaded {
                        changes.append(change)
                    } else if case .put(let region, let seq) = change,
                        let key = ClusterRegionCodec.key(ofSubject: message.subject)
                    {
                        initial[key] = (region, seq)
                    } else if let key = ClusterRegionCodec.key(ofSubject: message.subject) {
                        initial[key] = nil
                    }
                }
                if !isLoaded && message.pending == 0 { finishLoading() }
            }
            if !changes.isEmpty || isLoaded { apply(Batch(initial: false, changes: changes, revision: revision)) }
        }
        condition.withLock {
            running = false
            condition.broadcast()
        }
    }

    /// What one message of the bucket's stream means; nil (logged) for one that names no region.
    private func change(_ message: NATSOrderedConsumer.Message) -> ClusterRegionChange? {
        guard let key = ClusterRegionCodec.key(ofSubject: message.subject) else { return nil }
        let operation = message.headers["KV-Operation"]
        let id = ClusterRegionCodec.id(forKey: key)
        if operation == "DEL" || operation == "PURGE" {
            if key == ClusterRegionCodec.barrierKey { return nil }
            guard let id else {
                log(
                    "cluster regions: skipped a delete of the key \(key) (revision \(message.sequence)): not a region id"
                )
                return nil
            }
            return .remove(id)
        }
        guard let seq = Int64(exactly: message.sequence) else {
            log("cluster regions: skipped the key \(key): revision \(message.sequence) is out of range")
            return nil
        }
        let written = ClusterRegionCodec.date(nanoseconds: message.timestampNanoseconds)
        switch ClusterRegionCodec.region(key: key, value: message.payload, written: written) {
        case .success(let region):
            return .put(region, seq: seq)
        case .failure(let malformed):
            log("cluster regions: skipped the entry \(key) at revision \(message.sequence): \(malformed.reason)")
            return id.map { .remove($0) }
        }
    }
}
