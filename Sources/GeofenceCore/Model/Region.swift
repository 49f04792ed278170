import Foundation

/// The events a region can be asked to notify (`--notify`). `determined` and `expired` always fire.
public enum NotifyKind: String, Sendable, CaseIterable, Codable, Comparable {
    case enter
    case exit
    /// Inside continuously for the region's `dwell` time (which a region that asks for it must have).
    case dwell

    public static func < (lhs: NotifyKind, rhs: NotifyKind) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// A mistake in a region's definition, naming the field at fault.
public struct RegionValidationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The field as it is spelled in the import format (`lat`, `radius`, `hooks.enter`, ...).
    public var field: String
    /// What is wrong with it, in words that follow the field's name (`is empty`, `contains a NUL byte`).
    public var message: String

    /// An error naming `field` and saying what is wrong with it.
    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }

    public var description: String { "\(field): \(message)" }
}

/// Limits a region is validated against.
public struct RegionLimits: Sendable, Equatable {
    /// Largest radius accepted, metres.
    public var maxRadius: Double = 500_000
    /// Longest id, in UTF-8 bytes.
    public var maxIDBytes: Int = 128
    /// Longest name, in UTF-8 bytes.
    public var maxNameBytes: Int = 256
    /// Longest hook command, in UTF-8 bytes.
    public var maxCommandBytes: Int = 4096
    /// Most vertices of one polygon region (all its rings, not counting each ring's closing position).
    public var maxPolygonVertices: Int = 10_000
    /// Most parts of one polygon region (a `MultiPolygon`'s polygons).
    public var maxPolygonParts: Int = 1000
    /// Longest polygon edge, metres (geodesic): the edge model is exact to a millimetre up to here.
    public var maxPolygonEdge: Double = 100_000
    /// Farthest a polygon's vertex may be from its centre, metres: so no polygon is larger than a hemisphere.
    public var maxPolygonReach: Double = 2_000_000
    /// Whether ids and subjects are taken in NFC and held to `VisibleName`'s rule: true for what comes in,
    /// false for rows a store wrote before that rule (read back exactly as written).
    public var checksNames = true

    /// The limits above, the defaults.
    public init() {}
    /// The default limits, which the public initialisers hold a region to unless given others.
    public static let `default` = RegionLimits()
}

/// A region to monitor, a circle or a polygon: the requested, durable definition.
///
/// Always valid: the only way to make one is the validating initializer. A polygon region's `center` and
/// `radius` are its bounding cap (every point of the polygon is within `radius` of `center`), which is what
/// the spatial index files it by; its decisions use the signed distance to its boundary.
public struct Region: Sendable, Equatable {
    /// The region's unique name: 1 to 128 bytes of UTF-8 with no control or invisible characters, held in NFC.
    public let id: String
    /// A name for people (at most 256 bytes of UTF-8); nil when none was given.
    public let name: String?
    /// The circle's centre (for a polygon, its bounding cap's).
    public let center: Coordinate
    /// Radius in metres (for a polygon, its bounding cap's).
    public let radius: Double
    /// The polygon, for a polygon region; nil for a circle.
    public let polygon: RegionPolygon?
    /// The events to fire besides `determined` and `expired`, which always fire (enter and exit by default,
    /// and dwell too when a dwell time was given).
    public let notify: Set<NotifyKind>
    /// Seconds inside, continuously, before `dwell` fires.
    public let dwell: Double?
    /// When the region leaves monitoring and `expired` fires (held to the millisecond); nil: never.
    public let expires: Date?
    /// Per-event hook commands (`enter`, `exit`, `dwell`), run as `/bin/sh -c`.
    package let hooks: [NotifyKind: String]
    /// When set, only these subjects (devices or vehicles) are monitored against the region.
    public let subjects: [String]?
    /// Unix uid of the client that created it.
    package let createdBy: UInt32?
    /// When the region was first stored; nil in a region made in code, until the store has it.
    public let createdAt: Date?

