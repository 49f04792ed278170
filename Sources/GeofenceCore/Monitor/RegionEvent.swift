import Foundation

/// Where a subject is with respect to a region.
public enum RegionState: String, Sendable, Codable {
    case unknown
    case inside
    case outside
}

/// The kinds of region event.
public enum RegionEventType: String, Sendable, Codable, CaseIterable {
    /// The first conclusive state of a (subject, region) pair.
    case determined
    case enter
    case exit
    /// Inside continuously for the region's dwell time.
    case dwell
    /// The region reached its expiry time and left monitoring.
    case expired
}

extension RegionEventType {
    /// Whether an event of `type` (its stored name) about `region` carries a subject's position, so is held
    /// back while Location Services are off: a region event with its region. The one judge of it, for the
    /// hook runner (through `DeliveryOrderKey`) and the sinks. An `expired` event carries none, but is held
    /// with its region's events, whose order it keeps.
    public static func carriesPosition(type: String, region: String?) -> Bool {
        region != nil && RegionEventType(rawValue: type) != nil
    }
}

/// The fix that caused an event, as carried in the event.
public struct EventFix: Sendable, Equatable {
    /// WGS84 latitude, degrees (JSON `lat`).
    public var latitude: Double
    /// WGS84 longitude, degrees (JSON `lon`).
    public var longitude: Double
    /// Horizontal accuracy, metres: the receiver's, or the filter's `defaultAccuracy` when it gave none.
    public var accuracy: Double
    /// True when the receiver reported no accuracy and `accuracy` is the filter's default.
    public var accuracyEstimated: Bool
    /// The kind of solution: 2D or 3D (only those pass the filter).
    public var mode: FixMode
    /// Speed over ground, m/s; nil when the receiver did not report it.
    public var speed: Double?
    /// Course over ground, degrees from true north; nil when the receiver did not report it.
    public var course: Double?

    /// The fix as the filter accepted it, with its accuracy filled in.
    package init(_ fix: borrowing WeightedFix) {
        latitude = fix.coordinate.latitude
        longitude = fix.coordinate.longitude
        accuracy = fix.accuracy
        accuracyEstimated = fix.accuracyEstimated
        mode = fix.fix.mode
        speed = fix.fix.speed
        course = fix.fix.course
    }

    /// A fix as an event carries it, field by field (degrees, metres, m/s); nothing is validated.
    public init(
        latitude: Double, longitude: Double, accuracy: Double, accuracyEstimated: Bool = false, mode: FixMode,
        speed: Double? = nil, course: Double? = nil
    ) {
        self.latitude = latitude
        self.longitude = longitude
        self.accuracy = accuracy
        self.accuracyEstimated = accuracyEstimated
        self.mode = mode
        self.speed = speed
        self.course = course
    }
}

/// A region event: what the outbox stores, hooks receive and `replay`/`watch` print.
package struct RegionEvent: Sendable, Equatable {
    /// UUIDv7: unique, time-ordered; receivers de-duplicate by it.
    package var id: String
    package var type: RegionEventType
    package var region: String
    /// Absent for `expired`, which concerns the region, not a subject.
    package var subject: String?
    /// Fix time of the fix that caused the event (the expiry time for `expired`).
    package var time: Date
    package var state: RegionState?
    package var previous: RegionState?
    /// True when the change happened across a gap in the fixes (a tunnel, a reboot) and was not seen.
    package var inferred: Bool
    /// Geodesic distance from the fix to the centre, metres.
    package var distance: Double?
    package var radius: Double
    package var fix: EventFix?

    package init(
        id: String, type: RegionEventType, region: String, subject: String?, time: Date, state: RegionState?,
        previous: RegionState?, inferred: Bool, distance: Double?, radius: Double, fix: EventFix?
    ) {
        self.id = id
        self.type = type
        self.region = region
        self.subject = subject
        self.time = time
        self.state = state
        self.previous = previous
        self.inferred = inferred
        self.distance = distance
        self.radius = radius
        self.fix = fix
    }
}
