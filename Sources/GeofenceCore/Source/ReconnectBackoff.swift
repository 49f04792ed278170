import Foundation

/// How long to wait before reconnecting: exponential backoff with full jitter.
///
/// Retry `n` (0-based) waits a uniformly random time in `[0, min(cap, base · 2ⁿ)]`; the
/// randomness keeps many boxes that lost the same gpsd (or a gpsd restarted under systemd)
/// from reconnecting in lockstep. The random number is passed in, so schedules are testable.
public struct ReconnectBackoff: Sendable, Equatable {
    /// The ceiling of the first retry's delay, seconds.
    public var base: Double
    /// The largest delay ever, seconds.
    public var cap: Double

    public init(base: Double = 0.5, cap: Double = 30) {
        self.base = max(0, base)
        self.cap = max(0, cap)
    }

    /// The largest delay retry `attempt` (0-based) may wait: `min(cap, base · 2^attempt)`.
    public func ceiling(forAttempt attempt: Int) -> Double {
        let exponent = Double(min(max(attempt, 0), 1024))
        return min(cap, base * pow(2, exponent))
    }

    /// The delay before retry `attempt`; `unit` is a random number in `[0, 1]` (clamped).
    public func delay(forAttempt attempt: Int, unit: Double) -> Double {
        let fraction = unit.isFinite ? min(max(unit, 0), 1) : 1
        return fraction * ceiling(forAttempt: attempt)
    }
}
