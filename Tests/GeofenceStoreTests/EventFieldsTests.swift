import Foundation
import GeofenceCore
import GeofenceStore
import Testing

@Suite("event fields")
struct EventFieldsTests {
    static let time = Date(timeIntervalSince1970: 1_795_000_000)

    static func stored(_ body: String) -> StoredEvent {
        StoredEvent(
            seq: 1, id: "e1", type: "determined", region: "depot", subject: "v1", time: time, createdAt: time,
            body: body)
    }

    @Test("a region event's state, fix and scalar members are decoded once, with the body")
    func regionEvent() {
        let event = RegionEvent(
            id: "e1", type: .determined, region: "depot", subject: "v1", time: Self.time, state: .outside,
            previous: nil, inferred: true, distance: 12.34, radius: 100,
            fix: EventFix(latitude: 51.5001, longitude: -0.1201, accuracy: 4.2, mode: .threeD, speed: 8.1, course: nil))
        let fields = Self.stored(JSONValue.object(event.json).serialized()).fields
        #expect(fields.state == .outside)
        #expect(fields.fix == event.fix)
        #expect(
            fields.scalars.map { "\($0.inFix ? "fix." : "")\($0.key)=\($0.text)" } == [
                "id=e1", "type=determined", "region=depot", "subject=v1",
                "time=\(TimestampParser.format(Self.time))", "state=outside", "inferred=true", "distance=12.3",
                "radius=100", "fix.lat=51.5001", "fix.lon=-0.1201", "fix.accuracy=4.2", "fix.mode=3", "fix.speed=8.1",
            ])
    }

    @Test("a state event's own state is not a region state; a body that is not an object has no fields")
    func otherBodies() {
        let source = Self.stored(#"{"id":"e1","type":"source","state":"lost","details":{"a":1},"n":[1]}"#)
        #expect(source.fields.state == nil && source.fields.fix == nil)
        #expect(source.fields.scalars.map(\.key) == ["id", "type", "state"])
        #expect(Self.stored("not json").fields == EventFields(body: "[]"))
        #expect(Self.stored("not json").fields.scalars.isEmpty)
    }

    @Test("a new body is decoded again")
    func bodyChanges() {
        var event = Self.stored(#"{"state":"inside"}"#)
        #expect(event.fields.state == .inside)
        event.body = #"{"state":"outside"}"#
        #expect(event.fields.state == .outside)
    }
}
