import Foundation

/// The kind of solution a receiver reports (gpsd's `mode`).
public enum FixMode: Int, Sendable, Comparable, Codable {
    /// The receiver did not say (gpsd mode 0).
    case unknown = 0
    /// The receiver has no position (gpsd mode 1); such a fix is not usable.
    case noFix = 1
    /// Latitude and longitude, no altitude (gpsd mode 2).
    case twoD = 2
    /// Latitude, longitude and altitude (gpsd mode 3).
    case threeD = 3

    public static func < (lhs: FixMode, rhs: FixMode) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One position report from a receiver, as delivered; anything the receiver did not report is nil.
///
/// gpsd reports NaN for absent values; decoders turn that into nil, never into 0.
public struct Fix: Sendable, Equatable {
    /// Who moved: the gpsd device path, or a vehicle name in fleet ingest.
    public var subject: String
    /// GPS time of the fix (gpsd `time`); may be absent.
    public var time: Date?
    /// Wall-clock time at which the engine received the report; nil in replays of recordings.
    public var receivedAt: Date?
    /// The kind of solution; only `twoD` and `threeD` fixes with a position are usable.
    public var mode: FixMode
    /// WGS84 latitude, degrees (-90...90 to be usable); nil when not reported.
    public var latitude: Double?
    /// WGS84 longitude, degrees (-180...180 to be usable); nil when not reported.
    public var longitude: Double?
    /// Height above the ellipsoid, metres.
    public var altitudeHAE: Double?
    /// Height above mean sea level, metres.
    public var altitudeMSL: Double?
    /// Horizontal accuracy, metres (~95%): gpsd `eph`, else derived from `epx`/`epy`.
    public var horizontalAccuracy: Double?
    /// Vertical accuracy, metres (gpsd `epv`).
    public var verticalAccuracy: Double?
    /// Speed over ground, m/s.
    public var speed: Double?
    /// Course over ground, degrees from true north.
    public var course: Double?

    /// A fix as delivered, field by field (degrees, metres, m/s); nothing is validated here, the fix filter
    /// judges it.
    public init(
        subject: String,
        time: Date?,
        receivedAt: Date? = nil,
        mode: FixMode,
        latitude: Double?,
        longitude: Double?,
        altitudeHAE: Double? = nil,
        altitudeMSL: Double? = nil,
        horizontalAccuracy: Double? = nil,
        verticalAccuracy: Double? = nil,
        speed: Double? = nil,
        course: Double? = nil
    ) {
        self.subject = subject
        self.time = time
        self.receivedAt = receivedAt
        self.mode = mode
        self.latitude = latitude
        self.longitude = longitude
        self.altitudeHAE = altitudeHAE
        self.altitudeMSL = altitudeMSL
        self.horizontalAccuracy = horizontalAccuracy
        self.verticalAccuracy = verticalAccuracy
        self.speed = speed
        self.course = course
    }

    /// The fix times (seconds since 1970) a decoder takes: the years 0000-9999 in UTC, which
    /// `TimestampParser` reads and writes. A time beyond them (an OwnTracks `tst` of `1e300`) is refused as
    /// `bad-time`, so every time difference the engine works out stays far inside what an `Int` holds.
    public static let representableTimes = TimestampParser.representable

    /// A number of seconds as a whole number for people (`61`), whatever the value: clamped to ±1e15 (no
    /// conversion to an integer can trap), `nan` for NaN.
    public static func seconds(_ value: Double) -> String {
        guard !value.isNaN else { return "nan" }
        return String(Int64(min(max(value.rounded(), -1e15), 1e15)))
    }

    /// gpsd's horizontal error: `eph` when given, else the root sum of squares of `epx` and `epy`.
    /// Non-finite or negative inputs count as absent.
    public static func horizontalAccuracy(eph: Double?, epx: Double?, epy: Double?) -> Double? {
        func usable(_ v: Double?) -> Double? {
            guard let v, v.isFinite, v >= 0 else { return nil }
            return v
        }
        if let eph = usable(eph) { return eph }
        if let x = usable(epx), let y = usable(epy) {
            let root = (x * x + y * y).squareRoot()
            if root.isFinite { return root }
            // The squares overflowed: scale them down, and cap the result, so that a huge error stays
            // huge (refused as too inaccurate) instead of becoming inf, which reads as no estimate at all.
            let scale = max(x, y)
            let (a, b) = (x / scale, y / scale)
            return min(scale * (a * a + b * b).squareRoot(), .greatestFiniteMagnitude)
        }
        return nil
    }
}

/// A fix that passed the filter, with a usable time, position and horizontal accuracy.
package struct WeightedFix: Sendable, Equatable {
    package var subject: String
    package var time: Date
    package var coordinate: Coordinate
    /// Horizontal accuracy in metres (never nil here: the filter fills in its default).
    package var accuracy: Double
    /// True when the receiver reported no accuracy and the configured default was used.
    package var accuracyEstimated: Bool
    package var fix: Fix

    package init(fix: Fix, time: Date, coordinate: Coordinate, accuracy: Double, accuracyEstimated: Bool) {
        self.subject = fix.subject
        self.time = time
        self.coordinate = coordinate
        self.accuracy = accuracy
        self.accuracyEstimated = accuracyEstimated
        self.fix = fix
    }
}
