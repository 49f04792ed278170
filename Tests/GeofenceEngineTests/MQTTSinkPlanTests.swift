import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore
import Testing

/// What the MQTT sink publishes for a batch (its plan), and how it matches PUBACKs to messages: no broker.
@Suite("MQTT sink plan and message ids")
struct MQTTSinkPlanTests {
    static func event(_ seq: Int64, _ type: String, subject: String, region: String, state: String) -> StoredEvent {
        let body =
            #"{"id":"e\#(seq)","type":"\#(type)","region":"\#(region)","subject":"\#(subject)","state":"\#(state)"}"#
        return StoredEvent(
            seq: seq, id: "e\(seq)", type: type, region: region, subject: subject,
            time: Date(timeIntervalSince1970: 1_795_000_000 + Double(seq)), createdAt: Date(), body: body)
    }

    static let topic = TopicTemplate(TopicTemplate.eventDefault)
    static let state = TopicTemplate(TopicTemplate.stateDefault)

    @Test("a pair's states in one batch are one message, its last state, counted against its first event")
    func coalescedStates() {
        let batch = [
            Self.event(1, "determined", subject: "v1", region: "a", state: "outside"),
            Self.event(2, "enter", subject: "v1", region: "a", state: "inside"),
            Self.event(3, "enter", subject: "v2", region: "a", state: "inside"),
            Self.event(4, "exit", subject: "v1", region: "a", state: "outside"),
            Self.event(5, "dwell", subject: "v2", region: "a", state: "inside"),
        ]
        let plan = SinkFormat.plan(batch, format: .event, topic: Self.topic, stateTopic: Self.state)
        let rendered = plan.map {
            "\($0.event) \($0.message.topic) \(String(decoding: $0.message.payload, as: UTF8.self))"
        }
        // Every event's own message, in order; v1/a's three states become one (`outside`, where its last
        // event is, counted against event 0), v2/a's one state stays with its event; `dwell` sets none.
        #expect(
            rendered == [
                "0 geofence/v1/a/event \(batch[0].body)",
                "1 geofence/v1/a/event \(batch[1].body)",
                "2 geofence/v2/a/event \(batch[2].body)",
                "2 geofence/v2/a/state inside",
                "3 geofence/v1/a/event \(batch[3].body)",
                "0 geofence/v1/a/state outside",
                "4 geofence/v2/a/event \(batch[4].body)",
            ], "\(rendered)")
        #expect(plan.filter { $0.message.retain }.count == 2)
        #expect(plan.allSatisfy { $0.message.retain == $0.message.topic.hasSuffix("/state") })
    }

    @Test("without a state topic, or in OwnTracks format, the plan is each event's own messages")
    func noStates() {
        let batch = [
            Self.event(1, "enter", subject: "v1", region: "a", state: "inside"),
            Self.event(2, "exit", subject: "v1", region: "a", state: "outside"),
        ]
        let plan = SinkFormat.plan(batch, format: .event, topic: Self.topic, stateTopic: nil)
        #expect(plan.map(\.event) == [0, 1])
        #expect(plan.allSatisfy { !$0.message.retain })
        let ownTracks = SinkFormat.plan(batch, format: .owntracks, topic: Self.topic, stateTopic: Self.state)
        #expect(ownTracks.map(\.event) == [0, 1, 0], "two transitions, one state: the last")
        #expect(ownTracks.last?.message.payload == Array("outside".utf8))
    }

    @Test("the state of a determined event is read from its JSON")
    func determinedState() {
        let inside = Self.event(1, "determined", subject: "v1", region: "a", state: "inside")
        let outside = Self.event(2, "determined", subject: "v1", region: "b", state: "outside")
        #expect(SinkFormat.stateOf(inside) == "inside")
        #expect(SinkFormat.stateOf(outside) == "outside")
        var neither = inside
        neither.body = #"{"type":"determined"}"#
        #expect(SinkFormat.stateOf(neither) == nil)
    }

    @Test("an OwnTracks transition and a retained state, byte for byte, from the event's decoded fields")
    func ownTracksBytes() {
        let event = RegionEvent(
            id: "01J0000000000000000000000A", type: .determined, region: "depot", subject: "alice/phone",
            time: Date(timeIntervalSince1970: 1_795_000_000.75), state: .inside, previous: nil, inferred: false,
            distance: 12.34, radius: 100,
            fix: EventFix(
                latitude: 51.5001, longitude: -0.1201, accuracy: 4.2, mode: .threeD, speed: 8.1, course: 271.4))
        let stored = StoredEvent(
            seq: 7, id: event.id, type: "determined", region: "depot", subject: "alice/phone", time: event.time,
            createdAt: event.time, body: JSONValue.object(event.json).serialized())
        let plan = SinkFormat.plan([stored], format: .owntracks, topic: Self.topic, stateTopic: Self.state)
        #expect(
            plan.map(\.message.topic) == ["geofence/alice%2Fphone/depot/event", "geofence/alice%2Fphone/depot/state"])
        #expect(
            String(decoding: plan[0].message.payload, as: UTF8.self)
                == #"{"_type":"transition","event":"enter","desc":"depot","rid":"depot","t":"c","tst":1795000000,"#
                + #""wtst":1795000000,"id":"01J0000000000000000000000A","tid":"ne","lat":51.5001,"lon":-0.1201,"#
                + #""acc":4.2}"#)
        #expect(plan[1].message.payload == Array("inside".utf8) && plan[1].message.retain)
        let asStored = SinkFormat.plan([stored], format: .event, topic: Self.topic, stateTopic: nil)
        #expect(asStored.map(\.message.payload) == [Array(stored.body.utf8)])
    }

    @Test("a transition of an OwnTracks waypoint's region: wtst is the waypoint's tst, field by field")
    func ownTracksWaypointTransition() throws {
        let event = RegionEvent(
            id: "01J0000000000000000000000B", type: .exit, region: "owntracks/alice/phone/1700000000",
            subject: "alice/phone", time: Date(timeIntervalSince1970: 1_795_000_100.2), state: .outside,
            previous: .inside, inferred: false, distance: 180, radius: 100,
            fix: EventFix(latitude: 51.5, longitude: -0.12, accuracy: 12, mode: .twoD, speed: nil, course: nil))
        let stored = StoredEvent(
            seq: 8, id: event.id, type: "exit", region: event.region, subject: "alice/phone", time: event.time,
            createdAt: event.time, body: JSONValue.object(event.json).serialized())
        let plan = SinkFormat.plan(
            [stored], format: .owntracks, topic: TopicTemplate("owntracks/{subject-levels}/event"), stateTopic: nil)
        #expect(plan.map(\.message.topic) == ["owntracks/alice/phone/event"])
        #expect(plan.first?.message.retain == false)
        let transition = try JSON.parse(try #require(plan.first).message.payload)
        let expected: JSONObject = [
            "_type": "transition", "event": "leave", "desc": "owntracks/alice/phone/1700000000",
            "rid": "owntracks/alice/phone/1700000000", "t": "c", "tid": "ne", "tst": 1_795_000_100,
            "wtst": 1_700_000_000, "lat": 51.5, "lon": -0.12, "acc": 12, "id": "01J0000000000000000000000B",
        ]
        #expect(transition.objectValue?.keys.sorted() == expected.keys.sorted())
        for (key, value) in expected { #expect(transition[key] == value, "\(key)") }
    }

    @Test("a PUBACK that comes before its id was recorded is matched when it is")
    func earlyAcknowledgement() {
        var ids = MessageIDs()
        ids.startBatch()
        let first = ids.acknowledged(5)
        let recorded = ids.published(5, event: 0)
        let waiting = ids.published(6, event: 1)
        let second = ids.acknowledged(6)
        let again = ids.acknowledged(6)
        #expect(first == nil && recorded)
        #expect(!waiting && second == .event(1))
        #expect(again == nil, "once")
    }

    @Test("a status id whose PUBACK went by unmatched does not take an event's PUBACK when the ids wrap")
    func statusIDWrapped() {
        // The status's PUBACK first (the loop thread was quicker than `publish` returning): matched.
        var ids = MessageIDs()
        let early = ids.acknowledged(7)
        let matched = ids.publishedStatus(7)
        ids.startBatch()
        let wrapped = ids.published(7, event: 3)  // 65,535 messages later, the same id
        let event = ids.acknowledged(7)
        #expect(early == nil && matched)
        #expect(!wrapped && event == .event(3))

        // Its PUBACK early and then forgotten by the next batch's start: the status id stays pending, and an
        // event's message with the same id is still that event's.
        var other = MessageIDs()
        let lost = other.acknowledged(9)
        other.startBatch()
        let pending = other.publishedStatus(9)
        let sameID = other.published(9, event: 4)
        let taken = other.acknowledged(9)
        #expect(lost == nil && !pending && !sameID)
        #expect(taken == .event(4))
        // The status's own PUBACK, when it does come.
        let status = other.publishedStatus(10)
        let statusAcknowledged = other.acknowledged(10)
        #expect(!status && statusAcknowledged == .status)
    }

    @Test("{subject-levels} keeps a subject's / as levels, each level encoded; {subject} is one level")
    func subjectLevels() {
        let owntracks = TopicTemplate("owntracks/{subject-levels}/event")
        #expect(
            owntracks.topic(subject: "alice/phone", region: "depot", type: "enter") == "owntracks/alice/phone/event")
        #expect(
            TopicTemplate("geofence/{subject}/{region}/event").topic(
                subject: "alice/phone", region: "depot", type: "enter")
                == "geofence/alice%2Fphone/depot/event")
        // No level can become a wildcard, and an empty level stays one.
        #expect(owntracks.topic(subject: "a+/#b//c", region: nil, type: "enter") == "owntracks/a%2B/%23b//c/event")
        #expect(owntracks.topic(subject: nil, region: nil, type: "services") == "owntracks/engine/event")
        #expect(TopicTemplate.problem("owntracks/{subject-levels}/event") == nil)
        #expect(TopicTemplate.problem("x/{subject-level}") != nil)
    }
}
