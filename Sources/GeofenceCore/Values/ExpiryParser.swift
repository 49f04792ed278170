import Foundation

/// Parses an expiry given either as a duration from now (`2h`, `1d12h`) or as a timestamp
/// (`2027-01-01T00:00:00Z`), as `--expires` accepts it.
///
/// `now` is passed in, never read here, so the result is reproducible. Whether an expiry in the
/// past is acceptable is the caller's decision.
package enum ExpiryParser {
    /// Text that starts with a four-digit year and a dash is a timestamp; anything else a duration.
    package static func parse(_ text: String, now: Date) throws(ValueError) -> Date {
        let bytes = Array(text.utf8.prefix(5))
        let looksLikeDate = bytes.count == 5 && bytes[..<4].allSatisfy(\.isASCIIDigit) && bytes[4] == UInt8(ascii: "-")
        let accepted =
            "expected a duration from now (like 2h or 1d12h) or a timestamp (like 2027-01-01T00:00:00Z)"
        if looksLikeDate { return try TimestampParser.parse(text, accepted: accepted) }
        return now.addingTimeInterval(try DurationParser.parse(text, accepted: accepted))
    }
}
