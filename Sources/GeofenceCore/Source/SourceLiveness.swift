/// Is data actually arriving? The fourth question, as a pure state machine over monotonic time.
///
/// A source that is present, switched on and allowed can still stay quiet, and starting it
/// produces no error, only silence. So every (re)start has a deadline for the first usable fix,
/// and a running source has a staleness limit. Times are monotonic seconds passed in by the
/// caller (never read here), so tests drive it with plain numbers.
///
/// Transitions come in pairs: after `silent` or `lost` has been reported, nothing more is
/// reported until usable fixes are back (`restored`), so each episode is reported exactly once.
public struct SourceLiveness: Sendable, Equatable {
    /// The two time limits, in seconds.
    public struct Configuration: Sendable, Equatable {
        /// How long after a (re)start the first usable fix may take before the source is `silent`.
        public var firstFixDeadline: Double
        /// How long a running source may go without a usable fix before it is `lost`.
        public var stalenessLimit: Double

        /// The limits in seconds; the defaults (60 and 10) are `geofence run`'s.
        public init(firstFixDeadline: Double = 60, stalenessLimit: Double = 10) {
            self.firstFixDeadline = firstFixDeadline
            self.stalenessLimit = stalenessLimit
        }
    }

    /// What is reported to the rest of the engine (state events of type `source`).
    public enum Transition: String, Sendable, Hashable, CaseIterable {
        /// No usable fix by the first-fix deadline.
        case silent
        /// Usable fixes stopped arriving for the staleness limit, or the connection dropped.
        case lost
        /// Usable fixes are arriving again after `silent` or `lost`.
        case restored
    }

    /// Where the source stands; the times are the caller's monotonic seconds.
    public enum State: Sendable, Equatable {
        /// Started; no usable fix yet, and the first-fix deadline has not passed.
        case awaitingFirstFix(deadline: Double)
        /// Usable fixes are arriving; the last one came at `lastFixAt`.
        case receiving(lastFixAt: Double)
        /// No usable fix since the start, past the deadline.
        case silent(since: Double)
        /// Had fixes, then none for the staleness limit or the connection dropped.
        case lost(since: Double)
    }

    /// The two time limits it judges by.
    public let configuration: Configuration
    /// Where the source stands now, as of the last call.
    public private(set) var state: State
    /// True once `silent` or `lost` has been reported and `restored` has not.
    public private(set) var isOutageReported = false

    /// A source started at `now` (monotonic seconds): awaiting its first fix until `now + firstFixDeadline`.
    public init(configuration: Configuration = Configuration(), startedAt now: Double) {
        self.configuration = configuration
        self.state = .awaitingFirstFix(deadline: now + configuration.firstFixDeadline)
    }

    /// The source was (re)started: a new first-fix deadline runs from `now`.
    /// An outage already reported stays reported, so the next usable fix reports `restored`.
    public mutating func restart(at now: Double) {
        state = .awaitingFirstFix(deadline: now + configuration.firstFixDeadline)
    }

    /// A usable fix arrived at `now`.
    public mutating func usableFix(at now: Double) -> Transition? {
        state = .receiving(lastFixAt: now)
        if isOutageReported {
            isOutageReported = false
            return .restored
        }
        return nil
    }

    /// The connection to the source dropped at `now`. A running source is `lost` at once;
    /// one still waiting for its first fix keeps its deadline (reconnecting may yet deliver).
    public mutating func connectionDropped(at now: Double) -> Transition? {
        guard case .receiving = state else { return nil }
        return enterOutage(.lost(since: now))
    }

    /// Time has moved on to `now`: reports a deadline that has passed.
    public mutating func advance(to now: Double) -> Transition? {
        switch state {
        case .awaitingFirstFix(let deadline) where now >= deadline:
            return enterOutage(.silent(since: deadline))
        case .receiving(let lastFixAt) where now >= lastFixAt + configuration.stalenessLimit:
            return enterOutage(.lost(since: lastFixAt + configuration.stalenessLimit))
        default:
            return nil
        }
    }

    /// When `advance(to:)` next needs to be called; nil while in an outage (only a fix ends it).
    public var nextDeadline: Double? {
        switch state {
        case .awaitingFirstFix(let deadline): return deadline
        case .receiving(let lastFixAt): return lastFixAt + configuration.stalenessLimit
        case .silent, .lost: return nil
        }
    }

    /// True while usable fixes are arriving within the staleness limit.
    public var isReceiving: Bool {
        if case .receiving = state { return true }
        return false
    }

    private mutating func enterOutage(_ outage: State) -> Transition? {
        state = outage
        if isOutageReported { return nil }
        isOutageReported = true
        if case .silent = outage { return .silent }
        return .lost
    }
}
