import Foundation
import GeofenceCore
import GeofenceGPSD
import GeofenceStore

/// The daemon's core service: source reports in, decisions, durable events and state out.
///
/// An actor on its own thread (`ThreadExecutor`): its SQLite work blocks, and must not stall the
/// cooperative pool that the source consumer, the hook runner and the control server share. Its decisions
/// are made elsewhere and only carried out here: the regions' statuses by the `Reconciler` (Core), the
/// source's health by `SourceHealth`, the fixes by the `FixPipeline`; its writes that must not be lost go
/// through the `MonitorJournal`. It runs as two services of the engine's `ServiceGroup` (`FixIntakeService`,
/// `TickService`), in `geofence run` and in `GeofenceMonitor` alike.
package actor MonitorService {
    private let executor: ThreadExecutor
    package nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// What the engine is given from outside, not its state.
    struct Dependencies: Sendable {
        /// Who may do what: regions of an owner who is not authorized are not monitored.
        let policy: AccessPolicy
        /// A number in [0, 1] for the retry backoff's jitter (injected, as the clock).
        let random: @Sendable () -> Double
        /// Called when the switch changes (the hook runner holds location-bearing hooks while off).
        let onServices: @Sendable (Bool) -> Void
        /// Where the engine's counters and health are published for `/metrics`, `/healthz` and `status`.
        let metrics: EngineMetrics
    }

    private let given: Dependencies
    let pipeline: FixPipeline
    var journal: MonitorJournal
    /// The regions' statuses, the switch, the retries of failed regions.
    private var reconciler: Reconciler
    /// What the source said last about itself, for `status` and the `source` events.
    var health: SourceHealth
    /// Whether fixes are committed one by one, or queued while the store refuses; how far they are committed.
    var commits: CommitGate
    /// When `tick` next looks for vehicles to forget.
    private var nextEviction = Date.distantPast

    package init(
        store: StateStore, pipeline: sending FixPipeline, logger: Logger, executor: ThreadExecutor,
        sourceLabel: String, sourceStatus: @escaping @Sendable () -> SourceStatus? = { nil }, policy: AccessPolicy,
        maxRegions: Int?, onServices: @escaping @Sendable (Bool) -> Void,
        onEvents: @escaping @Sendable () -> Void, clock: any GeofenceClock = SystemClock(),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0...1) },
        metrics: EngineMetrics = EngineMetrics(), liveness: SourceLiveness.Configuration = .init(),
        space: StoreSpace? = nil, commitMark: (@Sendable (Int64) -> Void)? = nil
    ) {
        given = Dependencies(policy: policy, random: random, onServices: onServices, metrics: metrics)
        journal = MonitorJournal(
            store: store, logger: logger, now: { clock.now() }, space: space, ids: pipeline.ids, onEvents: onEvents)
        reconciler = Reconciler(maxRegions: maxRegions)
        health = SourceHealth(
            label: sourceLabel, sourceStatus: sourceStatus, liveness: liveness, startedAt: clock.now())
        commits = CommitGate(commitMark: commitMark)
        self.pipeline = pipeline
        self.executor = executor
    }

    var store: StateStore { journal.store }
    var logger: Logger { journal.logger }
    func now() -> Date { journal.now() }
    /// Where the engine's counters and health are published.
    var metrics: EngineMetrics { given.metrics }

    /// Whether Location Services are on: off, no fix is consumed.
    var servicesOn: Bool { reconciler.servicesOn }
    /// The capability snapshot the source sent last (nil: none, or a source that cannot tell).
    var capabilities: CapabilitySnapshot? { health.capabilities }
    /// What the source said last about itself, for `GeofenceMonitor.status()`.
    var condition: SourceCondition { health.condition }

    /// Loads regions and subject state; returns the number of regions monitored.
    package func load() throws -> Int {
        try pipeline.load()
        let on = try store.permissions.servicesOn()
        _ = reconciler.setServices(on)
        if !on { logger.notice("Location Services are off: no fix will be used until `geofence services on`") }
        given.onServices(on)
        reconcile()
        return pipeline.monitor.regionCount
    }

    /// A change made through the control socket: apply it now rather than at the next tick.
    package func apply(_ change: ControlHandler.Change) {
        switch change {
        case .regions: tick()
        case .services(let on): setServices(on)
        case .permissions: reconcile()
        case .sinks: break
        }
    }

    private func setServices(_ on: Bool) {
        guard reconciler.setServices(on) else { return }
        given.onServices(on)
        if on {
            // Whatever happened while off happened unseen: the next change of each subject is inferred.
            pipeline.beginGap()
            logger.notice("Location Services on: monitoring resumes")
        } else {
            logger.notice("Location Services off: fixes are ignored, regions suspended, location hooks held")
        }
        reconcile()
    }

    // MARK: The reconciler

    /// Drives every region's status (and the monitor's active set) from what holds now: the switch, the
    /// owners' permissions, the active-region limit, the location source. No region is ever deleted.
    func reconcile() {
        // State events still waiting for the store go first: they are the causes of what changes here.
        journal.saveStateEvents()
        do {
            var denied = Set<UInt32>()
            for owner in try store.regions.owners() where !given.policy.isPrivileged(owner) {
                let recorded = try store.permissions.find(uid: owner)?.status
                if given.policy.effectiveStatus(uid: owner, recorded: recorded, servicesOn: true) != .authorized {
                    denied.insert(owner)
                }
            }
            let stamp = now()
            let plan = reconciler.plan(deniedOwners: denied, now: stamp, unit: given.random())
            // The region-status events are made inside the reconciler's transaction, with the engine's one id
            // generator, so ids stay ordered.
            let ids = journal.ids
            let changes =
                plan.writesStatuses
                ? try store.monitorState.reconcile(plan.inputs, retryAt: plan.retryAt) {
                    MonitorService.statusEvents($0, ids: ids, now: stamp)
                } : []
            journal.countStatusEvents(changes.count)
            if reconciler.applied(plan, changes: changes) { try syncMembership() }
            reconciler.synced(plan)
            report(changes)
        } catch {
            // The statuses could not be written (a full disk): the next tick reconciles again.
            reconciler.failed()
            journal.failed(error)
        }
    }

    /// Makes the monitor hold exactly the regions that should be active.
    private func syncMembership() throws {
        let wanted = try store.regions.activeSeqs(upTo: pipeline.takenSeq)
        let (leaving, coming) = Reconciler.membership(wanted: wanted, current: pipeline.monitor.regionSeqs)
        if !leaving.isEmpty { pipeline.deactivate(seqs: leaving) }
        if !coming.isEmpty { try pipeline.activate(try store.regions.find(seqs: coming)) }
    }

    /// Region status changes become `region-status` events (one per region, or one summary for many).
    static func statusEvents(_ changes: [RegionStatusChange], ids: EventIDs, now: Date) -> [StateEvent] {
        guard !changes.isEmpty else { return [] }
        if changes.count <= 50 {
            return changes.map { change in
                StateEvent(
                    id: ids.next(now: now), type: .regionStatus, time: now, state: change.status.kind.rawValue,
                    region: change.id, reason: change.status.reason)
            }
        }
        return [
            StateEvent(
                id: ids.next(now: now), type: .regionStatus, time: now, state: "changed",
                reason: "\(changes.count) regions: \(summary(changes))",
                details: ["count": .number(Double(changes.count))])
        ]
    }

    private static func summary(_ changes: [RegionStatusChange]) -> String {
        var counts: [String: Int] = [:]
        for change in changes { counts[change.status.description, default: 0] += 1 }
        return counts.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
    }

    /// Logs what the reconciler changed (its events are already in the outbox) and wakes the hook runner.
    private func report(_ changes: [RegionStatusChange]) {
        guard !changes.isEmpty else { return }
        if changes.count <= 50 {
            for change in changes.prefix(10) {
                logger.info("region \(MonitorJournal.quoted(change.id)) is now \(change.status)")
            }
            if changes.count > 10 { logger.info("... and \(changes.count - 10) more regions changed status") }
        } else {
            logger.info("\(changes.count) regions changed status: \(Self.summary(changes))")
        }
        journal.woke()
    }

    // MARK: The source's health

    /// Does what a report of the source's health means, in order: the log, the state events (the cause),
    /// the reconciliation (its effects), then what `status` reads.
    func carryOut(_ effects: SourceHealth.Effects) {
        for (level, line) in effects.log { logger.log(level, line) }
        let time = now()
        if !effects.events.isEmpty {
            var events: [StateEvent] = []
            for draft in effects.events { events.append(journal.event(draft, at: time)) }
            journal.append(events)
        }
        if let available = effects.locationAvailable, reconciler.setLocationAvailable(available) { reconcile() }
        for record in effects.records { journal.record(record, at: time) }
    }

    /// Writes a fleet source's account of itself where `status` reads it (only when it changed).
    func recordSourceStatus() {
        guard let status = health.status else { return }
        journal.recording { try $0.sourceStatus(status) }
    }

    private func checkRefusals() {
        carryOut(health.checkRefusals(pipeline.filter.statistics, at: now()))
    }

    // MARK: Ticks

    /// Periodic work: follow the CLI's region changes, expire regions, commit bookkeeping.
    package func tick() {
        do {
            // The switch may also be flipped in the store directly (by a CLI that found no socket).
            let storedSwitch = try store.permissions.servicesOn()
            if storedSwitch != servicesOn { setServices(storedSwitch) }
            journal.saveStateEvents()
            let changed = try pipeline.syncRegions()
            if changed > 0 {
                logger.info("regions changed: \(changed); monitoring \(pipeline.monitor.regionCount)")
                reconcile()
            } else if reconciler.owed {
                reconcile()
            }
            // Failed regions whose retry is due: count the attempt; the cause, if it cleared, was acted on
            // when it did.
            if reconciler.retryIsDue(at: now()) {
                let retries = try store.monitorState.countRetries(
                    dueBy: now(), next: now().addingTimeInterval(reconciler.retryDelay(unit: given.random())))
                reconciler.retried(counted: retries.counted, nextDue: retries.nextDue)
            }
            checkRefusals()
            journal.committed(try pipeline.expire(now: now()))
            journal.committed(try pipeline.flush())
            commits.blocked = false
            reportMark()
            // Vehicles not heard from for long leave memory (their state is in the store), once a second at
            // most: a look at every vehicle's last fix time.
            if let limit = pipeline.idleLimit, now() >= nextEviction {
                nextEviction = now().addingTimeInterval(min(60, max(1, limit / 4)))
                let gone = try pipeline.evictIdle(now: now())
                if gone > 0 {
                    logger.info(
                        "forgot \(gone) vehicle(s) not heard from for \(Int(limit)) s; tracking \(pipeline.monitor.subjectCount)"
                    )
                }
            }
            journal.saveStateEvents()
            guard journal.unsaved.isEmpty else { return }
            journal.recovered()
        } catch {
            journal.failed(error)
        }
    }

    /// Last commit before the daemon exits. When the store still refuses after a few tries (room made before
    /// each), returns what was not committed, for the operator: nil when everything is in the store.
    package func shutdown() -> StopShortfall? {
        var failure: (any Error)?
        do {
            journal.committed(try pipeline.finish().events)
        } catch {
            failure = error
            journal.failed(error)
            // A second or so in all, within the stop's promise.
            for _ in 0..<4 {
                Thread.sleep(forTimeInterval: 0.2)
                do {
                    journal.committed(try pipeline.flush())
                    failure = nil
                    break
                } catch {
                    failure = error
                    journal.failed(error)
                }
            }
        }
        journal.saveStateEvents()
        reportMark()
        let time = now()
        journal.recording { try $0.stopped(at: time) }
        publishMetrics()
        guard failure != nil || !journal.unsaved.isEmpty else { return nil }
        return StopShortfall(
            fixes: pipeline.uncommitted, regionEvents: pipeline.pendingEvents,
            stateEvents: journal.unsaved.count,
            reason: journal.trouble.lastError ?? failure.map { "\($0)" } ?? "")
    }

    var statistics: FixFilterStatistics { pipeline.filter.statistics }

    /// Why fixes were refused since the engine started, for the stop line ("64 refused (64 stale)").
    var refusalSummary: String {
        let rejected = pipeline.filter.statistics.rejected.filter { $0.value > 0 }
        return rejected.sorted { ($1.value, $0.key.rawValue) < ($0.value, $1.key.rawValue) }
            .map { "\($0.value) \($0.key.rawValue)" }.joined(separator: ", ")
    }
    var regionCount: Int { pipeline.monitor.regionCount }

    /// The monitor's own loop (`TickService`): settles waiting reports every 0.1 s, ticks every `interval`
    /// seconds (region changes, expiry, bookkeeping, the source's account for `status`), and (under systemd)
    /// says it is alive and what it does (`heartbeat`). All of it runs here, on the monitor's thread, so a
    /// monitor stuck in its work stops it and systemd's watchdog restarts the engine.
    func runTicks(interval: Double, heartbeat: MonitorHeartbeat? = nil) async {
        var last = ContinuousClock.now
        var lastBeat = ContinuousClock.now
        heartbeat?.watchdog()
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(100))
            heartbeat?.stall?()
            settle()
            if ContinuousClock.now - last >= .seconds(interval) {
                last = ContinuousClock.now
                tick()
                recordSourceStatus()
                heartbeat?.status(statusLine)
            }
            if let heartbeat, let every = heartbeat.watchdogInterval, ContinuousClock.now - lastBeat >= every {
                lastBeat = ContinuousClock.now
                heartbeat.watchdog()
            }
            publishMetrics()
            // From this loop, which runs on the monitor's own thread: a monitor stuck in a call stops the
            // beats, and `/healthz` (and the systemd watchdog) see it.
            given.metrics.beat()
        }
    }

    /// Hands the counters to `metrics` (a copy of a few small values, ten times a second; nothing per fix).
    func publishMetrics() {
        let pipeline = self.pipeline
        let (health, events, storeProblem, servicesOn) = (
            health.condition, journal.counts.byType, journal.trouble.lastError, self.servicesOn
        )
        given.metrics.publish { m in
            m.fixes = pipeline.filter.statistics
            m.events = events
            m.commitLatency = pipeline.commitLatency
            m.vehicles = pipeline.monitor.subjectCount
            m.monitoredRegions = pipeline.monitor.regionCount
            m.uncommittedEvents = pipeline.pendingEvents
            m.sourceConnected = health.connected
            m.sourceProblem = health.reason
            m.liveness = health.liveness
            m.livenessReason = health.livenessReason
            m.storeProblem = storeProblem
            m.servicesOn = servicesOn
        }
    }

    /// One line for systemd's STATUS=: the regions, the source, the fixes and events so far.
    var statusLine: String {
        let stats = statistics
        var source = health.condition.liveness.rawValue
        if health.condition.connected == false { source = "not connected" }
        if !servicesOn { source += ", Location Services off" }
        return "\(pipeline.monitor.regionCount) regions monitored; source \(health.label): \(source); "
            + "\(stats.accepted) fixes accepted, \(stats.total - stats.accepted) refused; "
            + "\(journal.counts.regionEvents) events"
    }

    // MARK: The store, on the engine's thread (its calls block; the library's actor runs on the pool)

    func outbox(after seq: Int64, limit: Int) throws -> [StoredEvent] {
        try store.outbox.events(after: seq, limit: limit)
    }
    func add(_ region: Region) throws { try store.regions.add(region) }
    func remove(id: String) throws -> Bool { try store.regions.remove(id: id) }
    func storedRegions() throws -> [Region] { try store.regions.all().map(\.region) }
}

/// What a stop could not commit: the store refused its last writes.
package struct StopShortfall: Sendable {
    var fixes: UncommittedFixes
    var regionEvents: Int
    var stateEvents: Int
    var reason: String
}
