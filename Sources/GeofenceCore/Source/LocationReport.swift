/// One thing a location source has to say, in the order it happened, in the engine's own terms: gpsd, a
/// stream of JSON lines and an MQTT subscription each map their own causes into these.
///
/// Failures are values, not thrown errors: a source that cannot reach its producer keeps retrying and keeps
/// reporting, and its sequence ends only when the source is stopped (or a file source reaches its end).
public enum LocationReport: Sendable, Equatable {
    /// The source reached what it reads from (gpsd, a file or FIFO, a broker) and asked for fixes.
    case up
    /// The source cannot read now; it says why and when it tries again.
    case down(SourceDown)
    /// What the hardware behind the source is and can report (first question); sent after each `up` and
    /// when a device comes, goes or shows it can report more. Sources that cannot tell send none.
    case capabilities(CapabilitySnapshot)
    /// One fix, exactly as the source read it (no filtering here: the engine judges it).
    case fix(Fix)
    /// Several fixes at once, in order: one hand-over per batch from a fast source.
    case fixes([Fix])
    /// Usable fixes stopped or resumed arriving (fourth question): the source's first-fix deadline and
    /// staleness limit (`SourceLiveness`).
    case liveness(SourceLiveness.Transition)
    /// Something worth a line in the log that changes nothing (gpsd's ERROR report, for one).
    case warning(String)
}

/// Why a source cannot read now, with a reason a person can act on, and when it tries again.
public struct SourceDown: Sendable, Equatable, CustomStringConvertible {
    /// The reason, in the source's own terms ("gpsd is not reachable at 127.0.0.1:2947 (connection
    /// refused): is it running? ...").
    public var reason: String
    /// Consecutive failed attempts so far, this one included.
    public var attempt: Int
    /// How long the source waits before its next attempt.
    public var retryIn: Duration

    /// A source that cannot read for `reason`, after `attempt` failed attempts (the first by default), and
    /// tries again in `retryIn`.
    public init(reason: String, attempt: Int = 1, retryIn: Duration) {
        self.reason = reason
        self.attempt = attempt
        self.retryIn = retryIn
    }

    /// The reason alone.
    public var description: String { reason }
}
