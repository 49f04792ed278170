import Foundation
import GeofenceCore
import GeofenceStore

/// Fixes in, committed events out: filter → monitor → store, exactly the same for `replay` and the daemon.
///
/// Events are returned only after the transaction that stored them (with the state change that caused
/// them) has committed, so whatever a caller prints or runs is already durable. Fixes that change only
/// bookkeeping (a subject's last fix time) are batched into fewer transactions.
public final class FixPipeline {
    public let store: StateStore
    public private(set) var filter: FixFilter
    public private(set) var monitor: RegionMonitor
    /// Region change generation the monitor has caught up with.
    public private(set) var generation: Int64 = 0
    private var pending: [MonitorOutput] = []
    private var lastCommit: Date
    private let clock: @Sendable () -> Date
    /// Commit bookkeeping at least this often (seconds of wall clock) and every this many fixes.
    public var batchInterval: Double = 1
    public var batchSize = 512

    public init(
        store: StateStore, filter: FixFilterConfiguration = .init(), monitor: MonitorConfiguration = .init(),
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store
        self.filter = FixFilter(configuration: filter)
        self.monitor = RegionMonitor(configuration: monitor)
        self.clock = clock
        self.lastCommit = clock()
    }

    /// Loads every region that is not expired, and every subject's state, from the store.
    public func load() throws {
        generation = try store.regionGeneration()
        var statusChanges = MonitorOutput()
        for stored in try store.regions() where stored.status.kind != .expired {
            monitor.insert(stored.region, seq: stored.seq)
            if stored.status.kind == .pending {
                statusChanges.statusChanges.append(
                    .init(regionSeq: stored.seq, regionID: stored.region.id, status: .monitoring))
            }
        }
        for subject in try store.subjects() {
            monitor.restore(subject: subject.subject, record: subject.record, pairs: subject.pairs)
        }
        if !statusChanges.isEmpty { pending.append(statusChanges) }
        try flush()
    }

    /// Follows regions added or removed (by the CLI) since the last call. Returns how many changed.
    @discardableResult
    public func syncRegions() throws -> Int {
        let (latest, changes) = try store.regionChanges(after: generation)
        guard latest != generation else { return 0 }
        var removed = Set<Int64>()
        var inserted: [Int64] = []
        for change in changes {
            if change.inserted {
                inserted.append(change.seq)
            } else {
                removed.insert(change.seq)
            }
        }
        var touched = 0
        if !removed.isEmpty {
            for id in monitor.regionIDs(seqs: removed) {
                monitor.remove(id: id)
                touched += 1
            }
        }
        var out = MonitorOutput()
        for stored in try store.regions(seqs: inserted.filter { !removed.contains($0) })
        where stored.status.kind != .expired {
            monitor.insert(stored.region, seq: stored.seq)
            out.statusChanges.append(.init(regionSeq: stored.seq, regionID: stored.region.id, status: .monitoring))
            touched += 1
        }
        if !out.isEmpty { pending.append(out) }
        generation = latest
        return touched
    }

    /// Runs one fix through the filter and the monitor. Returns the events committed by this call: those
    /// the fix caused, and any earlier ones whose commit had failed (a full disk) and succeeded now.
    /// If the commit fails, the error is thrown and nothing is lost: the changes stay queued for the next.
    public func process(_ fix: Fix) throws -> (verdict: FixVerdict, events: [RegionEvent]) {
        let verdict = filter.evaluate(fix)
        guard case .accepted(let weighted) = verdict else { return (verdict, []) }
        let out = monitor.process(weighted, now: clock())
        if !out.isEmpty { pending.append(out) }
        let urgent = !out.events.isEmpty || !out.statusChanges.isEmpty || pendingEvents > 0
        if !out.events.isEmpty { pendingEvents += out.events.count }
        if urgent || pending.count >= batchSize || clock().timeIntervalSince(lastCommit) >= batchInterval {
            return (verdict, try flush())
        }
        return (verdict, [])
    }

    /// Expires regions by the wall clock (the daemon calls this now and then). Returns committed events.
    public func expire(now: Date) throws -> [RegionEvent] {
        try flush(with: monitor.expire(upTo: now, now: now))
    }

    /// Commits whatever is queued. Returns the events that were committed.
    @discardableResult
    public func flush() throws -> [RegionEvent] {
        try flush(with: nil)
    }

    /// Number of events made but not yet committed (non-zero only after a failed commit).
    public private(set) var pendingEvents = 0

    private func flush(with extra: MonitorOutput?) throws -> [RegionEvent] {
        if let extra, !extra.isEmpty {
            pending.append(extra)
            pendingEvents += extra.events.count
        }
        guard !pending.isEmpty else { return [] }
        // On failure nothing was written: the queue stays, and the next commit carries it.
        try store.apply(pending, now: clock())
        let events = pending.flatMap(\.events)
        pending.removeAll(keepingCapacity: true)
        pendingEvents = 0
        lastCommit = clock()
        return events
    }
}
