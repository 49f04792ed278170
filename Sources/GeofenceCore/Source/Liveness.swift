/// Whether usable fixes arrive (the fourth question), as one value from the source to `status`: the
/// source's watchdog (`SourceLiveness`), a fleet source's account of itself (`SourceStatus`), the engine's
/// health, its metrics and the settings `geofence status` reads all carry this, never its text. The raw
/// values are the words the JSON, the settings and the metrics labels show.
package enum Liveness: String, Sendable, Hashable, CaseIterable {
    /// Started; the first usable fix has not come (yet: the deadline has not passed).
    case awaitingFirstFix = "awaiting-first-fix"
    /// Usable fixes are arriving.
    case receiving
    /// No usable fix came before the first-fix deadline.
    case silent
    /// Usable fixes stopped arriving for longer than the staleness limit.
    case lost

    /// What a transition leaves: `restored` is `receiving` again.
    package init(after transition: SourceLiveness.Transition) {
        switch transition {
        case .silent: self = .silent
        case .lost: self = .lost
        case .restored: self = .receiving
        }
    }

    /// `silent` or `lost`: usable fixes do not arrive.
    package var isOutage: Bool { self == .silent || self == .lost }
}

extension SourceLiveness.State {
    /// The state without its times.
    package var liveness: Liveness {
        switch self {
        case .awaitingFirstFix: .awaitingFirstFix
        case .receiving: .receiving
        case .silent: .silent
        case .lost: .lost
        }
    }
}
