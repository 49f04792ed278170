import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Fixes in, committed events out: filter → monitor → store, exactly the same for `replay` and the daemon.
///
/// Events are returned only after the transaction that stored them (with the state change that caused
/// them) has committed, so whatever a caller prints or runs is already durable. Fixes that change only
/// bookkeeping (a subject's last fix time) are batched into fewer transactions.
package final class FixPipeline {
    // `@exclusivity(unchecked)` on the stored properties the fix path reads and changes for every fix: the
    // pipeline is not `Sendable` (one thread owns it: the daemon's monitor thread, `replay`'s), and each of its
    // accesses to these properties is within one of its own methods, never overlapping another access to the
    // same property (no closure it calls captures them), so the run-time check of each access (a call into the
    // runtime, twice a property a fix) proves nothing the compiler's static check has not.
    package let store: StateStore
    @exclusivity(unchecked) package private(set) var filter: FixFilter
    @exclusivity(unchecked) package private(set) var monitor: RegionMonitor
    /// Region change generation the monitor has caught up with.
    package private(set) var generation: Int64 = 0
    /// The highest region seq the monitor has taken (loaded or followed): the engine's mark in the store,
    /// written with the next commit.
    package private(set) var takenSeq: Int64 = 0
    /// The store keeps no region change before this generation (see `pruneFollowedChanges`).
    private var prunedBefore: Int64 = 0
    /// Followed region changes forgotten per sync, at most.
    package var pruneBatch = 50_000
    private var recordedTakenSeq: Int64 = 0
    /// The decisions waiting for a commit (events, region states, regions' status), in order, without the
    /// vehicles' rows (`Vehicle.row`).
    @exclusivity(unchecked) private var pending: [MonitorOutput] = []
    /// The time a batch was taken (`processForEvents(batch:)`): the monitor's `now` for each of its fixes.
    @exclusivity(unchecked) private var batchNow: Date?
    @exclusivity(unchecked) private var urgent = false
    private var lastCommit: Date
    private let clock: @Sendable () -> Date
    private let monotonic: @Sendable () -> Double
    @exclusivity(unchecked) private var assembler: EpochAssembler
    /// Commit bookkeeping at least this often (seconds of wall clock): what a kill can lose of it (a vehicle's
    /// last fix, never an event or a region's state, which commit at once).
    package var batchInterval: Double = 1
    /// The engine's one event id generator: the monitor's events take their ids from it, and so do the
    /// events the engine makes around the pipeline (`MonitorService`, the control handler).
    package let ids: EventIDs
    /// ... and every this many fixes queued. Large: a vehicle's row is written once a commit of bookkeeping
    /// however many of its fixes it covers (`Vehicle.row`), so that a fast stream (a replay, a backlog) writes a row
    /// a vehicle a second instead of one a fix; what waits grows with the vehicles, not the fixes (but for a
    /// receipt time a fix, 8 bytes, when `measuresLatency`). At 65,536 a stream of 450,000 fixes a second wrote
    /// every vehicle's row seven times a second, a fifth of a fleet replay's time: the count now bounds only the
    /// receipts (8 MiB), and up to a million fixes a second `batchInterval` decides.
    package var batchSize = 1 << 20
    /// Fixes whose outputs were queued since the last commit of bookkeeping.
    @exclusivity(unchecked) private var pendingFixes = 0

    /// What the pipeline keeps of each vehicle it has seen, found once a fix (`vehicleBySubject`, the one look-up
    /// of the vehicle's name a fix): where its state is in the epoch assembler, the filter and the monitor (hints,
    /// each checked where it is used, so a stale one costs a look-up by name, never another vehicle's state), its
    /// row waiting for a commit, and its fixes not yet committed.
    private struct Vehicle {
        var subject: String
        var assembler = -1
        var filter = -1
        var track = -1
        /// The vehicle's row (its last fix, for a restart) as its last queued fix left it: one a vehicle.
        var row: MonitorOutput.SubjectUpdate?
        /// Its decisions wait in `pending` (listed in `deciding`): a commit of decisions writes its row with them.
        var deciding = false
        /// Accepted fixes whose effects are not yet committed: how many, and the fix time of the first.
        var uncommitted = 0
        var firstUncommitted = Date.distantPast
        /// Listed in `touched`.
        var touched = false

        init(subject: String) { self.subject = subject }
    }
    @exclusivity(unchecked) private var vehicles: [Vehicle] = []
    /// Each vehicle's entry in `vehicles`, by its name (there).
    @exclusivity(unchecked) private var vehicleBySubject = NameIndex()
    /// The vehicles with a row waiting or fixes not committed, each once (what a commit looks at).
    @exclusivity(unchecked) private var touched: [Int] = []
    /// The vehicles whose decisions wait in `pending`, each once.
    @exclusivity(unchecked) private var deciding: [Int] = []
    /// Vehicles with a row waiting.
    @exclusivity(unchecked) private var rowCount = 0
    /// Accepted fixes whose effects are not yet committed (`uncommitted`), counted as they come.
    @exclusivity(unchecked) package private(set) var uncommittedCount = 0

    package init(
        store: StateStore, filter: FixFilterConfiguration = .init(), monitor: MonitorConfiguration = .init(),
        settle: Double = 0.3, clock: @escaping @Sendable () -> Date = { Date() },
        monotonic: @escaping @Sendable () -> Double = FixPipeline.uptime, ids: EventIDs = EventIDs()
    ) {
        self.store = store
        self.filter = FixFilter(configuration: filter)
        self.ids = ids
        self.monitor = RegionMonitor(configuration: monitor, ids: ids)
        self.assembler = EpochAssembler(settle: settle)
        self.clock = clock
        self.monotonic = monotonic
        self.lastCommit = clock()
    }

    /// Seconds on the monotonic clock.
    package static let uptime: @Sendable () -> Double = { MonotonicClock.seconds() }

    /// Loads every region that is not expired, and every subject's state, from the store, and records
    /// that the engine has taken them (`RegionRepository.markTaken`: one row, however many regions were waiting).
    ///
    /// Built for a million regions in a couple of seconds, on two cores: the regions are read lean
    /// (`RegionRepository.monitoringSnapshot`), in chunks, on another thread, while this one builds the monitor
    /// from the chunks already read. Regions added after the snapshot come through `syncRegions()`, as any
    /// later change does.
    package func load() throws {
        let mark = try store.regions.monitoringMark()
        generation = mark.generation
        let reader = SnapshotReader(store: store, upTo: mark.lastSeq)
        monitor.reserveCapacity(monitor.regionCount + mark.count)
        while let chunk = try reader.next() {
            for (seq, definition) in chunk { insert(definition, seq: seq) }
        }
        monitor.compactIndex()
        let cutoff = idleLimit.map { clock().addingTimeInterval(-$0) }
        for subject in try store.monitorState.subjects(heardSince: cutoff) { restore(subject) }
        takenSeq = max(takenSeq, mark.lastSeq)
        try flush()
    }

    private func insert(_ definition: MonitoringDefinition, seq: Int64) {
        switch definition {
        case .compact(let region): monitor.insert(region, seq: seq)
        case .full(let region): monitor.insert(region, seq: seq)
        }
    }

    /// Takes regions out of monitoring (their states stay in the store).
    package func deactivate(seqs: Set<Int64>) {
        for id in monitor.regionIDs(seqs: seqs) { monitor.remove(id: id) }
    }

    /// Brings regions (back) into monitoring, with their subjects' states from the store.
    package func activate(_ regions: [StoredRegion]) throws {
        for stored in regions where stored.status.kind != .expired {
            monitor.insert(stored.region, seq: stored.seq)
            monitor.restorePairs(regionSeq: stored.seq, pairs: try store.monitorState.pairs(regionSeq: stored.seq))
        }
    }

    /// The next change of every subject is reported `inferred` (monitoring was off meanwhile).
    package func beginGap() {
        monitor.beginGap()
    }

    /// Follows regions added or removed (by the CLI) since the last call. Returns how many changed.
    @discardableResult
    package func syncRegions() throws -> Int {
        let (latest, changes) = try store.regions.changes(after: generation)
        guard latest != generation else {
            pruneFollowedChanges()
            return 0
        }
        var removed = Set<Int64>()
        var inserted: [Int64] = []
        var ranges: [ClosedRange<Int64>] = []
        for change in changes {
            if !change.inserted {
                removed.insert(change.seq)
            } else if change.lastSeq > change.seq {
                ranges.append(change.seq...change.lastSeq)
            } else {
                inserted.append(change.seq)
            }
        }
        var touched = 0
        if !removed.isEmpty {
            for id in monitor.regionIDs(seqs: removed) {
                monitor.remove(id: id)
                touched += 1
            }
        }
        for stored in try store.regions.find(seqs: inserted.filter { !removed.contains($0) })
        where stored.status.kind != .expired {
            monitor.insert(stored.region, seq: stored.seq)
            touched += 1
        }
        // An import: read lean, as at start (its regions still there are exactly the range's).
        var imported = 0
        for range in ranges {
            let reader = SnapshotReader(store: store, after: range.lowerBound - 1, upTo: range.upperBound)
            while let chunk = try reader.next() {
                for (seq, definition) in chunk where !removed.contains(seq) {
                    insert(definition, seq: seq)
                    imported += 1
                }
            }
        }
        if imported >= 4096 { monitor.compactIndex() }
        touched += imported
        // Taken: no longer waiting for the engine (recorded with the next commit). Their stored statuses are
        // the reconciler's to set; writing `monitoring` here would undo a `pending: limit` it decided.
        let newest = max(inserted.max() ?? 0, ranges.map(\.upperBound).max() ?? 0)
        takenSeq = max(takenSeq, newest)
        generation = latest
        pruneFollowedChanges()
        return touched
    }

    /// Forgets the region changes this engine has followed (keeping the latest), a batch at a time: the
    /// store would otherwise keep a row for every region ever added or removed, for as long as it runs.
    /// A new engine loads the regions themselves and follows only later changes, and only one engine runs
    /// on a store (`DaemonLock`), so no one needs them. Housekeeping: a failed write is tried again at the
    /// next sync.
    private func pruneFollowedChanges() {
        guard prunedBefore < generation else { return }
        guard let gone = try? store.regions.pruneChanges(before: generation, limit: pruneBatch) else { return }
        if gone < pruneBatch { prunedBefore = generation }
    }

    /// What one step decided: the verdict on every report it settled (in order), and the events it committed.
    package struct Step: Sendable {
        package var decisions: [(fix: Fix, verdict: FixVerdict)] = []
        package var events: [RegionEvent] = []
    }

    /// Runs one report through epoch assembly, the filter and the monitor. Returns the events committed by
    /// this call: those it caused, and any earlier ones whose commit had failed (a full disk) and succeeded
    /// now. If the commit fails, the error is thrown and nothing is lost: the changes stay queued.
    package func process(_ fix: Fix) throws -> Step {
        var step = Step()
        offer(fix) { step.decisions.append(($0, $1)) }
        step.events = try commitIfDue()
        return step
    }

    /// `process(_:)` for a caller that needs only the events (the daemon, `replay` without `--trace`): the
    /// same work and commits, without keeping each report and its verdict (a fix and a copy of it, some
    /// 270 bytes) in a step made for every fix.
    package func processForEvents(_ fix: Fix) throws -> [RegionEvent] {
        offer(fix)
        return try commitIfDue()
    }

    /// A source's batch (the fixes it read at once): each judged in order, then one commit for all that is
    /// due, their events included. What the fixes changed is durable before any of their events can be
    /// delivered, as with a commit a fix; a kill before the commit loses the batch's decisions as it would
    /// lose the fixes still unread, and a source that acknowledges after commit (MQTT) has them sent again.
    /// A fast stream then writes a transaction a batch, not one an event. If the commit fails, the error
    /// is thrown and nothing is lost: the changes stay queued.
    package func processForEvents(batch fixes: [Fix]) throws -> [RegionEvent] {
        // The batch's fixes were read at once: the monitor takes them all at that time (one read of the clock a
        // batch, not one a fix).
        batchNow = clock()
        defer { batchNow = nil }
        for fix in fixes { offer(fix) }
        return try commitIfDue()
    }

    /// Judges a fix and queues what it changes without trying to commit (the store refused the last commit:
    /// the caller retries now and then rather than rewriting a growing queue at every fix).
    package func judgeWithoutCommit(_ fix: Fix) {
        offer(fix)
    }

    /// Runs one report through epoch assembly, the filter and the monitor; `decided` hears every report it
    /// settled, with its verdict, in order.
    ///
    /// Each report offered is numbered (`offered`), for `committedThrough`: the assembler holds at most one
    /// report per vehicle, and hands back the one it held before the one offered.
    ///
    /// Without `decided` (the batch and the events-only paths) no verdict is made: an accepted fix stays where
    /// the filter made it (`judge(_:number:vehicle:accepted:)`).
    @inline(__always)
    private func offer(_ fix: Fix, _ decided: ((Fix, FixVerdict) -> Void)? = nil) {
        offered += 1
        let number = offered
        let vehicle = self.vehicle(fix.subject)
        func pass(_ report: Fix, _ number: Int64) {
            if let decided {
                decided(report, judge(report, number: number, vehicle: vehicle))
            } else {
                judge(report, number: number, vehicle: vehicle) { _ in }
            }
        }
        // The usual report (complete, none of its vehicle's held) goes straight on.
        if heldNumbers.isEmpty, assembler.passesOn(fix, hint: &vehicles[vehicle].assembler) {
            pass(fix, number)
            return
        }
        let outcomes = assembler.offer(fix, now: monotonic())
        let heldBefore = heldNumbers[fix.subject]
        var newHeld = true
        for (index, outcome) in outcomes.enumerated() {
            // Which report an outcome is: the one held before comes first; the one offered, when it goes on,
            // last. A single `ready` with the offered report's time is the offered one (a report of an epoch
            // already passed on, or one without a time, leaves the held one where it is).
            let isOffered: Bool
            if heldBefore == nil || index == 1 {
                isOffered = true
            } else if outcomes.count == 2 {
                isOffered = false
            } else if case .ready(let ready) = outcome, ready.time == fix.time {
                isOffered = true
            } else {
                isOffered = false
            }
            let reportNumber: Int64
            if isOffered {
                newHeld = false
                reportNumber = number
            } else {
                heldNumbers[fix.subject] = nil
                reportNumber = heldBefore ?? number
            }
            switch outcome {
            case .superseded(let old):
                filter.count(.duplicate)
                decided?(old, .rejected(.duplicate))
            case .ready(let ready):
                pass(ready, reportNumber)
            }
        }
        if newHeld { heldNumbers[fix.subject] = number }
    }

    /// Reports offered so far, counted from 1 in the order offered (`skip` counts too).
    @exclusivity(unchecked) package private(set) var offered: Int64 = 0
    /// The numbers of the reports the epoch assembler holds, by vehicle.
    @exclusivity(unchecked) private var heldNumbers: [String: Int64] = [:]
    /// The lowest number of an accepted report whose outputs wait in `pending` (nil: none wait).
    @exclusivity(unchecked) private var lowestPending: Int64?

    /// The vehicle's entry in `vehicles`, made if it has none: the one look-up of its name a fix.
    @inline(__always)
    private func vehicle(_ subject: String) -> Int {
        let hash = subject.hashValue
        if let known = vehicleBySubject.find(hash: hash, where: { vehicles[$0].subject == subject }) { return known }
        let index = vehicles.count
        vehicleBySubject.insert(hash: hash, position: index)
        vehicles.append(Vehicle(subject: subject))
        return index
    }

    /// Lists the vehicle in `touched` (once).
    @inline(__always)
    private func touch(_ vehicle: Int) {
        guard !vehicles[vehicle].touched else { return }
        vehicles[vehicle].touched = true
        touched.append(vehicle)
    }

    /// Counts reports that are not offered (Location Services off): they need no commit.
    package func skip(_ count: Int) {
        offered += Int64(count)
    }

    /// The highest report number up to which every report offered is committed or needs no commit: refused
    /// (a duplicate, a bad fix) or changing nothing to store. A report the epoch assembler holds, or whose
    /// outputs wait for a commit (a batch of bookkeeping, a commit that failed), holds the mark below it.
    /// What a source may now tell its own source is safe (an MQTT broker's acknowledgement).
    package var committedThrough: Int64 {
        var mark = offered
        if let lowestPending { mark = min(mark, lowestPending - 1) }
        for number in heldNumbers.values { mark = min(mark, number - 1) }
        return mark
    }

    /// Whether a commit now would move `committedThrough`: accepted reports wait in `pending`.
    package var holdsMark: Bool { lowestPending != nil }

    /// The reports held released, with their numbers, in the assembler's order.
    private func released(_ fixes: [Fix]) -> [(Fix, Int64)] {
        fixes.map { fix in
            let number = heldNumbers.removeValue(forKey: fix.subject) ?? offered
            return (fix, number)
        }
    }

    /// Passes on reports that waited long enough for the rest of their epoch (the daemon calls this often).
    package func settle() throws -> Step {
        var step = Step()
        for (fix, number) in released(assembler.due(now: monotonic())) {
            step.decisions.append((fix, judge(fix, number: number, vehicle: vehicle(fix.subject))))
        }
        step.events = try commitIfDue()
        return step
    }

    /// `settle()` without the commit, while the store refuses writes (the caller retries the commit itself).
    package func settleWithoutCommit() {
        for (fix, number) in released(assembler.due(now: monotonic())) {
            judge(fix, number: number, vehicle: vehicle(fix.subject)) { _ in }
        }
    }

    /// The end of a recording: passes on every report still held, and commits.
    package func finish() throws -> Step {
        var step = Step()
        for (fix, number) in released(assembler.flush()) {
            step.decisions.append((fix, judge(fix, number: number, vehicle: vehicle(fix.subject))))
        }
        step.events = try flush()
        return step
    }

    /// Vehicles whose last fix is older than this (seconds) are dropped from memory by `evictIdle` and
    /// not loaded at start; their state stays in the store and comes back with their next fix. Nil keeps
    /// every vehicle in memory.
    package var idleLimit: Double? = 86_400

    /// Drops from memory every vehicle not heard from for `idleLimit` (the daemon calls this now and
    /// then), after committing what is queued, so that what it forgets is in the store. Returns how many.
    @discardableResult
    package func evictIdle(now: Date) throws -> Int {
        guard let idleLimit else { return 0 }
        try flush()
        let gone = monitor.evict(lastFixBefore: now.addingTimeInterval(-idleLimit))
        filter.forget(gone)
        assembler.forget(gone)
        for subject in gone {
            heldNumbers[subject] = nil
            // After the flush above no vehicle is listed (`touched`, `deciding`): entries may move.
            let hash = subject.hashValue
            guard let index = vehicleBySubject.find(hash: hash, where: { vehicles[$0].subject == subject }) else {
                continue
            }
            vehicleBySubject.remove(hash: hash, position: index)
            let last = vehicles.count - 1
            if index != last {
                vehicles.swapAt(index, last)
                vehicleBySubject.move(hash: vehicles[index].subject.hashValue, from: last, to: index)
            }
            vehicles.removeLast()
        }
        // Storage sized for the vehicles left, when most have gone (the rule of the parts' own tables).
        if !gone.isEmpty && vehicles.capacity > 2 * vehicles.count + 1024 {
            vehicles = Array(vehicles)
            vehicleBySubject.compact()
        }
        return gone.count
    }

    /// Puts a subject's stored state into the monitor (at start, or when an evicted vehicle comes back).
    private func restore(_ subject: StoredSubject) {
        monitor.restore(subject.vehicleState(motion: monitor.configuration.motion))
    }

    /// `vehicle` is the fix's vehicle's entry (`vehicle(_:)`).
    private func judge(_ fix: Fix, number: Int64, vehicle: Int) -> FixVerdict {
        FixVerdict { judge(fix, number: number, vehicle: vehicle, accepted: $0) }
    }

    /// `judge(_:number:vehicle:)` without the verdict: an accepted fix goes to the monitor, and to `accepted`,
    /// where the filter made it; a refused one returns why.
    @discardableResult
    private func judge(
        _ fix: Fix, number: Int64, vehicle: Int, accepted: (borrowing WeightedFix) -> Void
    ) -> FixRejection? {
        // A vehicle the monitor does not hold may have been evicted: its state is in the store. (A store
        // that cannot be read now leaves it as new: `determined` rather than `enter`, and nothing lost.)
        if let track = monitor.locateTrack(of: fix.subject, hint: vehicles[vehicle].track) {
            vehicles[vehicle].track = track
        } else if idleLimit != nil, let stored = try? store.monitorState.subject(named: fix.subject) {
            restore(stored)
        }
        // The hint is read out and written back: the vehicles are used again while the filter is judging.
        var hint = vehicles[vehicle].filter
        defer { vehicles[vehicle].filter = hint }
        return filter.evaluate(fix, hint: &hint) { weighted in
            take(weighted, fix: fix, number: number, vehicle: vehicle)
            accepted(weighted)
        }
    }

    /// The monitor's part of `judge`, for a fix the filter accepted (it must not use the filter: the filter is
    /// judging).
    @inline(__always)
    private func take(_ weighted: borrowing WeightedFix, fix: Fix, number: Int64, vehicle: Int) {
        // One reading of the clock for both (a batch's, read once for all its fixes).
        let now = batchNow ?? clock()
        var out = MonitorOutput()
        monitor.process(weighted, now: now, track: vehicles[vehicle].track, into: &out)
        // Asked once: each `isEmpty` of an output is a call into the other module.
        let changed = !out.isEmpty
        // A fleet's fix carries no receipt time (its filter judges it by its own time alone): it is timed from
        // here, where the monitor takes it (at the time it was given; the clock was read a fix, 2 % of a fleet
        // replay's time).
        if measuresLatency, changed { pendingReceipts.append(fix.receivedAt ?? now) }
        if changed {
            queue(out, vehicle: vehicle)
            lowestPending = min(lowestPending ?? number, number)
        }
        // The fix is not committed yet (what a stop on a full disk accounts for, `uncommitted`).
        if vehicles[vehicle].uncommitted == 0 || weighted.time < vehicles[vehicle].firstUncommitted {
            vehicles[vehicle].firstUncommitted = weighted.time
        }
        vehicles[vehicle].uncommitted += 1
        uncommittedCount += 1
        touch(vehicle)
    }

    /// Queues a fix's outputs for the next commit: its decisions in order (`pending`), its vehicle's row
    /// in place of the one before (`Vehicle.row`). `vehicle` is the entry of the fix's vehicle, if any. The
    /// caller has found that the output is not empty.
    private func queue(_ out: MonitorOutput, vehicle: Int? = nil) {
        pendingFixes += 1
        pendingEvents += out.events.count
        if !out.statusChanges.isEmpty { urgent = true }
        if let row = out.subjectUpdate {
            let index = entry(row.subject, vehicle)
            if case .none = vehicles[index].row { rowCount += 1 }
            vehicles[index].row = row
            touch(index)
        }
        // Decisions (all but the row); most fixes make none.
        guard !(out.events.isEmpty && out.pairUpdates.isEmpty && out.statusChanges.isEmpty) else { return }
        var decisions = out
        decisions.subjectUpdate = nil
        for event in decisions.events { if let subject = event.subject { decide(entry(subject, vehicle)) } }
        for update in decisions.pairUpdates { decide(entry(update.subject, vehicle)) }
        pending.append(decisions)
    }

    /// The entry of `subject`: `vehicle` when it is that subject's, else found by name.
    @inline(__always)
    private func entry(_ subject: String, _ vehicle: Int?) -> Int {
        if let vehicle, vehicles[vehicle].subject == subject { return vehicle }
        return self.vehicle(subject)
    }

    /// Lists the vehicle in `deciding` (once).
    private func decide(_ vehicle: Int) {
        guard !vehicles[vehicle].deciding else { return }
        vehicles[vehicle].deciding = true
        deciding.append(vehicle)
    }

    /// Commits at once when events or status changes wait (with the rows of their vehicles: a vehicle's row
    /// and its regions' states stay of one time); bookkeeping goes in batches.
    private func commitIfDue() throws -> [RegionEvent] {
        if pendingFixes >= batchSize
            || (!(pending.isEmpty && rowCount == 0) && clock().timeIntervalSince(lastCommit) >= batchInterval)
        {
            return try flush()
        }
        if pendingEvents > 0 || urgent { return try commitDecisions() }
        return []
    }

    /// Commits the decisions waiting and their vehicles' rows; the rows of vehicles that only moved wait for
    /// the next commit of bookkeeping (within `batchInterval`).
    private func commitDecisions() throws -> [RegionEvent] {
        var outputs = pending
        for index in deciding {
            guard let row = vehicles[index].row else { continue }
            var output = MonitorOutput()
            output.subjectUpdate = row
            outputs.append(output)
        }
        // On failure nothing was written: the queue stays, and the next commit carries it.
        try store.monitorState.apply(outputs, taken: nil, now: clock())
        commits += 1
        for index in deciding {
            if vehicles[index].row != nil {
                vehicles[index].row = nil
                rowCount -= 1
            }
            // Its fixes are all in the store now: a stop on a full disk need not ask for them again.
            uncommittedCount -= vehicles[index].uncommitted
            vehicles[index].uncommitted = 0
            vehicles[index].deciding = false
        }
        let events = pending.flatMap(\.events)
        pending.removeAll(keepingCapacity: true)
        deciding.removeAll(keepingCapacity: true)
        pendingEvents = 0
        urgent = false
        observeReceipts(at: clock())
        if rowCount == 0 { allCommitted() }
        return events
    }

    /// Nothing waits any more: every fix judged is in the store.
    private func allCommitted() {
        pendingFixes = 0
        lowestPending = nil
        for index in touched {
            vehicles[index].uncommitted = 0
            vehicles[index].touched = false
        }
        touched.removeAll(keepingCapacity: true)
        uncommittedCount = 0
        lastCommit = clock()
    }

    /// The fixes waiting are committed (their decisions, or all they changed): their latency is observed.
    private func observeReceipts(at time: Date) {
        guard !pendingReceipts.isEmpty else { return }
        for received in pendingReceipts { commitLatency.observe(time.timeIntervalSince(received)) }
        pendingReceipts.removeAll(keepingCapacity: true)
    }

    /// Expires regions by the wall clock (the daemon calls this now and then). Returns committed events.
    package func expire(now: Date) throws -> [RegionEvent] {
        try flush(with: monitor.expire(upTo: now, now: now))
    }

    /// Commits whatever is queued. Returns the events that were committed.
    @discardableResult
    package func flush() throws -> [RegionEvent] {
        try flush(with: nil)
    }

    /// Transactions that committed the monitor's outputs, since the pipeline was made.
    package private(set) var commits = 0

    /// Number of events made but not yet committed (non-zero only after a failed commit).
    @exclusivity(unchecked) package private(set) var pendingEvents = 0

    /// Whether to time each live fix from its receipt to the commit of what it changed (`commitLatency`, for
    /// `/metrics`). An append per fix and a few comparisons per commit; off, nothing at all.
    package var measuresLatency = true
    /// From a fix's receipt (`Fix.receivedAt`; for a fix without one, its judgement) to the commit that made
    /// its decision durable.
    package private(set) var commitLatency = LatencyHistogram()
    /// The receipts of the fixes whose outputs wait in `pending`.
    @exclusivity(unchecked) private var pendingReceipts: [Date] = []
    /// The accepted fixes whose effects are not yet committed, by vehicle (`uncommittedCount` counts them
    /// without building this).
    package var uncommitted: UncommittedFixes {
        var fixes = UncommittedFixes()
        for index in touched where vehicles[index].uncommitted > 0 {
            let vehicle = vehicles[index]
            fixes.add(subject: vehicle.subject, count: vehicle.uncommitted, first: vehicle.firstUncommitted)
        }
        return fixes
    }

    private func flush(with extra: MonitorOutput?) throws -> [RegionEvent] {
        if let extra, !extra.isEmpty { queue(extra) }
        let taken = takenSeq > recordedTakenSeq ? takenSeq : nil
        guard !pending.isEmpty || rowCount > 0 || taken != nil else {
            // A commit of decisions may have written the last of it.
            allCommitted()
            return []
        }
        var outputs = pending
        outputs.reserveCapacity(pending.count + rowCount)
        for index in touched {
            guard let row = vehicles[index].row else { continue }
            var output = MonitorOutput()
            output.subjectUpdate = row
            outputs.append(output)
        }
        // On failure nothing was written: the queue stays, and the next commit carries it.
        try store.monitorState.apply(outputs, taken: taken, now: clock())
        commits += 1
        if let taken { recordedTakenSeq = taken }
        let events = pending.flatMap(\.events)
        pending.removeAll(keepingCapacity: true)
        for index in touched { vehicles[index].row = nil }
        rowCount = 0
        for index in deciding { vehicles[index].deciding = false }
        deciding.removeAll(keepingCapacity: true)
        pendingEvents = 0
        urgent = false
        allCommitted()
        observeReceipts(at: lastCommit)
        return events
    }
}

