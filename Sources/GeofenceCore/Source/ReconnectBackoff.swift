import Foundation

/// How long to wait before trying again: exponential backoff with jitter, for every retry there is
/// (reconnecting to gpsd, a hook's failed delivery, the reconciler's failed regions).
///
/// Retry `n` (0-based) waits up to `min(cap, base · multiplierⁿ)`, drawn at random (full jitter by
/// default); the randomness keeps many boxes that lost the same gpsd (or a gpsd restarted under systemd),
/// or many deliveries that failed together, from trying again in lockstep. The random number is passed in,
/// so schedules are testable.
public struct ReconnectBackoff: Sendable, Equatable {
    /// How the delay is drawn below its ceiling.
    public enum Jitter: String, Sendable, Equatable, CaseIterable {
        /// Exactly the ceiling: predictable, for tests.
        case none
        /// Between half the ceiling and the ceiling.
        case equal
        /// Between zero and the ceiling.
        case full
    }

    /// The ceiling of the first retry's delay, seconds.
    public var base: Double
    /// The largest delay ever, seconds.
    public var cap: Double
    /// Each ceiling is this many times the one before (at least 1).
    public var multiplier: Double
    /// How each delay is drawn below its ceiling (`full` by default).
    public var jitter: Jitter

    /// A backoff from `base` seconds, multiplied by `multiplier` per retry up to `cap` seconds; a negative
    /// `base` or `cap` counts as 0, a `multiplier` below 1 as 1.
    public init(base: Double = 0.5, cap: Double = 30, multiplier: Double = 2, jitter: Jitter = .full) {
        self.base = max(0, base)
        self.cap = max(0, cap)
        self.multiplier = max(1, multiplier)
        self.jitter = jitter
    }

    /// The largest delay retry `attempt` (0-based) may wait: `min(cap, base · multiplier^attempt)`.
    public func ceiling(forAttempt attempt: Int) -> Double {
        let delay = base * pow(multiplier, Double(max(attempt, 0)))
        return delay.isFinite ? min(cap, delay) : cap
    }

    /// The delay before retry `attempt`; `unit` is a random number in `[0, 1]` (clamped).
    public func delay(forAttempt attempt: Int, unit: Double) -> Double {
        let fraction = unit.isFinite ? min(max(unit, 0), 1) : 1
        let ceiling = ceiling(forAttempt: attempt)
        switch jitter {
        case .none: return ceiling
        case .equal: return ceiling / 2 + ceiling / 2 * fraction
        case .full: return fraction * ceiling
        }
    }
}
