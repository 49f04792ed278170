/// Answers "give me a location good enough, within this time": the accuracy-and-time budget.
///
/// The caller feeds it filtered fixes and the monotonic time; the budget decides. It returns the first
/// fix that meets the target; at the deadline it returns the best fix so far labelled coarse; with no
/// usable fix at all it fails as silent. Pure: time is passed in.
package struct LocationBudget: Sendable {
    /// Accuracy (metres) a fix must reach to end the wait at once.
    package var targetAccuracy: Double
    /// How long to wait, in seconds from `start`.
    package var timeout: Double
    /// Fixes older than this (seconds, fix time against wall clock at receipt) are not usable at all.
    package var maxAge: Double

    package let start: Double
    package private(set) var best: WeightedFix?
    package private(set) var outcome: Outcome?

    /// How a budget ended.
    package enum Outcome: Sendable, Equatable {
        /// A fix met the target accuracy.
        case met(WeightedFix)
        /// The deadline passed; this is the best fix seen, which did not meet the target.
        case coarse(WeightedFix)
        /// The deadline passed with no usable fix at all.
        case silent
    }

    /// - Parameters:
    ///   - start: monotonic seconds at which the wait began.
    package init(targetAccuracy: Double, timeout: Double, maxAge: Double, start: Double) {
        self.targetAccuracy = targetAccuracy
        self.timeout = timeout
        self.maxAge = maxAge
        self.start = start
    }

    /// Monotonic time at which the budget runs out.
    package var deadline: Double { start + timeout }

    /// Offers a fix that passed the filter. Returns the outcome if this fix ended the wait.
    @discardableResult
    package mutating func offer(_ fix: WeightedFix, now: Double) -> Outcome? {
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
    package mutating func expire(now: Double) -> Outcome? {
        if let outcome { return outcome }
        guard now >= deadline else { return nil }
        outcome = best.map { .coarse($0) } ?? .silent
        return outcome
    }
}