/// The accepted fixes whose effects (state, events) are not yet committed: what a stop on a full disk must
/// account for, vehicle by vehicle, so that the operator knows which fixes to send again.
package struct UncommittedFixes: Sendable {
    /// Per vehicle: how many, and the fix time of the first (the store holds everything before it).
    package private(set) var vehicles: [String: (count: Int, first: Date)] = [:]
    package private(set) var count = 0

    package var isEmpty: Bool { count == 0 }

    /// The vehicle's fixes are committed.
    mutating func remove(subject: String) {
        guard let known = vehicles.removeValue(forKey: subject) else { return }
        count -= known.count
    }

    /// `count` fixes of the vehicle, the first at `first`.
    mutating func add(subject: String, count more: Int, first: Date) {
        count += more
        if let known = vehicles[subject] {
            vehicles[subject] = (known.count + more, min(known.first, first))
        } else {
            vehicles[subject] = (more, first)
        }
    }

    mutating func add(subject: String, time: Date) {
        count += 1
        if let known = vehicles[subject] {
            vehicles[subject] = (known.count + 1, min(known.first, time))
        } else {
            vehicles[subject] = (1, time)
        }
    }
}

/// Reads the regions to monitor in chunks on a thread of its own, a few chunks ahead of `next()`.
private final class SnapshotReader: @unchecked Sendable {
    // @unchecked: every field below is touched only with `condition` locked.
    private let condition = NSCondition()
    private var chunks: [[(seq: Int64, definition: MonitoringDefinition)]] = []
    private var finished = false
    private var failure: (any Error)?

    /// The regions with sequence numbers after `first` and up to `lastSeq`.
    init(store: StateStore, after first: Int64 = 0, upTo lastSeq: Int64, chunkSize: Int = 32_768, ahead: Int = 4) {
        let thread = Thread { [self] in
            var after = first
            do {
                while true {
                    let chunk = try store.regions.monitoringSnapshot(after: after, upTo: lastSeq, limit: chunkSize)
                    condition.withLock {
                        while chunks.count >= ahead { condition.wait() }
                        chunks.append(chunk)
                        condition.broadcast()
                    }
                    guard chunk.count == chunkSize, let last = chunk.last?.seq else { break }
                    after = last
                }
            } catch {
                condition.withLock { failure = error }
            }
            condition.withLock {
                finished = true
                condition.broadcast()
            }
        }
        thread.name = "geofence.load-regions"
        thread.start()
    }

    /// The next chunk, nil after the last; rethrows the reader's error.
    func next() throws -> [(seq: Int64, definition: MonitoringDefinition)]? {
        try condition.withLock {
            while chunks.isEmpty && !finished { condition.wait() }
            if !chunks.isEmpty {
                condition.broadcast()
                return chunks.removeFirst()
            }
            if let failure { throw failure }
            return nil
        }
    }
}
