import Foundation
import GeofenceCore
import GeofenceStore
import Synchronization

/// Drives one `EventSink` from the outbox: reads committed events after the sink's durable cursor in seq
/// order, a batch at a time, delivers those its filter takes, and advances the cursor only over what was
/// acknowledged (and what the filter skipped before the first unacknowledged event). After a restart it
/// resumes from the cursor: at least once, in order.
///
/// A receiver that is away is retried with backoff (`ReconnectBackoff`, 0.05 s doubling to 1 s: the sink
/// itself reconnects, and this only looks again); new events wake it at once (`wake()`), else it looks
/// every `pollInterval`.
///
/// Its reads of the outbox and its cursor's reads and writes block on SQLite: they run on its `StoreWorker`
/// (a thread of its own), while the loop itself, its waits and the sink's `deliver` are async.
package final class SinkRunner: Sendable {
    package let sink: any EventSink
    private let store: StateStore
    private let place: any SinkCursor
    private let worker: StoreWorker
    private let logger: Logger
    private let bell = Doorbell()
    private let paused = Atomic(false)
    private let counters = Mutex(Counters())

    package struct Counters: Sendable, Equatable {
        /// Events acknowledged since the runner started.
        package var delivered = 0
        /// The cursor as last written.
        package var cursor: Int64 = 0
        /// The last failure to deliver, until the next success.
        package var lastError: String?
    }

    /// Events read from the outbox at a time.
    package let batchSize: Int
    package let pollInterval: Double
    package let backoff: ReconnectBackoff

    /// `cursor` is where the sink's place is kept: by default its row in `sink_cursors`. `worker` is where its
    /// store work runs: by default a `geofence.sink` thread of its own.
    package init(
        sink: any EventSink, store: StateStore, logger: Logger, cursor: (any SinkCursor)? = nil,
        batchSize: Int = 2_000, pollInterval: Double = 1,
        backoff: ReconnectBackoff = ReconnectBackoff(base: 0.05, cap: 1), worker: StoreWorker? = nil
    ) {
        self.sink = sink
        self.store = store
        self.place = cursor ?? StoredSinkCursor(store: store, id: sink.id)
        self.worker = worker ?? StoreWorker(name: "geofence.sink")
        self.logger = logger
        self.batchSize = batchSize
        self.pollInterval = pollInterval
        self.backoff = backoff
    }

    /// New events were committed.
    package func wake() { bell.ring() }

    /// While Location Services are off, region events (they carry positions) are held back: the runner
    /// delivers up to the first one and waits. State events before it still go.
    package func setLocationPaused(_ on: Bool) {
        paused.store(on, ordering: .releasing)
        bell.ring()
    }

    package var statistics: Counters { counters.withLock { $0 } }

    /// Delivers until the task is cancelled, then closes the sink.
    package func run() async {
        defer { worker.finish() }
        var opened = false
        var failures = 0
        var cursor: Int64?
        var told: String?
        // A receiver that refuses or cannot be reached is asked again more slowly than one that is connected
        // and only has to come back (the sink reconnects by itself; the runner just looks).
        let openingBackoff = ReconnectBackoff(base: 0.5, cap: 10)
        func failed(_ why: String, opening: Bool = false) async {
            // Stopping: what was cut short is not a failure to report.
            if Task.isCancelled { return }
            counters.withLock { $0.lastError = why }
            if told != why { logger.warning("sink \(sink.id): \(why); retrying") }
            told = why
            failures += 1
            let schedule = opening ? openingBackoff : backoff
            await bell.wait(seconds: schedule.delay(forAttempt: failures, unit: .random(in: 0.5...1)))
        }
        while !Task.isCancelled {
            if !opened {
                do {
                    try await sink.open()
                    opened = true
                    failures = 0
                } catch {
                    await failed("\(error)", opening: true)
                    continue
                }
            }
            let batch: [StoredEvent]
            do {
                let (place, outbox, batchSize) = (self.place, store.outbox, self.batchSize)
                let from: Int64
                (from, batch) = try await worker.run { [cursor] in
                    let from = try cursor ?? place.position()
                    return (from, try outbox.events(after: from, limit: batchSize))
                }
                cursor = from
                counters.withLock { $0.cursor = from }
            } catch {
                await failed("cannot read the outbox: \(error)")
                continue
            }
            guard let from = cursor, !batch.isEmpty else {
                await bell.wait(seconds: pollInterval)
                continue
            }
            // Held back while Location Services are off: everything from the first region event on.
            var offered = batch[...]
            if paused.load(ordering: .acquiring),
                let held = batch.firstIndex(where: {
                    RegionEventType.carriesPosition(type: $0.type, region: $0.region)
                })
            {
                offered = batch[..<held]
            }
            guard let lastOffered = offered.last else {
                await bell.wait(seconds: pollInterval)
                continue
            }
            let taken = offered.filter { sink.accepts(eventType: $0.type) }
            var reached = lastOffered.seq
            if !taken.isEmpty {
                do {
                    let acknowledged = try await sink.deliver(taken)
                    if acknowledged < taken.count { reached = taken[max(0, acknowledged)].seq - 1 }
                    counters.withLock { $0.delivered += max(0, acknowledged) }
                } catch {
                    await failed("\(error)")
                    continue
                }
            }
            if reached > from {
                do {
                    let place = self.place
                    try await worker.run { [reached] in try place.advance(to: reached) }
                    cursor = reached
                    counters.withLock {
                        $0.cursor = reached
                        $0.lastError = nil
                    }
                    if told != nil { logger.notice("sink \(sink.id): delivering again") }
                    told = nil
                    failures = 0
                } catch {
                    // Delivered but not recorded: offered again (duplicates, never a loss).
                    await failed("cannot record the cursor: \(error)")
                }
            } else if !Task.isCancelled {
                await failed(sink.health.problem ?? "no event acknowledged")
            }
        }
        await sink.close()
    }
}

/// A wake-up for an async loop: `ring()` ends the current (or the next) `wait`.
final class Doorbell: Sendable {
    private let state = Mutex<(rung: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    func ring() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            defer { s.waiter = nil }
            if s.waiter == nil { s.rung = true }
            return s.waiter
        }
        waiter?.resume()
    }

    /// Until rung, cancelled, or `seconds` have passed.
    func wait(seconds: Double) async {
        let timer = Task {
            // Cancelled (the wait ended first): no ring, or every next wait would return at once.
            guard (try? await Task.sleep(for: .seconds(seconds))) != nil else { return }
            self.ring()
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.rung || Task.isCancelled {
                        s.rung = false
                        return true
                    }
                    s.waiter = c
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            self.ring()
        }
        // A ring after the wake (the timer's, late) only makes the next wait return at once: harmless.
        timer.cancel()
    }
}
