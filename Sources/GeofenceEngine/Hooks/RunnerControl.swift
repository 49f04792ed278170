import Foundation
import GeofenceStore

/// The scheduler thread's doorbell: wake-ups, stop requests and finished hooks, under one lock.
final class RunnerControl: @unchecked Sendable {
    // @unchecked: every field is read and written only under `condition`'s lock.
    private let condition = NSCondition()
    private var woken = false
    private var stopRequested = false
    private var finishRequested = false
    private var inputEnded = false
    private var finished: [(claim: ClaimedDelivery, result: HookProcessResult)] = []
    private var created: [DeliveryHead] = []
    private var dispatchedThrough: Int64?
    private var stats = HookRunnerStatistics()

    struct Signal {
        var woken: Bool
        var stop: Bool
        /// A graceful stop was asked for (`HookRunner.finish`).
        var finishing: Bool
        var finished: [(claim: ClaimedDelivery, result: HookProcessResult)]
        /// Deliveries the dispatcher made since the last wait, and the last event seq it dispatched (nil: none).
        var created: [DeliveryHead]
        var dispatchedThrough: Int64?
    }

    func beginSession() {
        condition.withLock {
            stopRequested = false
            woken = true
            created.removeAll()
            dispatchedThrough = nil
        }
    }

    func endInput() {
        condition.withLock {
            inputEnded = true
            woken = true
            condition.signal()
        }
    }

    var inputHasEnded: Bool { condition.withLock { inputEnded } }

    /// After a `drainAfterInput` session (not at its start: `inputEnded()` may come before the session starts).
    func resetInput() {
        condition.withLock { inputEnded = false }
    }

    func wake() {
        condition.withLock {
            woken = true
            condition.signal()
        }
    }

    /// The graceful stop is done: a later session of the same runner runs normally.
    func endFinish() {
        condition.withLock { finishRequested = false }
    }

    func requestFinish() {
        condition.withLock {
            finishRequested = true
            woken = true
            condition.signal()
        }
    }

    /// The dispatcher committed the deliveries of the events up to `through`.
    func dispatched(_ heads: [DeliveryHead], through: Int64) {
        condition.withLock {
            created += heads
            dispatchedThrough = max(dispatchedThrough ?? 0, through)
            woken = true
            condition.signal()
        }
    }

    func requestStop() {
        condition.withLock {
            stopRequested = true
            condition.signal()
        }
    }

    func started() {
        condition.withLock {
            stats.started += 1
            stats.running += 1
            stats.maxConcurrent = max(stats.maxConcurrent, stats.running)
        }
    }

    func complete(_ claim: ClaimedDelivery, _ result: HookProcessResult) {
        condition.withLock {
            stats.running -= 1
            if result.succeeded {
                stats.delivered += 1
            } else if result.interrupted {
                stats.interrupted += 1
            } else {
                stats.failed += 1
            }
            finished.append((claim, result))
            condition.signal()
        }
    }

    /// Counts a delivery given up (the scheduler decides that, not the hook).
    func gaveUp() {
        condition.withLock { stats.dead += 1 }
    }

    var statistics: HookRunnerStatistics { condition.withLock { stats } }

    /// Waits until something happens or `seconds` have passed (nil: do not wait), then takes what happened.
    /// The runner computes `seconds` from its clock; the condition's own timer is the system's.
    func wait(seconds: Double?, ignoringStop: Bool = false) -> Signal {
        condition.lock()
        defer { condition.unlock() }
        let deadline = seconds.map { Date(timeIntervalSinceNow: max(0, $0)) }
        while !woken && finished.isEmpty && (ignoringStop || !stopRequested), let deadline {
            if !condition.wait(until: deadline) { break }
        }
        let signal = Signal(
            woken: woken, stop: stopRequested, finishing: finishRequested, finished: finished, created: created,
            dispatchedThrough: dispatchedThrough)
        woken = false
        finished.removeAll(keepingCapacity: true)
        created.removeAll(keepingCapacity: true)
        dispatchedThrough = nil
        return signal
    }
}
