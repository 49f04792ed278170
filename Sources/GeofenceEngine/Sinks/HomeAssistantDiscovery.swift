import Foundation
import GeofenceCore
import GeofenceStore

/// Home Assistant's MQTT discovery of one device tracker per vehicle
/// (https://www.home-assistant.io/integrations/device_tracker.mqtt/ and
/// https://www.home-assistant.io/integrations/mqtt/#mqtt-discovery): the retained config at
/// `<prefix>/device_tracker/<object_id>/config`, the retained state (the region's name, `not_home` outside
/// all) and the retained attributes (the last fix: `latitude`, `longitude`, `gps_accuracy`).
///
/// Pure: what to publish for a vehicle's state; `HomeAssistantTrackers` reads the state from the store.
package struct HomeAssistantDiscovery: Sendable {
    /// The discovery prefix (Home Assistant's `discovery_prefix`, `homeassistant` by default).
    package var prefix: String
    /// Where a vehicle's state and attributes go: `{subject}` only; `/state` and `/attributes` are appended.
    package var base: TopicTemplate
    /// The engine's retained `online`/`offline` topic: the trackers' availability (nil: always available).
    package var statusTopic: String?

    package static let defaultPrefix = "homeassistant"
    package static let defaultBase = "geofence/{subject}/tracker"
    /// Home Assistant's `payload_not_home`, and the state outside every region.
    package static let notHome = "not_home"

    package init(prefix: String, base: TopicTemplate, statusTopic: String?) {
        self.prefix = prefix
        self.base = base
        self.statusTopic = statusTopic
    }

    /// What is wrong with `text` as a discovery prefix, or nil: one or more topic levels without wildcards,
    /// placeholders or a leading `$`.
    package static func prefixProblem(_ text: String) -> String? {
        if let problem = TopicTemplate.problem(text) { return problem }
        if text.contains("{") || text.contains("}") { return "has a placeholder: a discovery prefix is plain" }
        if text.hasPrefix("/") || text.hasSuffix("/") || text.contains("//") { return "has an empty topic level" }
        return nil
    }

    /// The vehicle's `object_id` and `unique_id`: Home Assistant takes only `[a-zA-Z0-9_-]` there, so every
    /// other byte of the name becomes `_` (at most 48 bytes of it kept), and a stable hash of the whole name
    /// follows, so that `alice/phone` and `alice+phone` stay two trackers.
    package static func objectID(_ subject: String) -> String {
        var slug = ""
        for byte in subject.utf8.prefix(48) {
            let ok =
                (48...57).contains(byte) || (65...90).contains(byte) || (97...122).contains(byte) || byte == 95
                || byte == 45
            slug.unicodeScalars.append(Unicode.Scalar(ok ? byte : 95))
        }
        return "geofence_\(slug)_\(StableHash.hex(subject).prefix(12))"
    }

    package func configTopic(_ subject: String) -> String {
        "\(prefix)/device_tracker/\(Self.objectID(subject))/config"
    }

    package func stateTopic(_ subject: String) -> String {
        base.topic(subject: subject, region: nil, type: "state") + "/state"
    }

    package func attributesTopic(_ subject: String) -> String {
        base.topic(subject: subject, region: nil, type: "attributes") + "/attributes"
    }

    /// The discovery config of a vehicle's tracker, with the keys of Home Assistant's MQTT device tracker:
    /// `name` null (the entity takes the device's name), `unique_id`, `default_entity_id`
    /// (`device_tracker.<object id>`: the `object_id` key it replaces was deprecated in Home Assistant 2025.10, to
    /// stop working in 2026.4), `state_topic`,
    /// `json_attributes_topic`, `payload_home` `home` and `payload_not_home` `not_home` (Home Assistant's
    /// defaults, said outright), `source_type` `gps`, `availability_topic` with `payload_available` `online`
    /// and `payload_not_available` `offline` (the engine's status), `device` (`identifiers`, `name`,
    /// `manufacturer`, `model`) and `origin` (`name`).
    package func config(_ subject: String) -> JSONObject {
        let id = Self.objectID(subject)
        var o: JSONObject = [
            "name": .null, "unique_id": .string(id), "default_entity_id": .string("device_tracker." + id),
            "state_topic": .string(stateTopic(subject)), "json_attributes_topic": .string(attributesTopic(subject)),
            "payload_home": "home", "payload_not_home": .string(Self.notHome), "source_type": "gps",
        ]
        if let statusTopic {
            o["availability_topic"] = .string(statusTopic)
            o["payload_available"] = "online"
            o["payload_not_available"] = "offline"
        }
        o["device"] = [
            "identifiers": .array([.string(id)]), "name": .string(subject), "manufacturer": "geofence",
            "model": "vehicle",
        ]
        o["origin"] = ["name": "geofence"]
        return o
    }

    /// The tracker's attributes: the last fix, as Home Assistant's trackers name it.
    package static func attributes(_ fix: EventFix?) -> JSONObject {
        guard let fix else { return [:] }
        return [
            "latitude": .number(fix.latitude), "longitude": .number(fix.longitude),
            "gps_accuracy": .number(fix.accuracy),
        ]
    }

    /// A region a vehicle is inside, as the state chooses among several.
    package struct Zone: Sendable, Equatable {
        package var id: String
        /// Its name, or its id when it has none.
        package var name: String
        /// Square metres: a circle's, or a polygon's.
        package var area: Double

        package init(id: String, name: String, area: Double) {
            self.id = id
            self.name = name
            self.area = area
        }

        package init(_ region: Region) {
            id = region.id
            name = region.name.flatMap { $0.isEmpty ? nil : $0 } ?? region.id
            area = region.polygon?.area ?? Double.pi * region.radius * region.radius
        }
    }

    /// The state of a vehicle inside `zones`: Home Assistant's own rule for a tracker in several zones, the
    /// smallest one's name (ties: the smaller id); `not_home` inside none.
    package static func state(inside zones: [Zone]) -> String {
        let smallest = zones.min { ($0.area, $0.id) < ($1.area, $1.id) }
        return smallest?.name ?? notHome
    }

    /// The retained messages that make a vehicle's tracker: its config, state and attributes.
    package func messages(subject: String, state: String, fix: EventFix?) -> [SinkMessage] {
        [
            SinkMessage(
                topic: configTopic(subject), payload: Array(JSONValue.object(config(subject)).serialized().utf8),
                retain: true),
            SinkMessage(topic: stateTopic(subject), payload: Array(state.utf8), retain: true),
            SinkMessage(
                topic: attributesTopic(subject),
                payload: Array(JSONValue.object(Self.attributes(fix)).serialized().utf8), retain: true),
        ]
    }

    /// The empty retained messages that remove a vehicle's tracker from Home Assistant (an empty config)
    /// and its state and attributes from the broker.
    package func clearing(subject: String) -> [SinkMessage] {
        [configTopic(subject), stateTopic(subject), attributesTopic(subject)].map {
            SinkMessage(topic: $0, payload: [], retain: true)
        }
    }
}
