import Foundation
import GeofenceCore
import GeofenceStore

/// A topic template: `geofence/{subject}/{region}/event`, with `{subject}`, `{region}` and `{type}` replaced
/// by the event's values, each as one topic level (`SubjectName.topicLevel`: `/`, `+`, `#` and every
/// other byte but `A-Z a-z 0-9 - _ ~` percent-encoded), so no name can add a level or a wildcard.
///
/// `{subject-levels}` is the subject with each of its `/` kept as a level separator (every level encoded as
/// above): `alice/phone` gives `alice/phone`, the two levels OwnTracks uses for a device, where `{subject}`
/// gives the one level `alice%2Fphone`.
///
/// An event without a subject (a state event such as `services`) has `engine` for `{subject}` and
/// `{subject-levels}`; one without a region has its type for `{region}`.
package struct TopicTemplate: Sendable, Equatable {
    package let text: String

    package static let placeholders = ["{subject}", "{subject-levels}", "{region}", "{type}"]
    package static let eventDefault = "geofence/{subject}/{region}/event"
    package static let stateDefault = "geofence/{subject}/{region}/state"
    package static let statusDefault = "geofence/engine/status"

    /// What is wrong with `text` as a topic template, or nil.
    package static func problem(_ text: String) -> String? {
        if text.isEmpty { return "is empty" }
        if text.utf8.count > 1024 { return "is longer than 1024 bytes" }
        if text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) {
            return "contains a control character"
        }
        if text.contains("+") || text.contains("#") { return "contains + or #, which are wildcards, not topics" }
        if text.hasPrefix("$") { return "starts with $, which brokers keep for themselves" }
        var rest = text[...]
        while let open = rest.firstIndex(of: "{") {
            guard let close = rest[open...].firstIndex(of: "}") else { return "has a { without }" }
            let name = String(rest[open...close])
            if !placeholders.contains(name) {
                return "has \(name): use {subject}, {subject-levels}, {region} and {type}"
            }
            rest = rest[rest.index(after: close)...]
        }
        if rest.contains("}") { return "has a } without {" }
        return nil
    }

    private enum Part: Sendable, Equatable {
        case literal(String)
        case subject
        case subjectLevels
        case region
        case type
    }

    /// The template cut once into literals and placeholders: a topic is built by appending, per message.
    private let parts: [Part]

    package init(_ text: String) {
        self.text = text
        var parts: [Part] = []
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            if open > rest.startIndex { parts.append(.literal(String(rest[..<open]))) }
            switch rest[open...close] {
            case "{subject}": parts.append(.subject)
            case "{subject-levels}": parts.append(.subjectLevels)
            case "{region}": parts.append(.region)
            case "{type}": parts.append(.type)
            default: parts.append(.literal(String(rest[open...close])))
            }
            rest = rest[rest.index(after: close)...]
        }
        if !rest.isEmpty { parts.append(.literal(String(rest))) }
        self.parts = parts
    }

    package func topic(subject: String?, region: String?, type: String) -> String {
        var out = ""
        for part in parts {
            switch part {
            case .literal(let text): out += text
            case .subject: out += subject.map(SubjectName.topicLevel) ?? "engine"
            case .subjectLevels:
                out +=
                    subject.map {
                        $0.split(separator: "/", omittingEmptySubsequences: false).map {
                            SubjectName.topicLevel(String($0))
                        }.joined(separator: "/")
                    } ?? "engine"
            case .region: out += SubjectName.topicLevel(region ?? type)
            case .type: out += SubjectName.topicLevel(type)
            }
        }
        return out
    }
}

/// What a sink publishes for one event.
package struct SinkMessage: Sendable, Equatable {
    package var topic: String
    package var payload: [UInt8]
    package var retain: Bool
}

