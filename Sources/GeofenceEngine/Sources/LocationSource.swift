import Foundation
import GeofenceCore

/// Where the engine's fixes come from: gpsd, a stream of JSON lines, an MQTT subscription, or a source of an
/// embedder's own. The engine knows a source only through this protocol and `LocationReport`.
///
/// A source is started once, reports everything it has to say on `reports`, and is stopped once; after
/// `stop()` its `reports` end (buffered reports are still delivered first). A file source may also end
/// `reports` by itself, at the end of its input.
public protocol LocationSource: AnyObject, Sendable {
    /// For logs and `status`: where the fixes come from ("gpsd at 127.0.0.1:2947").
    var label: String { get }
    /// Everything the source has to say, in order, with back-pressure (`LocationReports.BackPressure`).
    var reports: LocationReports { get }
    /// Starts reading; returns at once.
    func start()
    /// Stops reading; `reports` end once what was already handed over is taken.
    func stop() async
    /// What the source knows of itself in its own terms, for `status` (nil: the engine asks nothing; gpsd's
    /// status is asked of gpsd by `geofence status` itself).
    var status: SourceStatus? { get }
}

extension LocationSource {
    /// nil: the source keeps no account of itself, and `status` shows only what the engine sees of it.
    public var status: SourceStatus? { nil }
}

/// A source's reports as an async sequence with back-pressure by watermarks (the shape of swift-nio's
/// `NIOAsyncSequenceProducer`): a producer that sends from a thread of its own waits once `high` reports
/// wait to be taken, until the consumer has taken them down to `low`. A faster producer is so held back
/// where it can wait (a pipe, a FIFO, a broker's in-flight window) instead of filling memory.
///
/// One consumer. Cancelling the consuming task ends the iteration (`next()` returns nil).
public final class LocationReports: AsyncSequence, @unchecked Sendable {
    // @unchecked: every field below is touched only with `condition` locked.
    /// Each element is one thing the source has to say.
    public typealias Element = LocationReport

    /// When a producer waits and when it goes on.
    public struct BackPressure: Sendable, Equatable {
        /// A producer that sends while this many reports wait, waits.
        public var high: Int
        /// ... until no more than this many wait.
        public var low: Int

        /// Watermarks counted in reports; traps unless `0 <= low < high`.
        public init(high: Int, low: Int) {
            precondition(high > 0 && low >= 0 && low < high, "watermarks need 0 <= low < high")
            self.high = high
            self.low = low
        }

        /// Sixteen reports (each up to a batch of fixes) in flight, producers go on at eight.
        public static let standard = BackPressure(high: 16, low: 8)
        /// Never waits: for producers that must not block (an async task, a socket with its own flow control).
        public static let unbounded = BackPressure(high: .max, low: .max - 1)
    }

    /// The watermarks `send` waits by.
    public let backPressure: BackPressure
    private let condition = NSCondition()
    /// Reports handed over, from `head` on; a slot taken is emptied at once, so a report is never kept alive
    /// after the consumer took it (a batch can hold hundreds of fixes).
    private var buffer: [LocationReport?] = []
    private var head = 0
    private var waiting: CheckedContinuation<LocationReport?, Never>?
    private var finished = false
    private var holding = false
    private var released = false

    /// An empty, open sequence; `standard` back-pressure (16 and 8) by default.
    public init(backPressure: BackPressure = .standard) {
        self.backPressure = backPressure
    }

    /// Reports handed over and not yet taken.
    public var pending: Int { condition.withLock { buffer.count - head } }

    /// Reports the sequence keeps alive: those not yet taken, and never one already taken.
    package var retained: Int { condition.withLock { buffer.count { $0 != nil } } }

    /// Whether `finish()` was called.
    public var isFinished: Bool { condition.withLock { finished } }

    /// Hands a report over; waits (blocking this thread) while `high` wait, until the consumer took them down
    /// to `low`. Returns false, dropping the report, once the sequence is finished.
    @available(
        *, noasync,
        message:
            "send blocks its thread while the consumer is behind: call it from a thread of the source's own, or use sendNow"
    )
    @discardableResult
    public func send(_ report: LocationReport) -> Bool {
        deliver(report, waits: true)
    }

    /// Hands a report over without waiting: news that must not wait behind fixes (liveness, connection), and
    /// producers that must not block.
    @discardableResult
    public func sendNow(_ report: LocationReport) -> Bool {
        deliver(report, waits: false)
    }

    /// No more reports: the consumer takes what is buffered (a waiting producer's report included), then the
    /// sequence ends. A producer waiting for room goes on.
    public func finish() {
        condition.lock()
        finished = true
        let consumer = waiting
        waiting = nil
        condition.broadcast()
        condition.unlock()
        consumer?.resume(returning: nil)
    }

    /// From now on no producer waits (the source is stopping): reports are still taken in, so nothing a
    /// producer already read (and perhaps acknowledged, as a broker's message) is lost before `finish()`.
    public func stopWaiting() {
        condition.lock()
        released = true
        condition.broadcast()
        condition.unlock()
    }

    private func deliver(_ report: LocationReport, waits: Bool) -> Bool {
        condition.lock()
        guard !finished else {
            condition.unlock()
            return false
        }
        if let consumer = waiting {
            waiting = nil
            condition.unlock()
            consumer.resume(returning: report)
            return true
        }
        buffer.append(report)
        if buffer.count - head >= backPressure.high { holding = true }
        while waits && holding && !finished && !released { condition.wait() }
        condition.unlock()
        return true
    }

    /// The next buffered report, or nil after registering `consumer` to be resumed with one (or with nil at
    /// the end). Synchronous, so the lock is never held across a suspension.
    private func take(orWait consumer: CheckedContinuation<LocationReport?, Never>) {
        condition.lock()
        if let report = takeLocked() {
            condition.unlock()
            consumer.resume(returning: report)
        } else if finished || Task.isCancelled {
            // Cancelled before this registered: the cancellation handler found no one to resume.
            condition.unlock()
            consumer.resume(returning: nil)
        } else {
            waiting = consumer
            condition.unlock()
        }
    }

    private func takeLocked() -> LocationReport? {
        guard head < buffer.count, let report = buffer[head] else { return nil }
        buffer[head] = nil
        head += 1
        if head == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= buffer.count {
            buffer.removeFirst(head)
            head = 0
        }
        if holding && buffer.count - head <= backPressure.low {
            holding = false
            condition.broadcast()
        }
        return report
    }

    private func cancelWaiting() {
        condition.lock()
        let consumer = waiting
        waiting = nil
        condition.unlock()
        consumer?.resume(returning: nil)
    }

    fileprivate func next() async -> LocationReport? {
        if Task.isCancelled { return nil }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { take(orWait: $0) }
        } onCancel: {
            cancelWaiting()
        }
    }

    /// Takes the reports in order; all iterators share the one sequence (one consumer at a time).
    public struct AsyncIterator: AsyncIteratorProtocol {
        fileprivate let reports: LocationReports
        /// The next report, waiting for one; nil once the sequence is finished and empty, or the task is
        /// cancelled.
        public mutating func next() async -> LocationReport? { await reports.next() }
    }

    /// An iterator over the reports not yet taken.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(reports: self) }
}
