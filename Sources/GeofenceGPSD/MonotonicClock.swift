/// Seconds on a monotonic clock since the clock was made: for watchdogs and retries only,
/// never for decisions about fixes (those run on fix time).
public struct MonotonicClock: Sendable {
    private let origin = ContinuousClock.now

    public init() {}

    public var now: Double {
        let elapsed = ContinuousClock.now - origin
        let (seconds, attoseconds) = elapsed.components
        return Double(seconds) + Double(attoseconds) * 1e-18
    }
}
