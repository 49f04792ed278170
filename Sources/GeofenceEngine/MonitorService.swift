import Foundation
import GeofenceCore
import GeofenceGPSD
import GeofenceStore

/// The daemon's core service: source reports in, decisions, durable events and state out.
///
/// An actor on its own thread (`ThreadExecutor`): its SQLite work blocks, and must not stall the
/// cooperative pool that the source consumer, the hook runner and the control server share.
package actor MonitorService {
    private let executor: ThreadExecutor
    package nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    let store: StateStore
    private let pipeline: FixPipeline
    private let logger: Logger
    /// The pipeline's, so that every event the engine makes takes its id from one generator.
    private let ids: EventIDs
    private var snapshot: CapabilitySnapshot?
    private var lastStoreError: String?
    /// State events not yet in the outbox because the store refused the write (see `appendState`).
    private var unsavedStateEvents: [StateEvent] = []
    private var lastDisconnection: String?
    private var eventCount = 0
    /// Called after every commit that added events to the outbox (the hook runner's wake-up).
    private let onEvents: @Sendable () -> Void
    /// Where fixes come from, for the log.
    private let sourceLabel: String
    /// A fleet source's account of itself (nil for gpsd), for `status` and the reasons of `source` events.
    private let sourceStatus: @Sendable () -> SourceStatus?
    /// Who may do what: regions of an owner who is not authorized are not monitored.
    private let policy: AccessPolicy
    /// At most this many regions are active; the rest are `pending: limit`.
    private let maxRegions: Int?
    /// Called when the switch changes (the hook runner holds location-bearing hooks while off).
    private let onServices: @Sendable (Bool) -> Void
    /// The wall clock (injected: tests run the engine on their own).
    private let now: @Sendable () -> Date
    /// A number in [0, 1] for the retry backoff's jitter (injected, as the clock).
    private let random: @Sendable () -> Double
    /// What the source said last about itself, for `GeofenceMonitor.status()`.
    private(set) var health = SourceHealth()
    /// What `geofence status` reads of the engine, kept in the store's settings.
    private var recorder: StatusRecorder
    /// Where the engine's counters and health are published for `/metrics`, `/healthz` and `status`.
    let metrics: EngineMetrics
    /// Events committed since start, by type (published with the rest, every tick of the loop).
    private var eventsByType: [String: Int] = [:]
    /// Fixes that arrive and are all refused, told apart from a silent source (`checkRefusals`).
    private var refusals: RefusalWatch
    /// Whether usable fixes arrive (false once the source is `silent` or `lost`, true again when `restored`).
    private var locationAvailable = true
    /// Whether the last reconciliation held regions out of the monitor (a limit, denied owners).
    private var membershipRestricted = false
    /// Rounds of retry of failed regions since the cause last cleared, for the backoff.
    private var retryRound = 0
    /// A reconciliation failed to write its statuses and must run again.
    private var reconcileOwed = false
    /// Whether a region may be held back in the store (`pending`, `failed`, `suspended`): unknown at start,
    /// false after a reconciliation that held nothing. While false and nothing holds regions back, a
    /// reconciliation has nothing to write, and skips the store (a look at every region, with a million).
    private var mayHoldRegions = true
    /// When the next retry of a failed region is due (nil: no region is failed; unknown at start). Checked
    /// only then, rather than every tick (the store finds due retries by looking at every region).
    private var retryDue: Date? = .distantPast
    /// The last commit of fixes failed (a full disk): fixes are judged and queued without a commit each, and
    /// the commit is tried again every `storeRetryInterval` (and at every tick), after making room.
    private var storeBlocked = false
    private var storeRetryAt = Date.distantPast
    private var lastReclaim = Date.distantPast
    static let storeRetryInterval = 0.5
    /// While the store refuses writes, the source is held back once this many accepted fixes wait for a
    /// commit: memory stays bounded, and a producer that can wait (a FIFO, a broker) keeps the rest.
    static let holdSourceAfter = 50_000
    /// The reserve file and the WAL's truncation (nil: an embedder's store, left as it is).
    private let space: StoreSpace?
    /// Told the number of the source's fixes (counted from 1 in the order handed over) up to which all are
    /// committed or need no commit, whenever it moves (`FixPipeline.committedThrough`): an MQTT source
    /// acknowledging after commit sends the broker its acknowledgements then. Nil: no one asks.
    private let commitMark: (@Sendable (Int64) -> Void)?
    private var reportedMark: Int64 = 0

    package init(
        store: StateStore, pipeline: sending FixPipeline, logger: Logger, executor: ThreadExecutor,
        sourceLabel: String, sourceStatus: @escaping @Sendable () -> SourceStatus? = { nil }, policy: AccessPolicy,
        maxRegions: Int?, onServices: @escaping @Sendable (Bool) -> Void,
        onEvents: @escaping @Sendable () -> Void, clock: any GeofenceClock = SystemClock(),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0...1) },
        metrics: EngineMetrics = EngineMetrics(), liveness: SourceLiveness.Configuration = .init(),
        space: StoreSpace? = nil, commitMark: (@Sendable (Int64) -> Void)? = nil
    ) {
        self.space = space
        self.commitMark = commitMark
        now = { clock.now() }
        self.metrics = metrics
        refusals = RefusalWatch(liveness: liveness, startedAt: clock.now())
        self.random = random
        recorder = StatusRecorder(store: store)
        self.sourceLabel = sourceLabel
        self.sourceStatus = sourceStatus
        self.policy = policy
        self.maxRegions = maxRegions
        self.onServices = onServices
        self.store = store
        ids = pipeline.ids
        self.pipeline = pipeline
        self.logger = logger
        self.executor = executor
        self.onEvents = onEvents
    }

    /// Whether Location Services are on: off, no fix is consumed.
    private(set) var servicesOn = true
    /// The capability snapshot the source sent last (nil: none, or a source that cannot tell).
    var capabilities: CapabilitySnapshot? { snapshot }

    /// Loads regions and subject state; returns the number of regions monitored.
    package func load() throws -> Int {
        try pipeline.load()
        servicesOn = try store.permissions.servicesOn()
        if !servicesOn { logger.notice("Location Services are off: no fix will be used until `geofence services on`") }
        onServices(servicesOn)
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
        guard on != servicesOn else { return }
        servicesOn = on
        onServices(on)
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
        saveStateEvents()
        do {
            var denied = Set<UInt32>()
            for owner in try store.regions.owners() where !policy.isPrivileged(owner) {
                let recorded = try store.permissions.find(uid: owner)?.status
                if policy.effectiveStatus(uid: owner, recorded: recorded, servicesOn: true) != .authorized {
                    denied.insert(owner)
                }
            }
            let inputs = ReconcileInputs(
                servicesOn: servicesOn, locationAvailable: locationAvailable, deniedOwners: denied,
                maxRegions: maxRegions)
            // The region-status events are made inside the reconciler's transaction, with the engine's ids.
            let ids = self.ids
            let stamp = now()
            let retryAt = stamp.addingTimeInterval(retryDelay())
            let changes =
                inputs.allClear && !mayHoldRegions
                ? []
                : try store.monitorState.reconcile(inputs, retryAt: retryAt) {
                    MonitorService.statusEvents($0, ids: ids, now: stamp)
                }
            if !changes.isEmpty {
                eventsByType[StateEvent.Kind.regionStatus.rawValue, default: 0] +=
                    changes.count <= 50 ? changes.count : 1
            }
            mayHoldRegions = !inputs.allClear
            if inputs.allClear {
                retryDue = nil
            } else if changes.contains(where: { $0.status.kind == .failed }) {
                retryDue = min(retryDue ?? retryAt, retryAt)
            }
            let restricted = maxRegions != nil || !denied.isEmpty
            if restricted || membershipRestricted { try syncMembership() }
            membershipRestricted = restricted
            reconcileOwed = false
            report(changes)
        } catch {
            // The statuses could not be written (a full disk): the next tick reconciles again.
            reconcileOwed = true
            storeFailed(error)
        }
    }

    /// Exponential backoff with equal jitter, 1 s doubling to 5 minutes.
    private static let retryBackoff = ReconnectBackoff(base: 1, cap: 300, jitter: .equal)

    private func retryDelay() -> Double {
        MonitorService.retryBackoff.delay(forAttempt: retryRound, unit: random())
    }

    /// Makes the monitor hold exactly the regions that should be active.
    private func syncMembership() throws {
        let wanted = try store.regions.activeSeqs(upTo: pipeline.takenSeq)
        let current = pipeline.monitor.regionSeqs
        let leaving = current.subtracting(wanted)
        if !leaving.isEmpty { pipeline.deactivate(seqs: leaving) }
        let coming = wanted.subtracting(current)
        if !coming.isEmpty { try pipeline.activate(try store.regions.find(seqs: Array(coming).sorted())) }
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
            for change in changes.prefix(10) { logger.info("region \(quoted(change.id)) is now \(change.status)") }
            if changes.count > 10 { logger.info("... and \(changes.count - 10) more regions changed status") }
        } else {
            logger.info("\(changes.count) regions changed status: \(Self.summary(changes))")
        }
        onEvents()
    }

    private func setLocationAvailable(_ available: Bool) {
        guard available != locationAvailable else { return }
        locationAvailable = available
        if available { retryRound = 0 }
        reconcile()
    }

    package func handle(_ report: LocationReport) {
        switch report {
        case .fix(let fix):
            handle(fixes: [fix])
            reportMark()
        case .fixes(let fixes):
            handle(fixes: fixes)
            reportMark()
        case .up:
            health.connected = true
            health.reason = nil
            lastDisconnection = nil
            logger.info("connected to \(sourceLabel)")
            recording { try $0.connected() }
        case .down(let d):
            health.connected = false
            health.reason = d.reason
            let text = d.reason
            if text != lastDisconnection {
                logger.warning("\(text); retrying in \(format(d.retryIn))")
            } else {
                logger.debug("\(text); retry \(d.attempt) in \(format(d.retryIn))")
            }
            lastDisconnection = text
            recording { try $0.disconnected(text) }
        case .capabilities(let new):
            deviceChanges(from: snapshot, to: new)
            snapshot = new
            recording { try $0.capabilities(new) }
        case .liveness(let transition):
            let reason: String
            let level: LogLevel
            // What is known, in the source's own terms: a gpsd that cannot be reached is not a receiver
            // without sky, and a stream of unusable lines is neither.
            let status = sourceStatus()
            switch transition {
            case .silent:
                if let status {
                    reason = "no usable fix since the source started: " + status.silenceReason
                } else if let lastDisconnection {
                    reason = "no usable fix since the source started: \(lastDisconnection)"
                } else {
                    reason = "no usable fix since the source started: the receiver may have no view of the sky"
                }
                level = .warning
            case .lost:
                reason =
                    status.map { "usable fixes stopped arriving: " + $0.lostReason } ?? "usable fixes stopped arriving"
                level = .warning
            case .restored:
                reason = "usable fixes are arriving again"
                level = .notice
            }
            logger.log(level, "source \(transition.rawValue): \(reason)")
            health.liveness = transition == .restored ? "receiving" : transition.rawValue
            health.livenessReason = transition == .restored ? nil : reason
            // The cause before its effects: the source event, then the regions' new statuses.
            appendState(
                StateEvent(
                    id: ids.next(now: now()), type: .source, time: now(), state: transition.rawValue, reason: reason))
            setLocationAvailable(transition == .restored)
            let time = now()
            recording { try $0.liveness(transition, at: time) }
        case .warning(let message):
            logger.warning(message)
        }
    }

    /// Writes a fleet source's account of itself where `status` reads it (only when it changed).
    func recordSourceStatus() {
        guard let status = sourceStatus() else { return }
        recording { try $0.sourceStatus(status) }
    }

    /// The engine's clockwork, until cancelled: every 0.1 s, reports held for the rest of their epoch; every
    /// `interval` seconds, region changes, expiry, bookkeeping and the source's account for `status`.
    /// The monitor's own loop: settles waiting reports, ticks every `interval` seconds, and (under systemd)
    /// says it is alive and what it does (`heartbeat`). Both run here, on the monitor's thread, so a monitor
    /// stuck in its work stops them and systemd's watchdog restarts the engine.
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
            metrics.beat()
        }
    }

    /// Hands the counters to `metrics` (a copy of a few small values, ten times a second; nothing per fix).
    func publishMetrics() {
        let pipeline = self.pipeline
        let (health, events, storeProblem, servicesOn) = (self.health, eventsByType, lastStoreError, self.servicesOn)
        metrics.publish { m in
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
        var source = health.liveness
        if health.connected == false { source = "not connected" }
        if !servicesOn { source += ", Location Services off" }
        return "\(pipeline.monitor.regionCount) regions monitored; source \(sourceLabel): \(source); "
            + "\(stats.accepted) fixes accepted, \(stats.total - stats.accepted) refused; \(eventCount) events"
    }

    // MARK: The store, on the engine's thread (its calls block; the library's actor runs on the pool)

    func outbox(after seq: Int64, limit: Int) throws -> [StoredEvent] {
        try store.outbox.events(after: seq, limit: limit)
    }
    func add(_ region: Region) throws { try store.regions.add(region) }
    func remove(id: String) throws -> Bool { try store.regions.remove(id: id) }
    func storedRegions() throws -> [Region] { try store.regions.all().map(\.region) }

    /// Frequent work: pass on reports that waited for the rest of their epoch.
    package func settle() {
        // While the store refuses, a commit here, ten times a second, would rewrite the whole queue each time.
        guard !storeBlocked else {
            pipeline.settleWithoutCommit()
            return
        }
        defer { reportMark() }
        do {
            committed(try pipeline.settle().events)
            // Reports released from the epoch assembler hold the source's acknowledgements until committed.
            if commitMark != nil, pipeline.holdsMark { committed(try pipeline.flush()) }
        } catch {
            storeBlocked = true
            storeRetryAt = now().addingTimeInterval(Self.storeRetryInterval)
            storeFailed(error)
        }
    }

    /// Tells `commitMark` how far the source's fixes are committed, when that moved.
    private func reportMark() {
        guard let commitMark else { return }
        let mark = pipeline.committedThrough
        guard mark > reportedMark else { return }
        reportedMark = mark
        commitMark(mark)
    }

    private func handle(fixes: [Fix]) {
        guard servicesOn else {
            // Not consumed, and nothing to commit: the source may let them go.
            pipeline.skip(fixes.count)
            return
        }
        if health.liveness == "awaiting-first-fix",
            fixes.contains(where: { FixFilter.classify($0, now: nil, configuration: .init()).isUsable })
        {
            health.liveness = "receiving"
        }
        // Each fix on its own: a commit that fails (a full disk) leaves its outputs pending in the pipeline,
        // and the fixes after it in the batch must still be judged, or their crossings would be lost. While the
        // store refuses, they are queued without a commit each (a failing commit rewrites the whole queue:
        // at every fix, that is quadratic), and the commit is tried again every half second.
        if let last = fixes.last, let received = last.receivedAt, let time = last.time {
            refusals.lastAge = received.timeIntervalSince(time)
        }
        for fix in fixes {
            if storeBlocked {
                pipeline.judgeWithoutCommit(fix)
                continue
            }
            do {
                committed(try pipeline.processForEvents(fix))
            } catch {
                storeBlocked = true
                storeRetryAt = now().addingTimeInterval(Self.storeRetryInterval)
                storeFailed(error)
            }
        }
        if storeBlocked && now() >= storeRetryAt { retryStore() }
        // A source that acknowledges after commit waits for this batch's commit (its broker sends no more
        // than its in-flight window meanwhile): committed now, not with the next batch of bookkeeping.
        if commitMark != nil, !storeBlocked, pipeline.holdsMark {
            do {
                committed(try pipeline.flush())
            } catch {
                storeBlocked = true
                storeRetryAt = now().addingTimeInterval(Self.storeRetryInterval)
                storeFailed(error)
            }
        }
    }

    /// Whether the source must wait: the store refuses writes and `holdSourceAfter` fixes wait for it.
    var holdsSource: Bool { storeBlocked && pipeline.uncommitted.count >= Self.holdSourceAfter }

    /// Tries the queued commit again (room was made when it last failed for want of space).
    func retryStore() {
        storeRetryAt = now().addingTimeInterval(Self.storeRetryInterval)
        do {
            committed(try pipeline.flush())
            storeBlocked = false
        } catch {
            storeFailed(error)
        }
        reportMark()
    }

    /// Periodic work: follow the CLI's region changes, expire regions, commit bookkeeping.
    /// When `tick` next looks for vehicles to forget.
    private var nextEviction = Date.distantPast

    package func tick() {
        do {
            // The switch may also be flipped in the store directly (by a CLI that found no socket).
            let storedSwitch = try store.permissions.servicesOn()
            if storedSwitch != servicesOn { setServices(storedSwitch) }
            saveStateEvents()
            let changed = try pipeline.syncRegions()
            if changed > 0 {
                logger.info("regions changed: \(changed); monitoring \(pipeline.monitor.regionCount)")
                reconcile()
            } else if reconcileOwed {
                reconcile()
            }
            // Failed regions whose retry is due: count the attempt; the cause, if it cleared, was acted on
            // when it did.
            if let due = retryDue, due <= now() {
                let retries = try store.monitorState.countRetries(
                    dueBy: now(), next: now().addingTimeInterval(retryDelay()))
                if retries.counted > 0 { retryRound += 1 }
                retryDue = retries.nextDue
            }
            checkRefusals()
            committed(try pipeline.expire(now: now()))
            committed(try pipeline.flush())
            storeBlocked = false
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
            saveStateEvents()
            guard unsavedStateEvents.isEmpty else { return }
            if lastStoreError != nil {
                logger.notice("the store accepts writes again")
                lastStoreError = nil
            }
            // Made again once there is room (a no-op while it is there).
            space?.makeReserve()
        } catch {
            storeFailed(error)
        }
    }

    /// Last commit before the daemon exits. When the store still refuses after a few tries (room made before
    /// each), returns what was not committed, for the operator: nil when everything is in the store.
    package func shutdown() -> StopShortfall? {
        var failure: (any Error)?
        do {
            committed(try pipeline.finish().events)
        } catch {
            failure = error
            storeFailed(error)
            // A second or so in all, within the stop's promise.
            for _ in 0..<4 {
                Thread.sleep(forTimeInterval: 0.2)
                do {
                    committed(try pipeline.flush())
                    failure = nil
                    break
                } catch {
                    failure = error
                    storeFailed(error)
                }
            }
        }
        saveStateEvents()
        reportMark()
        let time = now()
        recording { try $0.stopped(at: time) }
        publishMetrics()
        guard failure != nil || !unsavedStateEvents.isEmpty else { return nil }
        return StopShortfall(
            fixes: pipeline.uncommitted, regionEvents: pipeline.pendingEvents,
            stateEvents: unsavedStateEvents.count, reason: lastStoreError ?? failure.map { "\($0)" } ?? "")
    }

    var statistics: FixFilterStatistics { pipeline.filter.statistics }

    /// Fixes that arrive while none is accepted: the source is `receiving` by its own lights (gpsd sends
    /// positions), yet nothing reaches the monitor. At the first-fix deadline (or, once fixes were used, the
    /// staleness limit) that is said as the source's `silent` (`lost`) with the reason in an operator's words
    /// (`fixes arrive but are 15 days old: ...`), as a state event; the next accepted fix restores it.
    private func checkRefusals() {
        let time = now()
        // Only fixes the source itself calls usable (a position) and the filter refuses are this watch's to
        // report; a source without them says so itself (`silent`: no sky, unusable lines, no gpsd).
        let quiet = !refusals.refusing && health.liveness != "receiving"
        switch refusals.advance(pipeline.filter.statistics, at: time, sourceQuiet: quiet) {
        case .none:
            return
        case .refusing(let transition, let advice):
            let reason =
                (transition == .silent ? "no usable fix since the source started: " : "usable fixes stopped: ")
                + advice.text
            logger.warning("source \(transition.rawValue): \(reason)")
            health.liveness = transition.rawValue
            health.livenessReason = reason
            appendState(
                StateEvent(
                    id: ids.next(now: time), type: .source, time: time, state: transition.rawValue, reason: reason))
            setLocationAvailable(false)
            recording { try $0.liveness(transition, at: time) }
        case .accepting:
            let reason = "usable fixes are arriving again"
            logger.notice("source restored: \(reason)")
            health.liveness = "receiving"
            health.livenessReason = nil
            appendState(
                StateEvent(id: ids.next(now: time), type: .source, time: time, state: "restored", reason: reason))
            setLocationAvailable(true)
            recording { try $0.liveness(.restored, at: time) }
        }
    }

    /// Why fixes were refused since the engine started, for the stop line ("64 refused (64 stale)").
    var refusalSummary: String {
        let rejected = pipeline.filter.statistics.rejected.filter { $0.value > 0 }
        return rejected.sorted { ($1.value, $0.key.rawValue) < ($0.value, $1.key.rawValue) }
            .map { "\($0.value) \($0.key.rawValue)" }.joined(separator: ", ")
    }
    var regionCount: Int { pipeline.monitor.regionCount }

    private func committed(_ events: [RegionEvent]) {
        guard !events.isEmpty else { return }
        for e in events {
            var line = "event \(e.type.rawValue) region=\(quoted(e.region))"
            if let subject = e.subject { line += " subject=\(quoted(subject))" }
            if let state = e.state { line += " state=\(state.rawValue)" }
            if let distance = e.distance { line += String(format: " distance=%.1fm", distance) }
            if e.inferred { line += " inferred" }
            line += " id=\(e.id)"
            logger.notice(line)
        }
        eventCount += events.count
        for e in events { eventsByType[e.type.rawValue, default: 0] += 1 }
        onEvents()
    }

    private func appendState(_ event: StateEvent) { appendState([event]) }

    /// State events go to the outbox in order; while the store cannot be written (a full disk) they wait
    /// here and go with the next write that succeeds (every tick tries), so none is lost.
    private func appendState(_ events: [StateEvent]) {
        unsavedStateEvents += events
        saveStateEvents()
    }

    private func saveStateEvents() {
        guard !unsavedStateEvents.isEmpty else { return }
        do {
            try store.outbox.append(unsavedStateEvents)
            for e in unsavedStateEvents { eventsByType[e.type.rawValue, default: 0] += 1 }
            unsavedStateEvents.removeAll()
            onEvents()
        } catch {
            storeFailed(error)
        }
    }

    private func deviceChanges(from old: CapabilitySnapshot?, to new: CapabilitySnapshot) {
        let before = Set(old?.devices.map(\.path) ?? [])
        let after = Set(new.devices.map(\.path))
        for path in after.subtracting(before).sorted() {
            let device = new.device(at: path)
            logger.info("device added: \(path)" + (device?.driver.map { " (\($0))" } ?? ""))
            if old != nil {
                appendState(
                    StateEvent(id: ids.next(now: now()), type: .device, time: now(), state: "added", subject: path))
            }
        }
        for path in before.subtracting(after).sorted() {
            logger.warning("device removed: \(path)")
            appendState(
                StateEvent(id: ids.next(now: now()), type: .device, time: now(), state: "removed", subject: path))
        }
    }

    private func storeFailed(_ error: any Error) {
        // Out of space: the reserve goes back to the file system and the WAL is truncated into the room it
        // made (at most twice a second: a checkpoint reads the whole WAL).
        if let space, (error as? DatabaseError)?.isFull == true,
            now().timeIntervalSince(lastReclaim) >= Self.storeRetryInterval
        {
            lastReclaim = now()
            if space.reclaim() { logger.info("the file system is full: gave back the reserve and truncated the WAL") }
        }
        let text = "\(error)"
        if text != lastStoreError {
            logger.error("cannot write to the store: \(text); nothing is lost, retrying")
            lastStoreError = text
        }
    }

    /// Writes what `status` reads; a store that refuses is said once, and the next change tries again.
    private func recording(_ write: (inout StatusRecorder) throws -> Void) {
        do {
            try write(&recorder)
        } catch {
            storeFailed(error)
        }
    }

    private func quoted(_ s: String) -> String { JSONValue.string(s).serialized() }

    private func format(_ d: Duration) -> String {
        let seconds = Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
        return String(format: "%.1f s", seconds)
    }
}