    /// The engine's own initialiser, with the daemon's fields (hooks, who created it, limits); a library's
    /// program uses the public one, `init(id:name:center:radius:notify:dwell:expires:subjects:polygon:)`.
    package init(
        id: String,
        name: String? = nil,
        center: Coordinate,
        radius: Double,
        notify: Set<NotifyKind>? = nil,
        dwell: Double? = nil,
        expires: Date? = nil,
        hooks: [NotifyKind: String] = [:],
        subjects: [String]? = nil,
        createdBy: UInt32? = nil,
        createdAt: Date? = nil,
        polygon: RegionPolygon? = nil,
        limits: RegionLimits = .default
    ) throws(RegionValidationError) {
        // A polygon's centre and radius are its bounding cap's, whatever was passed.
        let center = polygon?.center ?? center
        let radius = polygon?.capRadius ?? radius
        // One spelling per id (NFC), whichever way it was typed: add, import, the store and the control
        // socket all build a Region, so they all compare ids the same way.
        let id = limits.checksNames ? VisibleName.normalized(id) : id
        try Region.validateID(id, limits: limits)
        if let name {
            if name.utf8.count > limits.maxNameBytes {
                throw RegionValidationError(field: "name", message: "is longer than \(limits.maxNameBytes) bytes")
            }
            if name.utf8.contains(0) { throw RegionValidationError(field: "name", message: "contains a NUL byte") }
            // The rule of ids and vehicles: a name is printed by `list`, `show` and hooks, and ESC, CR or U+202E
            // in it would steer the terminal that shows it.
            if limits.checksNames, let problem = VisibleName.problem(name) {
                throw RegionValidationError(field: "name", message: problem)
            }
        }
        guard center.latitude.isFinite, abs(center.latitude) <= 90 else {
            throw RegionValidationError(
                field: "lat", message: "\(Region.show(center.latitude)) is out of range: must be between -90 and 90")
        }
        guard center.longitude.isFinite, abs(center.longitude) <= 180 else {
            throw RegionValidationError(
                field: "lon", message: "\(Region.show(center.longitude)) is out of range: must be between -180 and 180"
            )
        }
        guard radius.isFinite, radius > 0, radius <= limits.maxRadius || polygon != nil else {
            throw RegionValidationError(
                field: "radius",
                message:
                    "\(Region.show(radius)) is out of range: must be more than 0 and at most \(Region.show(limits.maxRadius)) metres"
            )
        }
        let notify = notify ?? (dwell == nil ? [.enter, .exit] : [.enter, .exit, .dwell])
        // Held to the precision the regions format writes (`DurationParser.format` to the microsecond,
        // `TimestampParser.format` to the millisecond), so that a region exports and imports unchanged.
        let dwell = dwell.map { ($0 * 1_000_000).rounded() / 1_000_000 }
        let expires = expires.map { Date(timeIntervalSince1970: ($0.timeIntervalSince1970 * 1000).rounded() / 1000) }
        if let dwell {
            guard dwell.isFinite, dwell > 0, dwell <= DurationParser.maximumSeconds else {
                throw RegionValidationError(
                    field: "dwell", message: "must be a positive duration of at most 36525d (100 years)")
            }
        } else if notify.contains(.dwell) {
            throw RegionValidationError(field: "dwell", message: "notify includes dwell, so a dwell time is required")
        }
        if let expires, !TimestampParser.representable.contains(expires.timeIntervalSince1970) {
            throw RegionValidationError(
                field: "expires", message: "is not a valid time between the years 0000 and 9999")
        }
        for (kind, command) in hooks {
            let field = "hooks.\(kind.rawValue)"
            if command.trimmingCharacters(in: .whitespaces).isEmpty {
                throw RegionValidationError(field: field, message: "is empty")
            }
            if command.utf8.count > limits.maxCommandBytes {
                throw RegionValidationError(field: field, message: "is longer than \(limits.maxCommandBytes) bytes")
            }
            if command.utf8.contains(0) { throw RegionValidationError(field: field, message: "contains a NUL byte") }
        }
        var subjects = subjects
        if let names = subjects {
            for (i, subject) in names.enumerated() where subject.isEmpty || subject.utf8.contains(0) {
                throw RegionValidationError(field: "subjects[\(i)]", message: "must be a non-empty name")
            }
            if limits.checksNames {
                // The same rule as a fleet line's `device`, so a filter can name every vehicle that can exist.
                for (i, subject) in names.enumerated() {
                    if let problem = SubjectName.problem(subject) {
                        throw RegionValidationError(field: "subjects[\(i)]", message: problem)
                    }
                }
                subjects = names.map(VisibleName.normalized)
            }
        }
        self.id = id
        self.name = name
        self.center = center
        self.radius = radius
        self.polygon = polygon
        self.notify = notify
        self.dwell = dwell
        self.expires = expires
        self.hooks = hooks
        self.subjects = subjects
        self.createdBy = createdBy
        self.createdAt = createdAt
    }

