import Foundation

/// Why fixes arrive and none is used, in words an operator can act on: a receiver whose clock is 15 days
/// behind is not a receiver without sky. Made from the filter's refusals since the last accepted fix (the
/// most frequent reason speaks) and, for time refusals, how far the last refused fix's time was from its
/// receipt.
package struct RefusalAdvice: Sendable, Equatable {
    /// The reason most of the fixes were refused for.
    package var reason: FixRejection
    /// How many were refused, for that reason and in all.
    package var count: Int
    package var total: Int
    /// "fixes arrive but are 15 days old: check the receiver's clock or gpsd's time".
    package var text: String

    /// Nil when nothing was refused. `age`: the last refused fix's receipt minus its own time (seconds;
    /// negative for a fix dated ahead of the clock), when known.
    package init?(refused: [FixRejection: Int], age: Double?) {
        guard
            let (reason, count) = refused.filter({ $0.value > 0 }).max(by: {
                ($0.value, $1.key.rawValue) < ($1.value, $0.key.rawValue)
            })
        else { return nil }
        self.reason = reason
        self.count = count
        total = refused.values.reduce(0, +)
        var words: String
        switch reason {
        case .stale:
            words =
                "fixes arrive but are \(age.map { Self.span(abs($0)) + " " } ?? "too ")old: "
                + "check the receiver's clock or gpsd's time"
        case .future:
            words =
                "fixes arrive dated \(age.map { Self.span(abs($0)) + " " } ?? "")ahead of this machine's clock: "
                + "check the receiver's clock or this machine's (timedatectl)"
        case .tooInaccurate:
            words =
                "fixes arrive but none is accurate enough (--max-accuracy): the receiver may have a poor view of the sky"
        case .noFix:
            words = "the receiver reports but has no fix (mode 1): it may have no view of the sky"
        case .noTime:
            words = "fixes arrive without a time: the receiver has not sent a date yet"
        case .invalidCoordinates, .nullIsland:
            words = "fixes arrive without a valid position (\(reason.label))"
        case .implausibleJump:
            words =
                "fixes arrive but jump further than any vehicle moves: a receiver that lies, or two that share a name"
        case .duplicate, .outOfOrder:
            words = "fixes arrive but repeat or go back in time (\(reason.label)): two receivers that share a name?"
        }
        words += count == total ? " (all \(total) refused)" : " (\(count) of \(total) refused)"
        text = words
    }

    /// "15 days", "3 h", "12 min", "40 s": the largest unit that fits, whole.
    static func span(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "far" }
        if seconds >= 2 * 86_400 { return "\(Int(min(seconds / 86_400, 1e9))) days" }
        if seconds >= 2 * 3600 { return "\(Int(seconds / 3600)) h" }
        if seconds >= 120 { return "\(Int(seconds / 60)) min" }
        return "\(Int(seconds)) s"
    }
}
