import Foundation
import GeofenceCore
import GeofenceStore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Counters of a hook runner since it was made.
package struct HookRunnerStatistics: Sendable, Equatable {
    /// Hook processes started.
    package var started = 0
    /// Deliveries done (exit 0).
    package var delivered = 0
    /// Attempts that failed (non-zero exit, signal, timeout, spawn error).
    package var failed = 0
    /// Deliveries given up (`dead`).
    package var dead = 0
    /// Attempts stopped because the runner stopped.
    package var interrupted = 0
    /// Hooks running now.
    package var running = 0
    /// The most hooks that ran at once.
    package var maxConcurrent = 0

    package init() {}
}

/// What `drain()` achieved.
package struct HookDrainSummary: Sendable, Equatable {
    package var delivered = 0
    package var failedAttempts = 0
    package var dead = 0
    /// Deliveries still pending at the end: retries due after the drain limit (or interrupted).
    package var pending = 0
    /// Another runner (the daemon) holds this state directory's hooks: nothing was run here.
    package var busy = false

    package init() {}
}

/// Runs the hooks of the events in the outbox: its sink (`HookDispatchSink`, driven by a `SinkRunner` as
/// every sink is) creates the deliveries of new events, and the runner runs each as
/// `/bin/sh -c COMMAND` with the event in `GEOFENCE_*` variables and its JSON on stdin, and records what
/// happened; retries failures with backoff, up to a limit, then marks them dead. Deliveries with the same order
/// key start one after another in event order; others run concurrently, up to `configuration.concurrency`.
///
/// Delivery is at-least-once: a delivery is marked done only after its hook exited 0, so a crash (or a stop)
/// while a hook runs means that hook runs again. Receivers de-duplicate by `GEOFENCE_EVENT_ID`.
///
/// The runner works on threads of its own (a scheduler, one per running hook), since it blocks on SQLite and
/// `poll`; `run()` and `drain()` only wait for it. It uses its own database connection, committing with
/// `synchronous=NORMAL`: a power cut may forget the last deliveries' completion and repeat them, which
/// at-least-once allows, and nothing else is at stake (events are committed by their writer). The hooks'
/// dispatch (a `SinkRunner` task) does its store work on a `StoreWorker` thread of its own (`geofence.hookdb`).
///
/// It reads the time only from `clock`: when deliveries are made, claimed, retried and finished, and when
/// the scheduler's waits end.
///
/// The loop's outcomes are in HookRunner+Outcomes.swift, its doorbell (`RunnerControl`) in RunnerControl.swift.
package final class HookRunner: Sendable {
    package let configuration: HookConfiguration
    private let locationPaused = Atomic(false)
    private let store: StateStore
    let logger: Logger
    let clock: any GeofenceClock
    let control = RunnerControl()
    /// The session's dispatcher: the hooks' sink, run from the outbox like any other.
    private let dispatcher = Mutex<SinkRunner?>(nil)

    package init(
        store: StateStore, configuration: HookConfiguration = HookConfiguration(), logger: Logger = Logger(),
        clock: any GeofenceClock = SystemClock()
    ) {
        self.store = store
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
    }

    /// Delivers until the calling task is cancelled. On cancellation, running hooks get SIGTERM and, after
    /// `shutdownGrace`, SIGKILL (whole process groups); their deliveries are retried at the next start. Returns
    /// within `shutdownGrace` + about a second.
    ///
    /// If another runner holds the state directory (a `replay --hooks`), waits for it to finish.
    package func run() async {
        _ = await session(.forever)
    }

    /// Stops gracefully: no new hook is started, and running ones are given `shutdownGrace` to finish before
    /// they are stopped as on cancellation (SIGTERM, then SIGKILL). `run()` returns once they have.
    package func finish() {
        control.requestFinish()
    }

    /// New events were committed: look at the outbox now rather than at the next poll.
    package func wake() {
        dispatcher.withLock { $0 }?.wake()
        control.wake()
    }

    /// Delivers everything deliverable, waiting out retry delays that end within `drainLimit`, then returns.
    /// What is left stays pending for the next runner. Cancelling the task stops it as `run()` stops.
    package func drain() async -> HookDrainSummary {
        await session(.drain)
    }

    /// Like `drain()`, but delivers as `run()` does until `inputEnded()` is called, and only then drains: for
    /// `replay --hooks` reading a live stream, whose hooks should fire as its events are stored. Call `wake()`
    /// after each commit, as the daemon does.
    package func drainAfterInput() async -> HookDrainSummary {
        await session(.drainAfterInput)
    }

    /// The input of `drainAfterInput()` is over: drain what is left, then return.
    package func inputEnded() {
        control.endInput()
    }

    package var statistics: HookRunnerStatistics { control.statistics }

    private enum Mode {
        case forever
        case drain
        case drainAfterInput

        /// Whether the session gives up when the state directory's hooks are run by someone else.
        var drains: Bool { self != .forever }
    }

    private func session(_ mode: Mode) async -> HookDrainSummary {
        control.beginSession()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<HookDrainSummary, Never>) in
                let thread = Thread { continuation.resume(returning: self.loop(mode)) }
                thread.name = "geofence.hooks"
                thread.start()
            }
        } onCancel: {
            self.control.requestStop()
        }
    }

    // MARK: The scheduler thread

    /// Everything the scheduler thread keeps between iterations.
    struct LoopState {
        var scheduler = DeliveryScheduler()
        var running: [Int64: ClaimedDelivery] = [:]
        /// Outcomes not yet recorded (a failed commit keeps them for the next iteration).
        var outcomes: [(claim: ClaimedDelivery, outcome: DeliveryOutcome)] = []
        var generation: Int64 = -1
        var lastPoll = Date.distantPast
        /// The last event seq whose deliveries the scheduler has been given (by the reload at the start, then
        /// by the dispatcher); nil until the start's reload.
        var dispatchedThrough: Int64?
        /// Events are committed after `dispatchedThrough`: their deliveries are still to be made.
        var dispatchBehind = true
        /// When the dispatcher last made progress (a drain gives up on one that makes none).
        var lastDispatch: Date
        var needsReload = true
        var failing = false
        var summary = HookDrainSummary()
    }

    private func loop(_ mode: Mode) -> HookDrainSummary {
        guard let lock = acquireLock(mode) else {
            var summary = HookDrainSummary()
            summary.busy = mode.drains
            return summary
        }
        defer { withExtendedLifetime(lock) {} }
        let db: StateStore
        do {
            let own = try StateStore(directory: store.directory, options: .init(synchronous: .normal))
            try own.retryLocksQuickly()
            db = own
        } catch {
            logger.warning("hooks: cannot open a connection of their own (\(error)); sharing the daemon's")
            db = store
        }
        var stopPipe: (read: Int32, write: Int32) = (-1, -1)
        do {
            stopPipe = try HookSystem.makePipe()
        } catch {
            logger.warning("hooks: no stop pipe (\(error)): on stop, running hooks are left to finish")
        }
        do {
            let recovered = try db.deliveries.recoverInterrupted(now: clock.now())
            if recovered > 0 {
                logger.notice("hooks: \(recovered) deliveries were interrupted by a stop; retrying them")
            }
        } catch {
            logger.error("hooks: cannot recover interrupted deliveries: \(error)")
        }

        var started = clock.now()
        var inputOpen = mode == .drainAfterInput
        var state = LoopState(lastDispatch: started)
        var wakeAt: Date? = nil
        /// The dispatcher's task, started once the heads are loaded.
        var dispatch: (runner: SinkRunner, task: Task<Void, Never>, done: DispatchSemaphore)?
        /// When a graceful stop was asked for: running hooks have until `shutdownGrace` after it.
        var finishingSince: Date?
        while true {
            let signal = control.wait(seconds: wakeAt.map { $0.timeIntervalSince(clock.now()) })
            if signal.stop { break }
            if signal.finishing && finishingSince == nil { finishingSince = clock.now() }
            if inputOpen && control.inputHasEnded {
                // Read before this iteration's poll, which so sees every event committed before the end. The
                // drain limit counts from here.
                inputOpen = false
                started = clock.now()
                state.dispatchBehind = true
            }
            let now = clock.now()
            collect(signal.finished, now: now, into: &state)
            record(&state, db: db, now: now)
            if let through = signal.dispatchedThrough {
                for head in signal.created { state.scheduler.offer(head) }
                state.dispatchedThrough = max(state.dispatchedThrough ?? 0, through)
                state.lastDispatch = now
            }
            if signal.woken || state.needsReload || state.dispatchBehind
                || now.timeIntervalSince(state.lastPoll) >= configuration.pollInterval
            {
                poll(&state, db: db, now: now)
                if dispatch == nil, let from = state.dispatchedThrough {
                    dispatch = startDispatcher(db: db, after: from)
                }
            }
            if let since = finishingSince {
                // Finishing: nothing new starts; the running ones finish, or the grace ends and they are stopped.
                if state.running.isEmpty && state.outcomes.isEmpty { break }
                let end = since.addingTimeInterval(configuration.shutdownGrace)
                if clock.now() >= end {
                    logger.notice("hooks: \(state.running.count) still running after the grace; stopping them")
                    break
                }
                wakeAt = min(end, clock.now().addingTimeInterval(configuration.pollInterval))
                continue
            }
            startDue(&state, db: db, stopFD: stopPipe.read)

            var next = state.lastPoll.addingTimeInterval(configuration.pollInterval)
            // With every slot taken, a due head waits for a hook to finish, which wakes us anyway: waking for it
            // would only spin.
            if state.running.count < configuration.concurrency, let due = state.scheduler.nextDue() {
                next = min(next, due)
            }
            if state.failing { next = max(next, clock.now().addingTimeInterval(1)) }

            let draining = mode.drains && !inputOpen
            if draining && state.failing && clock.now().timeIntervalSince(started) > configuration.drainLimit {
                logger.error("hooks: giving up draining: the store keeps failing")
                break
            }
            if draining && state.dispatchBehind
                && clock.now().timeIntervalSince(max(started, state.lastDispatch)) > configuration.drainLimit
            {
                logger.error("hooks: giving up draining: events are not being dispatched")
                break
            }
            if draining && state.running.isEmpty && state.outcomes.isEmpty && !state.dispatchBehind && !state.failing {
                guard let due = state.scheduler.nextDue() else { break }
                if due.timeIntervalSince(started) > configuration.drainLimit { break }
            }
            wakeAt = next
        }
        if let dispatch {
            dispatcher.withLock { $0 = nil }
            dispatch.task.cancel()
            dispatch.done.wait()
        }
        shutDown(&state, db: db, stopPipe: stopPipe)
        control.endFinish()
        if mode == .drainAfterInput { control.resetInput() }
        state.summary.pending = (try? db.deliveries.countsByStatus()[.pending]) ?? 0
        return state.summary
    }

    private func acquireLock(_ mode: Mode) -> HookRunnerLock? {
        var told = false
        // A drain gives up after a moment: the lock may be held an instant longer than its runner lives (a
        // process being spawned elsewhere holds a copy of the descriptor until its exec).
        let giveUp = clock.now().addingTimeInterval(2)
        while true {
            do {
                return try HookRunnerLock(directory: store.directory)
            } catch is HookRunnerLock.Held {
                if mode.drains && clock.now() >= giveUp { return nil }
                if !told && !mode.drains {
                    logger.notice("hooks: another geofence runs this state directory's hooks; waiting")
                }
            } catch {
                if !told { logger.error("hooks: cannot take \(HookRunnerLock.fileName): \(error); retrying") }
            }
            told = true
            let pause = mode.drains ? 0.1 : configuration.pollInterval
            // A graceful stop while waiting for the lock has nothing to finish: it stops as a cancellation does.
            let signal = control.wait(seconds: pause)
            if signal.stop || signal.finishing { return nil }
        }
    }

    /// Looks at the outbox (creating deliveries) and at changes made with the CLI (reloading the heads).
    private func poll(_ state: inout LoopState, db: StateStore, now: Date) {
        do {
            let (cursor, latestEvent, generation) = try db.deliveries.hookDispatchState()
            if generation != state.generation || state.needsReload {
                let running = Dictionary(
                    state.running.values.compactMap { claim in
                        state.scheduler.head(for: claim.orderKey).map { (claim.orderKey, $0) }
                    }, uniquingKeysWith: { a, _ in a })
                state.scheduler.reload(try db.deliveries.heads(), running: running)
                state.generation = generation
                state.needsReload = false
            }
            // The first reload gave the scheduler every delivery made up to the cursor; the dispatcher, started
            // from there, gives it the next ones.
            if state.dispatchedThrough == nil { state.dispatchedThrough = cursor }
            state.dispatchBehind = latestEvent > (state.dispatchedThrough ?? cursor)
            state.lastPoll = now
            state.failing = false
        } catch {
            fail(&state, "cannot read the outbox: \(error)")
        }
    }

    func fail(_ state: inout LoopState, _ message: String) {
        if !state.failing { logger.error("hooks: \(message); retrying every second") }
        state.failing = true
        state.needsReload = true
    }

    /// Starts the hooks' sink: a `SinkRunner` that reads the outbox after `hook_dispatch`'s cursor and makes
    /// the deliveries, telling this loop of each batch. It runs until the session ends.
    private func startDispatcher(db: StateStore, after cursor: Int64) -> (
        runner: SinkRunner, task: Task<Void, Never>, done: DispatchSemaphore
    ) {
        let control = self.control
        let worker = StoreWorker(name: "geofence.hookdb")
        let sink = HookDispatchSink(store: db, runAsCreators: getuid() == 0, clock: clock, worker: worker) {
            created, through in
            control.dispatched(created, through: through)
        }
        let runner = SinkRunner(
            sink: sink, store: db, logger: logger, cursor: HookDispatchCursor(store: db), batchSize: 500,
            pollInterval: configuration.pollInterval, worker: worker)
        let done = DispatchSemaphore(value: 0)
        let task = Task {
            await runner.run()
            done.signal()
        }
        dispatcher.withLock { $0 = runner }
        return (runner, task, done)
    }

    /// Holds back the hooks of region events (they carry positions) while Location Services are off; the
    /// others (services, authorization, source) still run. Lifting the hold lets them go, in order.
    package func setLocationPaused(_ paused: Bool) {
        locationPaused.store(paused, ordering: .releasing)
        wake()
    }

    /// Starts the due heads, up to the concurrency bound.
    private func startDue(_ state: inout LoopState, db: StateStore, stopFD: Int32) {
        let free = configuration.concurrency - state.running.count
        guard free > 0, !state.failing else { return }
        let paused = locationPaused.load(ordering: .acquiring)
        if !paused && state.scheduler.hasHeld { state.scheduler.release() }
        let due = state.scheduler.takeDue(now: clock.now(), limit: free) { head in
            paused && head.orderKey.isPerRegion
        }
        guard !due.isEmpty else { return }
        let claimed: [ClaimedDelivery]
        do {
            claimed = try db.deliveries.claim(ids: due.map(\.id), now: clock.now())
        } catch {
            fail(&state, "cannot start deliveries: \(error)")
            return
        }
        let claimedIDs = Set(claimed.map(\.id))
        for head in due where !claimedIDs.contains(head.id) {
            // Retried, stopped or removed with the CLI meanwhile: ask the store who is first now.
            do {
                let fresh = try db.deliveries.head(orderKey: head.orderKey)
                state.scheduler.setHead(fresh?.id == head.id ? nil : fresh, for: head.orderKey)
            } catch {
                fail(&state, "cannot read deliveries: \(error)")
            }
        }
        for claim in claimed {
            state.running[claim.id] = claim
            launch(claim, stopFD: stopFD)
        }
    }

    /// Starts the hook here, on the scheduler thread (the shortest way from event to hook start), and leaves
    /// the rest of its life to a thread of its own.
    private func launch(_ claim: ClaimedDelivery, stopFD: Int32) {
        let vars = HookEnvironment.variables(for: claim, inherited: configuration.inheritedEnvironment)
        let invocation = HookInvocation(
            command: claim.command, environment: HookEnvironment.strings(vars), stdin: Array((claim.body + "\n").utf8),
            runAs: claim.runAs)
        let limits = HookLimits(
            timeout: configuration.timeout, killGrace: configuration.killGrace,
            shutdownGrace: configuration.shutdownGrace, outputLimit: configuration.outputLimit)
        let control = self.control
        control.started()
        switch HookProcess.start(invocation, clock: clock) {
        case .failure(let failure):
            control.complete(claim, failure.result)
        case .success(let started):
            let thread = Thread {
                control.complete(claim, HookProcess.finish(started, limits: limits, stopFD: stopFD))
            }
            thread.name = "geofence.hook"
            thread.start()
        }
    }

    /// Stops running hooks (their process groups get SIGTERM, then SIGKILL), waits for them a bounded time, and
    /// records them as interrupted, due again at once. A hook that will not die keeps its delivery `running`;
    /// the next start retries it.
    private func shutDown(_ state: inout LoopState, db: StateStore, stopPipe: (read: Int32, write: Int32)) {
        HookSystem.closeIgnoringErrors(stopPipe.write)
        let deadline = clock.now().addingTimeInterval(configuration.shutdownGrace + 1)
        while !state.running.isEmpty {
            let signal = control.wait(seconds: deadline.timeIntervalSince(clock.now()), ignoringStop: true)
            collect(signal.finished, now: clock.now(), into: &state)
            if clock.now() >= deadline { break }
        }
        record(&state, db: db, now: clock.now())
        if state.running.isEmpty {
            HookSystem.closeIgnoringErrors(stopPipe.read)
        } else {
            // Their threads still poll it: leave it open rather than let the number be reused under them.
            logger.warning("hooks: \(state.running.count) hooks did not stop; they are retried at the next start")
        }
    }
}
