import Foundation
import GeofenceCore
import GeofenceStore

/// An event from the outbox: a region event (`determined`, `enter`, `exit`, `dwell`, `expired`: `type`) or a
/// state event (`services`, `authorization`, `source`, `device`, `region-status`: `stateType`), its fields
/// typed and its JSON kept as hooks, `geofence watch` and `geofence replay` show it (Docs/events.md).
///
/// `Codable` as that JSON: encoding one gives the hooks' JSON object, and decoding that object gives the event.
public struct GeofenceEvent: Sendable, Equatable, Codable {
    /// Unique and time-ordered: a receiver de-duplicates by it, and `events(after:)` resumes from it.
    public let id: String
    /// A region event's kind; nil for a state event.
    public let type: RegionEventType?
    /// A state event's kind; nil for a region event.
    public let stateType: StateEventKind?
    /// The region, for region events and a region's status.
    public let region: String?
    /// The vehicle (gpsd device, fleet subject), where one applies (not for `expired`).
    public let subject: String?
    /// A region event's fix time (the expiry time for `expired`); a state event's wall-clock time.
    public let time: Date
    /// A region event's state after it (`inside`, `outside`); nil for `expired` and state events.
    public let state: RegionState?
    /// A region event's state before it.
    public let previous: RegionState?
    /// Whether the change happened across a gap in the fixes and was not seen (Docs/events.md).
    public let inferred: Bool
    /// Geodesic distance from the fix to the region's centre (to a polygon's boundary, negative inside),
    /// metres, to 0.1 m.
    public let distance: Double?
    /// The region's radius, metres (0 for a polygon); nil for state events.
    public let radius: Double?
    /// The fix that caused a region event.
    public let fix: EventFix?
    /// A state event's new state in its own words (`lost`, `added`, `on`, `authorized`, ...).
    public let status: String?
    /// Why, for a state event that says.
    public let reason: String?
    /// The event as JSON, exactly as hooks, `geofence watch` and `geofence replay` show it (Docs/events.md).
    public let json: String

    package init(_ stored: StoredEvent) {
        self.init(id: stored.id, type: stored.type, time: stored.time, json: stored.body)
    }

    /// The typed fields are read from the JSON; `id` and `type` are the outbox's columns.
    private init(id: String, type: String, time: Date, json: String) {
        let object = (try? JSON.parse(json))?.objectValue ?? JSONObject()
        self.id = id
        self.type = RegionEventType(rawValue: type)
        stateType = self.type == nil ? StateEventKind(rawValue: type) : nil
        region = object["region"]?.stringValue
        subject = object["subject"]?.stringValue
        // The JSON's (to the millisecond), which a receiver of the JSON reads too.
        self.time = object["time"]?.stringValue.flatMap { try? TimestampParser.parse($0) } ?? time
        let isRegionEvent = self.type != nil
        let stateText = object["state"]?.stringValue
        state = isRegionEvent ? stateText.flatMap(RegionState.init(rawValue:)) : nil
        previous = isRegionEvent ? object["previous"]?.stringValue.flatMap(RegionState.init(rawValue:)) : nil
        inferred = object["inferred"]?.boolValue ?? false
        distance = isRegionEvent ? object["distance"]?.doubleValue : nil
        radius = isRegionEvent ? object["radius"]?.doubleValue : nil
        fix = isRegionEvent ? object["fix"]?.objectValue.flatMap(EventFix.init(json:)) : nil
        status = isRegionEvent ? nil : stateText
        reason = object["reason"]?.stringValue
        self.json = json
    }

    /// Whether it is a region event (a vehicle and a region), not a state event.
    public var isRegionEvent: Bool { type != nil }

    // MARK: Codable: the hooks' JSON

    public func encode(to encoder: any Encoder) throws {
        guard let object = (try? JSON.parse(json))?.objectValue else {
            throw EncodingError.invalidValue(
                json, .init(codingPath: encoder.codingPath, debugDescription: "the event's JSON is not an object"))
        }
        try CodableJSON.encode(.object(object), to: encoder)
    }

    public init(from decoder: any Decoder) throws {
        guard case .object(var object) = try CodableJSON.decode(from: decoder) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an object"))
        }
        guard let id = object["id"]?.stringValue, let type = object["type"]?.stringValue,
            RegionEventType(rawValue: type) != nil || StateEventKind(rawValue: type) != nil,
            let timeText = object["time"]?.stringValue, let time = try? TimestampParser.parse(timeText)
        else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "not an event: needs id, a known type and time")
            )
        }
        // A decoder does not keep the members' order: they are put back in the order the engine writes them.
        if let event = RegionEvent(json: object) { object = event.json }
        object = Self.ordered(object)
        self.init(id: id, type: type, time: time, json: JSONValue.object(object).serialized())
    }

    /// The engine's member order (`RegionEvent.json`, `StateEvent.json`), then any others by name.
    private static func ordered(_ object: JSONObject) -> JSONObject {
        let leading = [
            "id", "type", "region", "subject", "time", "state", "previous", "inferred", "distance", "radius", "fix",
            "reason",
        ]
        var result = JSONObject()
        for key in leading { if let value = object[key] { result[key] = value } }
        for key in object.keys.sorted() where result[key] == nil { result[key] = object[key] }
        return result
    }

    /// Equal when they are the same event: the JSON compared as JSON (members in any order).
    public static func == (lhs: GeofenceEvent, rhs: GeofenceEvent) -> Bool {
        guard lhs.id == rhs.id, lhs.type == rhs.type, lhs.stateType == rhs.stateType, lhs.time == rhs.time else {
            return false
        }
        return lhs.json == rhs.json || (try? JSON.parse(lhs.json)) == (try? JSON.parse(rhs.json))
    }
}

/// The kinds of state event: a source, a device, Location Services, an authorization, a region's status.
public typealias StateEventKind = StateEvent.Kind

/// A JSON value through `Codable`'s containers, member by member.
private enum CodableJSON {
    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    static func encode(_ value: JSONValue, to encoder: any Encoder) throws {
        switch value {
        case .object(let object):
            var container = encoder.container(keyedBy: Key.self)
            for key in object.keys {
                guard let member = object[key] else { continue }
                try Self.encode(member, to: container.superEncoder(forKey: Key(key)))
            }
        case .array(let values):
            var container = encoder.unkeyedContainer()
            for member in values { try Self.encode(member, to: container.superEncoder()) }
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let b):
            var container = encoder.singleValueContainer()
            try container.encode(b)
        case .number(let n):
            var container = encoder.singleValueContainer()
            try container.encode(n)
        case .string(let s):
            var container = encoder.singleValueContainer()
            try container.encode(s)
        }
    }

    static func decode(from decoder: any Decoder) throws -> JSONValue {
        if let keyed = try? decoder.container(keyedBy: Key.self) {
            var object = JSONObject()
            for key in keyed.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) {
                object[key.stringValue] = try decode(from: try keyed.superDecoder(forKey: key))
            }
            return .object(object)
        }
        if var unkeyed = try? decoder.unkeyedContainer() {
            var values: [JSONValue] = []
            while !unkeyed.isAtEnd { values.append(try decode(from: try unkeyed.superDecoder())) }
            return .array(values)
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() { return .null }
        if let b = try? single.decode(Bool.self) { return .bool(b) }
        if let n = try? single.decode(Double.self) { return .number(n) }
        return .string(try single.decode(String.self))
    }
}
