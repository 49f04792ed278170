import Foundation

/// An event about the engine's state rather than a region crossing: the location source (`silent`, `lost`,
/// `restored`), a device added or removed, the Location Services switch, a client's authorization, a
/// region's monitoring status. Stored in the same outbox as region events and delivered the same way.
public struct StateEvent: Sendable, Equatable {
    /// What a state event is about; the raw value is the JSON `type`.
    public enum Kind: String, Sendable, CaseIterable {
        /// The location source went `silent` or `lost`, or was `restored`.
        case source
        /// A gpsd device was `added` or `removed` (`subject` is its path).
        case device
        /// Location Services were switched `on` or `off`.
        case services
        /// A client's authorization changed; `state` is its new status.
        case authorization
        /// A region's monitoring status changed (`state` is the new one: `monitoring`, `pending`, `failed`,
        /// ...), or, when more than 50 changed at once, one summary whose `state` is `changed`.
        case regionStatus = "region-status"
    }

    /// UUIDv7, like region events.
    public var id: String
    /// What the event is about (its JSON `type`).
    public var type: Kind
    /// Wall-clock time of the change.
    public var time: Date
    /// The new state (`lost`, `added`, `on`, `authorized`, `failed`, ...).
    public var state: String
    /// The region, for `region-status`.
    public var region: String?
    /// The device or vehicle, where one is concerned.
    public var subject: String?
    /// Why, in words, for people and logs.
    public var reason: String?
    /// Anything else worth carrying (kept in the JSON as is).
    package var details: JSONObject

    package init(
        id: String, type: Kind, time: Date, state: String, region: String? = nil, subject: String? = nil,
        reason: String? = nil, details: JSONObject = JSONObject()
    ) {
        self.id = id
        self.type = type
        self.time = time
        self.state = state
        self.region = region
        self.subject = subject
        self.reason = reason
        self.details = details
    }

    /// The event's JSON: `{"id", "type", "time", "state", "region"?, "subject"?, "reason"?, ...details}`.
    package var json: JSONObject {
        var o: JSONObject = ["id": .string(id), "type": .string(type.rawValue)]
        if let region { o["region"] = .string(region) }
        if let subject { o["subject"] = .string(subject) }
        o["time"] = .string(TimestampParser.format(time))
        o["state"] = .string(state)
        if let reason { o["reason"] = .string(reason) }
        for (key, value) in details where o[key] == nil { o[key] = value }
        return o
    }
}
