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
    @inlinable public var time: Date? {
        get { Self.date(timeValue) }
        set { timeValue = Self.stored(newValue) }
    }
    /// Wall-clock time at which the engine received the report; nil in replays of recordings.
    @inlinable public var receivedAt: Date? {
        get { Self.date(receivedValue) }
        set { receivedValue = Self.stored(newValue) }
    }
    /// The kind of solution; only `twoD` and `threeD` fixes with a position are usable.
    public var mode: FixMode
    /// WGS84 latitude, degrees (-90...90 to be usable); nil when not reported.
    @inlinable public var latitude: Double? {
        get { Self.value(latitudeValue) }
        set { latitudeValue = Self.stored(newValue) }
    }
    /// WGS84 longitude, degrees (-180...180 to be usable); nil when not reported.
    @inlinable public var longitude: Double? {
        get { Self.value(longitudeValue) }
        set { longitudeValue = Self.stored(newValue) }
    }
    /// Height above the ellipsoid, metres.
    @inlinable public var altitudeHAE: Double? {
        get { Self.value(altitudeHAEValue) }
        set { altitudeHAEValue = Self.stored(newValue) }
    }
    /// Height above mean sea level, metres.
    @inlinable public var altitudeMSL: Double? {
        get { Self.value(altitudeMSLValue) }
        set { altitudeMSLValue = Self.stored(newValue) }
    }
    /// Horizontal accuracy, metres (~95%): gpsd `eph`, else derived from `epx`/`epy`.
    @inlinable public var horizontalAccuracy: Double? {
        get { Self.value(horizontalAccuracyValue) }
        set { horizontalAccuracyValue = Self.stored(newValue) }
    }
    /// Vertical accuracy, metres (gpsd `epv`).
    @inlinable public var verticalAccuracy: Double? {
        get { Self.value(verticalAccuracyValue) }
        set { verticalAccuracyValue = Self.stored(newValue) }
    }
    /// Speed over ground, m/s.
    @inlinable public var speed: Double? {
        get { Self.value(speedValue) }
        set { speedValue = Self.stored(newValue) }
    }
    /// Course over ground, degrees from true north.
    @inlinable public var course: Double? {
        get { Self.value(courseValue) }
        set { courseValue = Self.stored(newValue) }
    }

    // Each optional number is kept as a plain `Double`, absent as one NaN of the engine's own (`absentBits`):
    // an optional `Double` takes 16 bytes in a struct, a `Double` 8, and a fix is copied several times on its
    // way through the filter and the monitor (104 bytes a copy instead of 184). A NaN a caller sets stays a
    // NaN (its bits differ from the marker's); only the marker's exact bits read as nil.
    @usableFromInline var timeValue: Double
    @usableFromInline var receivedValue: Double
    @usableFromInline var latitudeValue: Double
    @usableFromInline var longitudeValue: Double
    @usableFromInline var altitudeHAEValue: Double
    @usableFromInline var altitudeMSLValue: Double
    @usableFromInline var horizontalAccuracyValue: Double
    @usableFromInline var verticalAccuracyValue: Double
    @usableFromInline var speedValue: Double
    @usableFromInline var courseValue: Double

    /// The bits of the NaN that stands for "not reported": a quiet NaN with a payload no arithmetic on the
    /// engine's numbers makes (a NaN from arithmetic carries its operand's payload, or none).
    @inlinable static var absentBits: UInt64 { 0x7FF8_0000_0A85_E17E }

    @inlinable static func value(_ stored: Double) -> Double? {
        stored.bitPattern == absentBits ? nil : stored
    }

    @inlinable static func stored(_ value: Double?) -> Double {
        value ?? Double(bitPattern: absentBits)
    }

    @inlinable static func date(_ stored: Double) -> Date? {
        stored.bitPattern == absentBits ? nil : Date(timeIntervalSinceReferenceDate: stored)
    }

    @inlinable static func stored(_ date: Date?) -> Double {
        date?.timeIntervalSinceReferenceDate ?? Double(bitPattern: absentBits)
    }

    /// A fix as delivered, field by field (degrees, metres, m/s); nothing is validated here, the fix filter
    /// judges it.
    @inlinable public init(
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
        self.timeValue = Self.stored(time)
        self.receivedValue = Self.stored(receivedAt)
        self.mode = mode
        self.latitudeValue = Self.stored(latitude)
        self.longitudeValue = Self.stored(longitude)
        self.altitudeHAEValue = Self.stored(altitudeHAE)
        self.altitudeMSLValue = Self.stored(altitudeMSL)
        self.horizontalAccuracyValue = Self.stored(horizontalAccuracy)
        self.verticalAccuracyValue = Self.stored(verticalAccuracy)
        self.speedValue = Self.stored(speed)
        self.courseValue = Self.stored(course)
    }

    /// Two fixes are equal when every field reads the same (a NaN, as ever, equals nothing).
    public static func == (a: Fix, b: Fix) -> Bool {
        a.subject == b.subject && a.time == b.time && a.receivedAt == b.receivedAt && a.mode == b.mode
            && a.latitude == b.latitude && a.longitude == b.longitude && a.altitudeHAE == b.altitudeHAE
            && a.altitudeMSL == b.altitudeMSL && a.horizontalAccuracy == b.horizontalAccuracy
            && a.verticalAccuracy == b.verticalAccuracy && a.speed == b.speed && a.course == b.course
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
    /// The fix's subject (kept once, in `fix`).
    package var subject: String {
        get { fix.subject }
        set { fix.subject = newValue }
    }
    package var time: Date
    package private(set) var coordinate: Coordinate
    /// `coordinate` in earth-centred axes, worked out once a fix (the filter's plausibility check and the
    /// monitor both measure with it: two conversions, a sine and a cosine each, were a tenth of a fleet fix's
    /// judging).
    package private(set) var point: GeocentricPoint
    /// Horizontal accuracy in metres (never nil here: the filter fills in its default).
    package var accuracy: Double
    /// True when the receiver reported no accuracy and the configured default was used.
    package var accuracyEstimated: Bool
    package var fix: Fix

    package init(fix: Fix, time: Date, coordinate: Coordinate, accuracy: Double, accuracyEstimated: Bool) {
        self.time = time
        self.coordinate = coordinate
        self.point = GeocentricPoint(coordinate)
        self.accuracy = accuracy
        self.accuracyEstimated = accuracyEstimated
        self.fix = fix
    }

    /// A fix as far as the monitor keeps it past its step (an event's fix, its subject and time): what a partition
    /// checkpoint writes of the fixes of a run of refused fixes, and what a monitor holds of them, so that a
    /// checkpoint gives back the same state.
    package init(kept: EventFix, subject: String, time: Date) {
        self.init(
            fix: Fix(
                subject: subject, time: time, mode: kept.mode, latitude: kept.latitude, longitude: kept.longitude,
                horizontalAccuracy: kept.accuracyEstimated ? nil : kept.accuracy, speed: kept.speed,
                course: kept.course),
            time: time, coordinate: Coordinate(latitude: kept.latitude, longitude: kept.longitude),
            accuracy: kept.accuracy, accuracyEstimated: kept.accuracyEstimated)
    }
}
