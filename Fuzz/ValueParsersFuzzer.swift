// fuzz-seeds: values
// fuzz-max-len: 4096

import Foundation
import GeofenceCore

/// Command-line values into the duration, timestamp, expiry, number and coordinate parsers: what
/// they accept is finite and in range, and formatted durations and timestamps parse back to the
/// same value within their documented precision. The input's first 8 bytes, read as a Double, also
/// go through `format` and back.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzValueParsers(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = fuzzInput(data, size)
    let text = String(decoding: bytes, as: UTF8.self)
    let now = Date(timeIntervalSince1970: 1_796_000_000)

    if let seconds = try? DurationParser.parse(text) {
        require(seconds.isFinite && seconds >= 0, "duration '\(text)' parsed as \(seconds)")
        require(seconds <= DurationParser.maximumSeconds, "duration '\(text)' is over the maximum: \(seconds)")
        checkDurationRoundTrip(seconds, from: text)
    }
    if let date = try? TimestampParser.parse(text) {
        checkTimestampRoundTrip(date, from: text)
    }
    if let expiry = try? ExpiryParser.parse(text, now: now) {
        require(expiry.timeIntervalSince1970.isFinite, "expiry '\(text)' is not finite")
        if let seconds = try? DurationParser.parse(text) {
            require(expiry == now.addingTimeInterval(seconds), "expiry '\(text)' is not now + the duration")
        } else {
            require((try? TimestampParser.parse(text)) == expiry, "expiry '\(text)' is neither form")
        }
    }
    checkNumbers(text)

    if bytes.count >= 8 {
        let raw = UnsafeRawBufferPointer(bytes).loadUnaligned(as: UInt64.self)
        let value = Double(bitPattern: UInt64(littleEndian: raw))
        if value.isFinite, value >= 0, value <= DurationParser.maximumSeconds {
            checkDurationRoundTrip(value, from: "bits \(raw)")
        }
        if value.isFinite, value >= firstInstant, (value * 1000).rounded() < endOfYear9999 * 1000 {
            checkTimestampRoundTrip(Date(timeIntervalSince1970: value), from: "bits \(raw)")
        }
        _ = DurationParser.format(value)
        _ = TimestampParser.format(Date(timeIntervalSince1970: value))
    }
    return 0
}

/// 0000-01-01T00:00:00Z and 10000-01-01T00:00:00Z: the instants `format` writes with a four-digit year.
private let firstInstant: Double = -62_167_219_200
private let endOfYear9999: Double = 253_402_300_800

/// `parse(format(x))` is `x` for whole milliseconds and within half a microsecond (format's unit)
/// otherwise; and formatting is stable.
private func checkDurationRoundTrip(_ seconds: Double, from source: String) {
    let text = DurationParser.format(seconds)
    do throws(ValueError) {
        let again = try DurationParser.parse(text)
        let wholeMilliseconds = (seconds * 1000).rounded() == seconds * 1000
        if wholeMilliseconds {
            require(again == seconds, "duration \(seconds) (from \(source)) formats as \(text), reads as \(again)")
        } else {
            require(
                nearlyEqual(again, seconds, within: 0.5e-6),
                "duration \(seconds) (from \(source)) formats as \(text), reads as \(again)")
        }
        require(DurationParser.format(again) == text, "format is not stable for \(seconds) (from \(source))")
    } catch {
        fatalError("duration \(seconds) (from \(source)) formats as \(text), which does not parse: \(error)")
    }
}

/// A parsed timestamp formats (to the millisecond) as text that parses back within half a millisecond.
private func checkTimestampRoundTrip(_ date: Date, from source: String) {
    let seconds = date.timeIntervalSince1970
    require(seconds.isFinite, "timestamp \(source) is not finite")
    let text = TimestampParser.format(date)
    do throws(ValueError) {
        let again = try TimestampParser.parse(text)
        require(
            nearlyEqual(again.timeIntervalSince1970, seconds, within: 0.0005),
            "timestamp \(seconds) (from \(source)) formats as \(text), reads as \(again.timeIntervalSince1970)")
        require(TimestampParser.format(again) == text, "format is not stable for \(seconds) (from \(source))")
    } catch {
        fatalError("timestamp \(seconds) (from \(source)) formats as \(text), which does not parse: \(error)")
    }
}

private func checkNumbers(_ text: String) {
    if let number = try? NumberParser.finite(text) {
        require(number.isFinite, "'\(text)' accepted as \(number)")
        require(Double(text) == number, "'\(text)' read as \(number), Double(_:) says otherwise")
    }
    if let integer = try? NumberParser.integer(text) {
        require(Int(text) == integer, "'\(text)' read as the integer \(integer)")
    }
    let latitude = try? CoordinateParser.latitude(text)
    if let latitude {
        require(latitude.isFinite && (-90...90).contains(latitude), "latitude '\(text)' accepted as \(latitude)")
    }
    let longitude = try? CoordinateParser.longitude(text)
    if let longitude {
        require(longitude.isFinite && (-180...180).contains(longitude), "longitude '\(text)' accepted as \(longitude)")
    }
    if let coordinate = try? CoordinateParser.coordinate(text) {
        require(coordinate.isValid, "coordinate '\(text)' accepted as \(coordinate)")
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        require(
            parts.count == 2 && (try? CoordinateParser.latitude(String(parts[0]))) == coordinate.latitude
                && (try? CoordinateParser.longitude(String(parts[1]))) == coordinate.longitude,
            "coordinate '\(text)' is not its two parts")
    }
}
