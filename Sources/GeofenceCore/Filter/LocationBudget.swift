/// Answers "give me a location good enough, within this time": the accuracy-and-time budget.
///
/// The caller feeds it filtered fixes and the monotonic time; the budget decides. It returns the first
/// fix that meets the target; at the deadline it returns the best fix so far labelled coarse; with no
/// usable fix at all it fails as silent. Pure: time is passed in.
public struct LocationBudget: Sendable {
    /// Accuracy (metres) a fix must reach to end the wait at once.
    public var targetAccuracy: Double
    /// How long to wait, in seconds from `start`.
    public var timeout: Double
    /// Fixes older than this (seconds, fix time against wall clock at receipt) are not usable at all.
    public var maxAge: Double

    public let start: Double
    public private(set) var best: WeightedFix?
    public private(set) var outcome: Outcome?

    /// How a budget ended.
    public enum Outcome: Sendable, Equatable {
        /// A fix met the target accuracy.
        case met(WeightedFix)
        /// The deadline passed; this is the best fix seen, which did not meet the target.
        case coarse(WeightedFix)
        /// The deadline passed with no usable fix at all.
        case silent
    }

    /// - Parameters:
    ///   - start: monotonic seconds at which the wait began.
    public init(targetAccuracy: Double, timeout: Double, maxAge: Double, start: Double) {
        self.targetAccuracy = targetAccuracy
        self.timeout = timeout
        self.maxAge = maxAge
        self.start = start
    }

    /// Monotonic time at which the budget runs out.
    public var deadline: Double { start + timeout }

    /// Offers a fix that passed the filter. Returns the outcome if this fix ended the wait.
    @discardableResult
    public mutating func offer(_ fix: WeightedFix, now: Double) -> Outcome? {
        if let outcome { return outcome }
        if now >= deadline { return expire(now: now) }
        if let received = fix.fix.receivedAt, received.timeIntervalSince(fix.time) > maxAge { return nil }
        if best == nil || fix.accuracy < best!.accuracy { best = fix }
        if fix.accuracy <= targetAccuracy {
            outcome = .met(fix)
        }
        return outcome
    }

    /// Ends the wait if the deadline has passed. Returns the outcome once it is known.
    @discardableResult
    public mutating func expire(now: Double) -> Outcome? {
        if let outcome { return outcome }
        guard now >= deadline else { return nil }
        outcome = best.map { .coarse($0) } ?? .silent
        return outcome
    }
}