/// How a sink shapes events: the event JSON as stored, or an OwnTracks transition.
package enum SinkFormat: String, Sendable, CaseIterable {
    /// The event's JSON exactly as stored (Docs/events.md).
    case event
    /// `{"_type":"transition","event":"enter"|"leave",...}` for enter and exit (and `determined inside`, a
    /// first fix already inside, as an enter); other events are not published.
    case owntracks
    /// Home Assistant's MQTT discovery: no message per event, but one retained device tracker per vehicle
    /// (`HomeAssistantDiscovery`), kept by the sink from the store.
    case homeassistant

    /// The messages of one event: its own (unless the format has none for it), then the retained state of
    /// its (subject, region) pair for events that set it.
    package static func messages(
        for event: StoredEvent, format: SinkFormat, topic: TopicTemplate, stateTopic: TopicTemplate?
    ) -> [SinkMessage] {
        var out: [SinkMessage] = []
        let at = topic.topic(subject: event.subject, region: event.region, type: event.type)
        switch format {
        case .event:
            out.append(SinkMessage(topic: at, payload: Array(event.body.utf8), retain: false))
        case .owntracks:
            if let payload = ownTracksTransition(event) {
                out.append(SinkMessage(topic: at, payload: payload, retain: false))
            }
        case .homeassistant:
            break
        }
        if let stateTopic, let region = event.region, let subject = event.subject,
            event.type == "determined" || event.type == "enter" || event.type == "exit", let state = stateOf(event)
        {
            out.append(
                SinkMessage(
                    topic: stateTopic.topic(subject: subject, region: region, type: event.type),
                    payload: Array(state.utf8), retain: true))
        }
        return out
    }

    /// The messages of a batch, in order, each with the index of the event it acknowledges: every event's
    /// own message, and the retained states **coalesced**: a pair (state topic) that changes several times
    /// in the batch gets one state message, its last state, sent where its last event is, and counted
    /// against the pair's *first* event of the batch. So that event, and the cursor with it, is
    /// acknowledged only once the newest state is: an acknowledged event's pair always shows its state or a
    /// later one. (A retained topic holds one value; the states in between would be overwritten at once.)
    package static func plan(
        _ batch: [StoredEvent], format: SinkFormat, topic: TopicTemplate, stateTopic: TopicTemplate?
    ) -> [(message: SinkMessage, event: Int)] {
        let perEvent = batch.map { messages(for: $0, format: format, topic: topic, stateTopic: stateTopic) }
        // Per state topic: the first and the last event of the batch that set it.
        var first: [String: Int] = [:]
        var last: [String: Int] = [:]
        for (index, list) in perEvent.enumerated() {
            for message in list where message.retain {
                if first[message.topic] == nil { first[message.topic] = index }
                last[message.topic] = index
            }
        }
        var out: [(message: SinkMessage, event: Int)] = []
        out.reserveCapacity(batch.count + last.count)
        for (index, list) in perEvent.enumerated() {
            for message in list {
                if !message.retain {
                    out.append((message, index))
                } else if last[message.topic] == index {
                    out.append((message, first[message.topic] ?? index))
                }
            }
        }
        return out
    }

    /// The pair's state after a `determined`, `enter` or `exit`: an enter's and an exit's by their type, a
    /// determined event's from its decoded `state` (`StoredEvent.fields`).
    package static func stateOf(_ event: StoredEvent) -> String? {
        switch event.type {
        case "enter": return RegionState.inside.rawValue
        case "exit": return RegionState.outside.rawValue
        default:
            switch event.fields.state {
            case .inside: return RegionState.inside.rawValue
            case .outside: return RegionState.outside.rawValue
            case .unknown, nil: return nil
            }
        }
    }

    /// OwnTracks' `transition` (https://owntracks.org/booklet/tech/json/): `event` `enter` or `leave`, `desc`
    /// and `rid` the region, `t` `c` (a circular region), `tid` the tracker id (`OwnTracksJSON.trackerID`:
    /// the last two characters of the vehicle's name, as the apps make a default one), `tst` the fix time,
    /// `wtst` the time the region was created when it is an OwnTracks waypoint's (`owntracks/USER/DEVICE/TST`:
    /// TST, the waypoint's key), else the fix time as well; the fix's `lat`, `lon`, `acc`; and geofence's
    /// `id`, to de-duplicate.
    static func ownTracksTransition(_ event: StoredEvent) -> [UInt8]? {
        guard let region = event.region else { return nil }
        let word: String
        switch (event.type, event.fields.state) {
        case ("enter", _), ("determined", .inside): word = "enter"
        case ("exit", _): word = "leave"
        default: return nil
        }
        let tst = JSONValue.number(event.time.timeIntervalSince1970.rounded(.down))
        let wtst = OwnTracksWaypoints.creationTime(regionID: region).map { JSONValue.number(Double($0)) } ?? tst
        var o: JSONObject = [
            "_type": "transition", "event": .string(word), "desc": .string(region), "rid": .string(region),
            "t": "c", "tst": tst, "wtst": wtst, "id": .string(event.id),
        ]
        if let subject = event.subject { o["tid"] = .string(OwnTracksJSON.trackerID(subject: subject)) }
        if let fix = event.fields.fix {
            o["lat"] = .number(fix.latitude)
            o["lon"] = .number(fix.longitude)
            o["acc"] = .number(fix.accuracy)
        }
        return Array(JSONValue.object(o).serialized().utf8)
    }
}