/// What the engine knows of its source's health (the first and fourth questions), from its reports.
struct SourceHealth: Sendable, Equatable {
    /// Whether the source reached what it reads from (nil: it has not said).
    var connected: Bool?
    /// Why it is not connected.
    var reason: String?
    /// `awaiting-first-fix`, `receiving`, `silent` or `lost`.
    var liveness = "awaiting-first-fix"
    /// Why fixes are not arriving, in the source's terms.
    var livenessReason: String?
}

/// Watches the filter's verdicts for fixes that keep arriving while none is accepted (see
/// `MonitorService.checkRefusals`): a pure state machine on the wall clock it is given.
package struct RefusalWatch: Sendable {
    package enum Change: Sendable, Equatable {
        case none
        /// None accepted for the deadline while fixes were refused: `silent` (none ever) or `lost`.
        case refusing(SourceLiveness.Transition, RefusalAdvice)
        /// A fix accepted again after `refusing`.
        case accepting
    }

    package let liveness: SourceLiveness.Configuration
    /// When the last fix was accepted (or the engine started, before the first).
    private var since: Date
    private var everAccepted = false
    /// The verdicts when the last fix was accepted: what came after is `current - baseline`.
    private var baseline = FixFilterStatistics()
    package private(set) var refusing = false
    /// The last fix's receipt minus its own time (for words like "15 days old").
    package var lastAge: Double?

    package init(liveness: SourceLiveness.Configuration, startedAt: Date) {
        self.liveness = liveness
        since = startedAt
    }

    package mutating func advance(_ current: FixFilterStatistics, at time: Date, sourceQuiet: Bool = false) -> Change {
        if current.accepted != baseline.accepted {
            since = time
            everAccepted = true
            baseline = current
            if refusing {
                refusing = false
                return .accepting
            }
            return .none
        }
        guard !refusing, !sourceQuiet,
            time.timeIntervalSince(since) >= (everAccepted ? liveness.stalenessLimit : liveness.firstFixDeadline)
        else { return .none }
        var refused: [FixRejection: Int] = [:]
        for (reason, n) in current.rejected where n > baseline[reason] { refused[reason] = n - baseline[reason] }
        guard let advice = RefusalAdvice(refused: refused, age: lastAge) else { return .none }
        refusing = true
        return .refusing(everAccepted ? .lost : .silent, advice)
    }
}

/// What a stop could not commit: the store refused its last writes.
package struct StopShortfall: Sendable {
    var fixes: UncommittedFixes
    var regionEvents: Int
    var stateEvents: Int
    var reason: String
}
