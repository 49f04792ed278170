import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

/// Events made by another engine (a cluster's, read by `geofence deliver`) into the outbox: what counts as an
/// event, and an append that skips what is there and records the reader's position with the events.
@Suite("received events")
struct ReceivedEventTests {
    static let body =
        #"{"id":"0193a4c2-7f1e-7c3a-9d2b-000000000001","type":"enter","region":"depot","subject":"truck-7","time":"2026-11-30T14:03:07.000Z","state":"inside","previous":"outside","inferred":false}"#

    @Test("an event's columns come from its JSON; the body is kept exactly as received")
    func parses() throws {
        let event = try ReceivedEvent(payload: Array(Self.body.utf8))
        #expect(event.id == "0193a4c2-7f1e-7c3a-9d2b-000000000001")
        #expect(event.type == "enter" && event.region == "depot" && event.subject == "truck-7")
        #expect(event.time == (try TimestampParser.parse("2026-11-30T14:03:07.000Z")))
        #expect(event.body == Self.body)
        // A state event has neither region nor subject.
        let state = try ReceivedEvent(
            payload: Array(#"{"id":"s1","type":"services","time":"2026-11-30T14:03:07Z","state":"off"}"#.utf8))
        #expect(state.region == nil && state.subject == nil)
    }

    @Test("what is not an event is refused, saying why")
    func refuses() {
        let cases: [(String, String)] = [
            ("not json", "not a JSON object"),
            ("[1]", "not a JSON object"),
            (#"{"type":"enter","time":"2026-11-30T14:03:07Z"}"#, "no \"id\""),
            (#"{"id":"","type":"enter","time":"2026-11-30T14:03:07Z"}"#, "no \"id\""),
            (#"{"id":"a","time":"2026-11-30T14:03:07Z"}"#, "no \"type\""),
            (#"{"id":"a","type":"enter"}"#, "no \"time\""),
            (#"{"id":"a","type":"enter","time":"yesterday"}"#, "no \"time\""),
            (#"{"id":"a","type":"enter","time":"2026-11-30T14:03:07Z","region":7}"#, "\"region\" is not a string"),
        ]
        for (payload, reason) in cases {
            #expect(throws: ReceivedEvent.Invalid.self, "\(payload)") {
                try ReceivedEvent(payload: Array(payload.utf8))
            }
            do {
                _ = try ReceivedEvent(payload: Array(payload.utf8))
            } catch {
                #expect(error.description.contains(reason), "\(payload): \(error)")
            }
        }
    }

    @Test("an append skips ids already in the outbox and records the position in the same transaction")
    func appendsOnce() throws {
        try withTemporaryDirectory { directory in
            let store = try StateStore(directory: directory.path)
            let first = try ReceivedEvent(payload: Array(Self.body.utf8))
            let second = try ReceivedEvent(
                payload: Array(Self.body.replacingOccurrences(of: "000000000001", with: "000000000002").utf8))
            #expect(try store.outbox.appendReceived([first], position: ("deliver.stream-sequence", "5")) == 1)
            #expect(try store.outbox.appendReceived([first, second], position: ("deliver.stream-sequence", "9")) == 1)
            #expect(try store.outbox.appendReceived([second, first]) == 0)
            let events = try store.outbox.events()
            #expect(events.map(\.id) == [first.id, second.id])
            #expect(events.map(\.body) == [first.body, second.body])
            #expect(try store.settings.value("deliver.stream-sequence") == "9")
        }
    }
}
