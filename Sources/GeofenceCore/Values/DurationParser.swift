/// Parses and formats lengths of time given as text: `90s`, `5m`, `1h30m`, `2d`, `500ms`,
/// `1.5h`, a bare number of seconds (`30`), or ISO 8601 (`PT5M`, `P1DT12H`).
///
/// Durations are plain `Double` seconds throughout the engine (dwell times, expiry, timeouts):
/// they are added to `Date`s and compared with fix-time differences, both of which are
/// `TimeInterval`. Parsing is exact for whole milliseconds: `parse(format(x)) == x`.
package enum DurationParser {
    /// The longest duration accepted: 100 years, far beyond any dwell time or expiry, and small
    /// enough that adding it to any plausible date stays finite and formattable.
    package static let maximumSeconds: Double = 36_525 * 86_400

    static let accepted = "expected a duration like 90s, 5m, 1h30m, 2d, 500ms or 1.5h (a bare number is seconds)"

    private static let units: [(name: String, milliseconds: Double)] = [
        ("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1),
    ]

    /// Parses a duration into seconds, zero or more. Compact units must go from largest to
    /// smallest, each at most once (`1h30m`, not `30m1h`), so a typo like `5m5m` is caught.
    package static func parse(_ text: String) throws(ValueError) -> Double {
        try parse(text, accepted: accepted)
    }

    /// `accepted` ends messages about malformed text, so a caller accepting more than
    /// durations (an expiry) can say so.
    static func parse(_ text: String, accepted: String) throws(ValueError) -> Double {
        let bytes = Array(text.utf8)
        guard let first = bytes.first else {
            throw ValueError("empty duration; \(accepted)")
        }
        if first == UInt8(ascii: "-") {
            throw ValueError("duration '\(text)' is negative; \(accepted)")
        }
        var unsigned = Substring(text.lowercased())
        if unsigned.first == "+" { unsigned = unsigned.dropFirst() }
        if unsigned == "nan" || unsigned == "inf" || unsigned == "infinity" {
            throw ValueError("duration '\(text)' is not a finite number; \(accepted)")
        }
        let milliseconds: Double
        if first == UInt8(ascii: "P") || first == UInt8(ascii: "p") {
            milliseconds = try parseISO(bytes, text: text, accepted: accepted)
        } else {
            milliseconds = try parseCompact(bytes, text: text, accepted: accepted)
        }
        let seconds = milliseconds / 1000
        guard seconds <= maximumSeconds else {
            throw ValueError("duration '\(text)' is too long; the maximum is 36525d (100 years)")
        }
        return seconds
    }

    /// Formats seconds canonically with units from days down to milliseconds: `5400` → `1h30m`,
    /// `0.5` → `500ms`, `0` → `0s`. Sub-millisecond parts appear as a fraction of `ms`, to the
    /// microsecond. Negative values get a leading `-`; non-finite ones print as `inf`/`nan`.
    package static func format(_ seconds: Double) -> String {
        guard seconds.isFinite else { return seconds.isNaN ? "nan" : (seconds < 0 ? "-inf" : "inf") }
        if seconds < 0 { return "-" + format(-seconds) }
        let totalMicroseconds = (seconds * 1_000_000).rounded()
        guard totalMicroseconds < 9e18 else { return displayNumber(seconds) + "s" }
        var rest = Int64(totalMicroseconds)
        var text = ""
        for (name, unitMs) in units.dropLast() {
            let unit = Int64(unitMs) * 1000
            let count = rest / unit
            rest -= count * unit
            if count > 0 { text += "\(count)\(name)" }
        }
        if rest > 0 {
            let ms = rest / 1000
            let micros = rest % 1000
            if micros == 0 {
                text += "\(ms)ms"
            } else {
                var fraction = String(micros)
                fraction = String(repeating: "0", count: 3 - fraction.count) + fraction
                while fraction.hasSuffix("0") { fraction.removeLast() }
                text += "\(ms).\(fraction)ms"
            }
        }
        return text.isEmpty ? "0s" : text
    }

    /// `1h30m`, `500ms`, `1.5h`, or a bare number of seconds. Returns milliseconds.
    private static func parseCompact(_ bytes: [UInt8], text: String, accepted: String) throws(ValueError) -> Double {
        var i = 0
        var total: Double = 0
        var lastRank = -1
        while i < bytes.count {
            guard let number = scanNumber(bytes, &i) else {
                let bad = String(decoding: bytes[i...].prefix(1), as: UTF8.self)
                throw ValueError("unexpected '\(bad)' in duration '\(text)'; \(accepted)")
            }
            let unitStart = i
            while i < bytes.count && bytes[i].isASCIILetter { i += 1 }
            if unitStart == i {
                guard i == bytes.count, lastRank < 0 else {
                    if i == bytes.count {
                        throw ValueError("duration '\(text)' ends in a number without a unit; \(accepted)")
                    }
                    let bad = String(decoding: bytes[i...].prefix(1), as: UTF8.self)
                    throw ValueError("unexpected '\(bad)' in duration '\(text)'; \(accepted)")
                }
                return number * 1000
            }
            let unit = String(decoding: bytes[unitStart..<i], as: UTF8.self)
            guard let rank = units.firstIndex(where: { $0.name == unit }) else {
                throw ValueError("unknown unit '\(unit)' in duration '\(text)'; units are d, h, m, s and ms")
            }
            guard rank > lastRank else {
                throw ValueError(
                    "units in duration '\(text)' must go from largest to smallest, each once (d, h, m, s, ms)")
            }
            lastRank = rank
            total += number * units[rank].milliseconds
        }
        return total
    }

    /// `P[nW][nD][T[nH][nM][nS]]`, case-insensitive; years and months are refused because
    /// their length varies. Returns milliseconds.
    private static func parseISO(_ bytes: [UInt8], text: String, accepted: String) throws(ValueError) -> Double {
        let invalid = ValueError(
            "'\(text)' is not an ISO 8601 duration; expected a form like PT5M, PT1H30M or P2D, or \(accepted)")
        let dateUnits: [UInt8: Double] = [UInt8(ascii: "W"): 604_800_000, UInt8(ascii: "D"): 86_400_000]
        let timeUnits: [UInt8: Double] = [
            UInt8(ascii: "H"): 3_600_000, UInt8(ascii: "M"): 60_000, UInt8(ascii: "S"): 1_000,
        ]
        let order: [UInt8] = Array("WDTHMS".utf8)
        var i = 1
        var total: Double = 0
        var inTime = false
        var components = 0
        var lastOrder = -1
        while i < bytes.count {
            let upper = bytes[i] & ~0x20
            if upper == UInt8(ascii: "T") && bytes[i].isASCIILetter {
                guard !inTime else { throw invalid }
                inTime = true
                lastOrder = 2
                i += 1
                guard i < bytes.count else { throw invalid }
                continue
            }
            guard let number = scanNumber(bytes, &i, allowComma: true), i < bytes.count else { throw invalid }
            let designator = bytes[i] & ~0x20
            i += 1
            if !inTime && (designator == UInt8(ascii: "Y") || designator == UInt8(ascii: "M")) {
                throw ValueError(
                    "duration '\(text)' uses years or months, which have no fixed length; use days, like P30D")
            }
            guard let unit = (inTime ? timeUnits : dateUnits)[designator],
                let position = order.firstIndex(of: designator), position > lastOrder
            else { throw invalid }
            lastOrder = position
            total += number * unit
            components += 1
        }
        guard components > 0 else { throw invalid }
        return total
    }

    /// Scans `digits [. digits]` at `i`; nil (and `i` unchanged) when there is no number. A point
    /// not followed by a digit is left unconsumed, so the caller reports it.
    private static func scanNumber(_ bytes: [UInt8], _ i: inout Int, allowComma: Bool = false) -> Double? {
        let start = i
        var j = i
        while j < bytes.count && bytes[j].isASCIIDigit { j += 1 }
        guard j > start else { return nil }
        var digits = Array(bytes[start..<j])
        if j + 1 < bytes.count && bytes[j + 1].isASCIIDigit
            && (bytes[j] == UInt8(ascii: ".") || (allowComma && bytes[j] == UInt8(ascii: ",")))
        {
            digits.append(UInt8(ascii: "."))
            j += 1
            while j < bytes.count && bytes[j].isASCIIDigit {
                digits.append(bytes[j])
                j += 1
            }
        }
        i = j
        return Double(String(decoding: digits, as: UTF8.self))
    }
}