    /// A region, validated: a circle of `radius` metres around `center`, or a `polygon` (its bounding cap then
    /// stands for `center` and `radius`). `notify` defaults to enter and exit (and dwell, given a `dwell`
    /// time: how long inside, continuously, before `dwell` fires, held to the microsecond); `expires` ends
    /// its monitoring; `subjects`, when set, are the only vehicles monitored against it.
    public init(
        id: String,
        name: String? = nil,
        center: Coordinate,
        radius: Double,
        notify: Set<NotifyKind>? = nil,
        dwell: Duration? = nil,
        expires: Date? = nil,
        subjects: [String]? = nil,
        polygon: RegionPolygon? = nil
    ) throws(RegionValidationError) {
        try self.init(
            id: id, name: name, center: center, radius: radius, notify: notify,
            dwell: dwell.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 },
            expires: expires, hooks: [:], subjects: subjects, createdBy: nil, createdAt: nil, polygon: polygon,
            limits: .default)
    }

    /// The dwell time as a `Duration` (`dwell` in seconds).
    public var dwellDuration: Duration? { dwell.map { .microseconds(Int64(($0 * 1_000_000).rounded())) } }

    /// Checks a region id: 1 to `maxIDBytes` bytes of UTF-8 with no control, bidi control or invisible
    /// characters (`VisibleName`). Ids are compared in NFC: check `VisibleName.normalized(id)`.
    public static func validateID(_ id: String, limits: RegionLimits = .default) throws(RegionValidationError) {
        if id.isEmpty { throw RegionValidationError(field: "id", message: "is empty") }
        if id.utf8.count > limits.maxIDBytes {
            throw RegionValidationError(
                field: "id", message: "is \(id.utf8.count) bytes long: at most \(limits.maxIDBytes) are allowed")
        }
        // Printable ASCII, by far the usual case, needs no look-up of Unicode properties.
        if id.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return }
        if limits.checksNames {
            if let problem = VisibleName.problem(id) { throw RegionValidationError(field: "id", message: problem) }
        } else if let bad = id.unicodeScalars.first(where: { $0.properties.generalCategory == .control }) {
            throw RegionValidationError(
                field: "id",
                message: "contains a control character (U+\(String(bad.value, radix: 16, uppercase: true)))")
        }
    }

    /// A polygon region: the same fields as a circle's, with the shape in place of centre and radius.
    package init(
        id: String, name: String? = nil, polygon: RegionPolygon, notify: Set<NotifyKind>? = nil, dwell: Double? = nil,
        expires: Date? = nil, hooks: [NotifyKind: String] = [:], subjects: [String]? = nil, createdBy: UInt32? = nil,
        createdAt: Date? = nil, limits: RegionLimits = .default
    ) throws(RegionValidationError) {
        try self.init(
            id: id, name: name, center: polygon.center, radius: polygon.capRadius, notify: notify, dwell: dwell,
            expires: expires, hooks: hooks, subjects: subjects, createdBy: createdBy, createdAt: createdAt,
            polygon: polygon, limits: limits)
    }

    /// Whether this region applies to a subject.
    public func applies(to subject: String) -> Bool {
        subjects?.contains(subject) ?? true
    }

    package static func show(_ value: Double) -> String {
        if value.isNaN { return "nan" }
        if value.isInfinite { return value > 0 ? "inf" : "-inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }
}
