import Foundation

/// Parses RFC 3339 / ISO 8601 timestamps and formats dates as `2026-11-30T14:03:07.000Z`, by
/// hand: `ISO8601DateFormatter` is slow and locale-sensitive on Linux, and every event carries
/// a time, so formatting is on the hot path.
///
/// Accepted: `2027-01-01T00:00:00Z`, a fraction of any length (`…07.5Z`, gpsd's `…07.000Z`),
/// an offset (`+02:00`, `+0200`, `+02`, `-05:30`), `t` or a space for `T`, `z` for `Z`, seconds
/// omitted (`2027-01-01T12:00Z`), and a date alone (`2027-01-01`, midnight UTC). A date-time
/// without a zone is refused: it would silently mean different instants on different machines.
///
/// A leap second (`23:59:60` UTC) is accepted and held at `23:59:59.999`, so times stay ordered
/// and inside the day; a `:60` at any other minute is refused. Instants outside the years 0000-9999
/// in UTC (which an offset can reach from 0000-01-01 or 9999-12-31) are refused too.
package enum TimestampParser {
    static let accepted = "expected a timestamp like 2027-01-01T00:00:00Z, 2027-01-01T02:00:00.5+02:00 or 2027-01-01"

    /// Parses a timestamp into a `Date`.
    package static func parse(_ text: String) throws(ValueError) -> Date {
        try parse(text, accepted: accepted)
    }

    /// `accepted` ends the message about malformed text, so a caller accepting more than
    /// timestamps (an expiry) can say so.
    static func parse(_ text: String, accepted: String) throws(ValueError) -> Date {
        var copy = text
        let result: Result<Double, ValueError> = copy.withUTF8 { parseBytes($0, text: text, accepted: accepted) }
        let seconds = try result.get()
        // An offset or a fraction can carry 0000-01-01 or 9999-12-31 across the edge; `format` would
        // write such an instant in the expanded form (`-0001-…`), which this does not read back.
        guard representable.contains((seconds * 1000).rounded() / 1000) else {
            throw ValueError("'\(text)' is outside the years 0000 to 9999 in UTC")
        }
        return Date(timeIntervalSince1970: seconds)
    }

    /// Seconds since 1970 for the timestamp in `bytes` (UTF-8), read as `parse` reads it (the same rules, the
    /// same range) without a `String` or a `Date`: nil for anything `parse` refuses, whose error says why.
    package static func seconds(utf8 bytes: UnsafeBufferPointer<UInt8>) -> Double? {
        if let seconds = commonSeconds(bytes) { return seconds }
        guard case .success(let seconds) = parseBytes(bytes, text: "", accepted: accepted),
            representable.contains((seconds * 1000).rounded() / 1000)
        else { return nil }
        return seconds
    }

    /// `seconds(utf8:)` for the shape nearly every receiver and fleet sends, `2026-12-03T10:00:01.000Z` or
    /// `2026-12-03T10:00:01Z`, read at fixed places (a fleet line's time took a sixth of its decoding through
    /// the general reader); nil for anything else, and for any field out of its range or a leap second, which
    /// the general reader then reads or refuses with its own error. The value is the general reader's, worked
    /// out the same way.
    @inline(__always)
    private static func commonSeconds(_ b: UnsafeBufferPointer<UInt8>) -> Double? {
        let n = b.count
        guard n == 24 || n == 20 else { return nil }
        let zero = UInt8(ascii: "0")
        var notDigit = false
        @inline(__always) func digit(_ at: Int) -> Int {
            let d = b[at] &- zero
            notDigit = notDigit || d > 9
            return Int(d)
        }
        let year = digit(0) * 1000 + digit(1) * 100 + digit(2) * 10 + digit(3)
        let month = digit(5) * 10 + digit(6)
        let day = digit(8) * 10 + digit(9)
        let hour = digit(11) * 10 + digit(12)
        let minute = digit(14) * 10 + digit(15)
        let second = digit(17) * 10 + digit(18)
        var milliseconds = 0
        if n == 24 {
            milliseconds = digit(20) * 100 + digit(21) * 10 + digit(22)
            guard b[19] == UInt8(ascii: ".") else { return nil }
        }
        guard !notDigit, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] == UInt8(ascii: "T"),
            b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":"), b[n - 1] == UInt8(ascii: "Z"),
            (1...12).contains(month), day >= 1, day <= CivilCalendar.daysInMonth(year: year, month: month),
            hour <= 23, minute <= 59, second <= 59
        else { return nil }
        let days = CivilCalendar.daysFromCivil(year: year, month: month, day: day)
        // As `parseBytes` composes it: whole seconds, then the fraction in nanoseconds over 1e9.
        let fraction: Double = n == 24 ? Double(milliseconds * 1_000_000) / 1e9 : 0
        let seconds = Double(days * 86_400 + hour * 3600 + minute * 60 + second) + fraction
        // The years 0000-9999 with no offset are all representable, but the check is the general path's.
        guard representable.contains((seconds * 1000).rounded() / 1000) else { return nil }
        return seconds
    }

    /// The instants, in seconds since 1970, that `format` writes with a four-digit year (0000-9999 UTC).
    static let representable: Range<Double> = -62_167_219_200..<253_402_300_800

    /// Formats `date` in UTC with exactly three fraction digits, rounded to the nearest
    /// millisecond: `2026-11-30T14:03:07.000Z`. Years outside 0000-9999 get ISO 8601's expanded
    /// form (`+10000-…`, `-0001-…`); a non-finite date formats as the epoch.
    package static func format(_ date: Date) -> String {
        var seconds = date.timeIntervalSince1970
        if !seconds.isFinite { seconds = 0 }
        seconds = min(max(seconds, -1e14), 1e14)  // about ±3 million years; keeps Int64 safe
        let milliseconds = Int64((seconds * 1000).rounded())
        var days = milliseconds / 86_400_000
        var msOfDay = milliseconds - days * 86_400_000
        if msOfDay < 0 {
            days -= 1
            msOfDay += 86_400_000
        }
        let (year, month, day) = CivilCalendar.civilFromDays(Int(days))
        let ms = Int(msOfDay)
        let fields = (month, day, ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000)
        guard (0...9999).contains(year) else {
            let sign = year < 0 ? "-" : "+"
            let digits = String(abs(year))
            let padded = String(repeating: "0", count: max(0, 4 - digits.count)) + digits
            return sign + padded + String(format(fields, year: 0).dropFirst(4))
        }
        return format(fields, year: year)
    }

    private static func format(
        _ f: (month: Int, day: Int, hour: Int, minute: Int, second: Int, ms: Int), year: Int
    ) -> String {
        String(unsafeUninitializedCapacity: 24) { buffer in
            func put(_ value: Int, _ width: Int, at offset: Int) {
                var v = value
                for k in stride(from: offset + width - 1, through: offset, by: -1) {
                    buffer[k] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: v % 10)
                    v /= 10
                }
            }
            put(year, 4, at: 0)
            buffer[4] = UInt8(ascii: "-")
            put(f.month, 2, at: 5)
            buffer[7] = UInt8(ascii: "-")
            put(f.day, 2, at: 8)
            buffer[10] = UInt8(ascii: "T")
            put(f.hour, 2, at: 11)
            buffer[13] = UInt8(ascii: ":")
            put(f.minute, 2, at: 14)
            buffer[16] = UInt8(ascii: ":")
            put(f.second, 2, at: 17)
            buffer[19] = UInt8(ascii: ".")
            put(f.ms, 3, at: 20)
            buffer[23] = UInt8(ascii: "Z")
            return 24
        }
    }

    /// Seconds since 1970 for the timestamp in `b`.
    private static func parseBytes(
        _ b: UnsafeBufferPointer<UInt8>, text: String, accepted: String
    ) -> Result<Double, ValueError> {
        let n = b.count
        // Built only on failure: interpolating the message on every call would double the cost.
        var junk: ValueError { ValueError("'\(text)' is not a timestamp; \(accepted)") }

        func number(_ at: Int, _ width: Int) -> Int? {
            guard at + width <= n else { return nil }
            var value = 0
            for k in at..<(at + width) {
                guard b[k].isASCIIDigit else { return nil }
                value = value * 10 + Int(b[k] &- UInt8(ascii: "0"))
            }
            return value
        }
        func byte(_ at: Int) -> UInt8? { at < n ? b[at] : nil }

        guard let year = number(0, 4), byte(4) == UInt8(ascii: "-"), let month = number(5, 2),
            byte(7) == UInt8(ascii: "-"), let day = number(8, 2)
        else { return .failure(junk) }
        guard (1...12).contains(month) else {
            return .failure(ValueError("month \(month) is out of range (1-12) in '\(text)'"))
        }
        let monthLength = CivilCalendar.daysInMonth(year: year, month: month)
        guard day >= 1 && day <= monthLength else {
            let which = month == 2 ? "February \(year)" : "month \(month)"
            return .failure(ValueError("day \(day) is out of range for \(which) (1-\(monthLength)) in '\(text)'"))
        }
        let days = CivilCalendar.daysFromCivil(year: year, month: month, day: day)
        if n == 10 { return .success(Double(days) * 86_400) }

        guard let separator = byte(10),
            separator == UInt8(ascii: "T") || separator == UInt8(ascii: "t") || separator == UInt8(ascii: " "),
            let hour = number(11, 2), byte(13) == UInt8(ascii: ":"), let minute = number(14, 2)
        else { return .failure(junk) }
        var i = 16
        var second = 0
        var fraction: Double = 0
        if byte(i) == UInt8(ascii: ":") {
            guard let s = number(i + 1, 2) else { return .failure(junk) }
            second = s
            i += 3
            if byte(i) == UInt8(ascii: ".") || byte(i) == UInt8(ascii: ",") {
                i += 1
                let start = i
                var nanoseconds = 0
                while let d = byte(i), d.isASCIIDigit {
                    if i - start < 9 { nanoseconds = nanoseconds * 10 + Int(d &- UInt8(ascii: "0")) }
                    i += 1
                }
                guard i > start else { return .failure(junk) }
                for _ in min(i - start, 9)..<9 { nanoseconds *= 10 }
                fraction = Double(nanoseconds) / 1e9
            }
        }
        guard hour <= 23 else {
            return .failure(ValueError("hour \(hour) is out of range (0-23) in '\(text)'"))
        }
        guard minute <= 59 else {
            return .failure(ValueError("minute \(minute) is out of range (0-59) in '\(text)'"))
        }
        guard second <= 60 else {
            return .failure(ValueError("second \(second) is out of range (0-59) in '\(text)'"))
        }

        var offset = 0
        switch byte(i) {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            i += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            let sign = byte(i) == UInt8(ascii: "-") ? -1 : 1
            guard let offsetHours = number(i + 1, 2) else { return .failure(junk) }
            i += 3
            var offsetMinutes = 0
            if byte(i) == UInt8(ascii: ":") { i += 1 }
            if i < n {
                guard let m = number(i, 2) else { return .failure(junk) }
                offsetMinutes = m
                i += 2
            }
            guard offsetHours <= 23 && offsetMinutes <= 59 else {
                return .failure(ValueError("time zone offset in '\(text)' is out of range (-23:59 to +23:59)"))
            }
            offset = sign * (offsetHours * 3600 + offsetMinutes * 60)
        case nil:
            return .failure(
                ValueError("timestamp '\(text)' has no time zone; add Z for UTC or an offset like +02:00"))
        default:
            return .failure(junk)
        }
        guard i == n else { return .failure(junk) }

        let minuteStart = days * 86_400 + hour * 3600 + minute * 60 - offset
        if second == 60 {
            let utcMinuteOfDay = ((minuteStart % 86_400) + 86_400) % 86_400
            guard utcMinuteOfDay == 86_340 else {
                return .failure(
                    ValueError("second 60 in '\(text)' is only valid for a leap second, at 23:59:60 UTC"))
            }
            return .success(Double(minuteStart) + 59.999)
        }
        return .success(Double(minuteStart + second) + fraction)
    }
}
