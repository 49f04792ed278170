import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

/// OwnTracks in full, against a real Mosquitto and a real engine: a phone's waypoints (`--mqtt-waypoints
/// regions`) create, change and remove its regions; its crossings come back as transitions whose fields are
/// those of the OwnTracks booklet; a bad waypoint is one log line and changes nothing; without the option,
/// waypoints are ignored as before.
@Suite(
    "OwnTracks waypoints and transitions against a private broker", .serialized,
    .enabled(if: MosquittoBroker.isAvailable, "\(MosquittoBroker.unavailableReason)"))
struct OwnTracksWaypointTests {
    static let first = "owntracks/alice/phone/1700000000"
    static let second = "owntracks/alice/phone/1700000100"

    /// The regions as `list --json` gives them, by id.
    static func regions(_ cli: CLI) throws -> [String: JSONValue] {
        let listed = try cli.run("list", "--json")
        var out: [String: JSONValue] = [:]
        for region in (try JSON.parse(listed.stdout)).arrayValue ?? [] {
            if let id = region["id"]?.stringValue { out[id] = region }
        }
        return out
    }

    /// Polls `list --json` until `done` holds (about 20 s at most).
    static func regions(_ cli: CLI, until done: ([String: JSONValue]) -> Bool) async throws -> [String: JSONValue] {
        var last: [String: JSONValue] = [:]
        _ = try await Wait.until(timeout: 20, every: .milliseconds(100)) {
            last = try regions(cli)
            return done(last)
        }
        return last
    }

    static func waypoint(tst: Int, desc: String, rad: Double, lat: Double = 48.85, lon: Double = 2.35) -> String {
        #"{"_type":"waypoint","desc":"\#(desc)","lat":\#(lat),"lon":\#(lon),"rad":\#(rad),"tst":\#(tst),"rid":"r\#(tst)"}"#
    }

    @Test("a waypoint makes a region of that phone; its crossings are transitions with the booklet's fields")
    func waypointsAndTransitions() async throws {
        let cli = try CLI()
        defer { cli.dir.remove() }
        let broker = try cli.broker(settings: ["max_queued_messages 0"])
        let url = "mqtt://127.0.0.1:\(broker.port)"
        let sink = try cli.run(
            "sink", "add", "--id", "phones", "--mqtt", url, "--format", "owntracks", "--on", "enter,exit,determined",
            "--topic", "owntracks/{subject-levels}/event", "--state-topic", "none", "--status-topic", "none")
        #expect(sink.status == 0, "\(sink.stderr)")
        try broker.makeSession(clientID: "phone-app", topic: "owntracks/+/+/event")
        let daemon = try cli.daemon(["--source", "\(url)/owntracks/#", "--mqtt-waypoints", "regions"])
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        #expect(daemon.log.contains("OwnTracks waypoints become regions"), "\(daemon.log)")

        // Created: the region of alice's phone, named by the waypoint's desc.
        #expect(
            try broker.publish(
                "owntracks/alice/phone/waypoint", [Self.waypoint(tst: 1_700_000_000, desc: "Depot", rad: 100)]) == 0)
        #expect(
            await daemon.waitForLog(#"OwnTracks waypoints of "alice/phone": 1 added ("\#(Self.first)")"#, timeout: 10),
            "\(daemon.log)")
        let created = try await Self.regions(cli) { $0[Self.first]?["status"]?.stringValue == "monitoring" }
        let region = created[Self.first]
        #expect(region?["name"]?.stringValue == "Depot", "\(created)")
        #expect(region?["radius"]?.doubleValue == 100)
        #expect(region?["lat"]?.doubleValue == 48.85 && region?["lon"]?.doubleValue == 2.35)
        #expect(region?["subjects"] == ["alice/phone"])
        #expect(region?["notify"] == ["enter", "exit"])

        // Alice drives through it, and so does bob, whose phone did not define it: only alice's events.
        #expect(try broker.publish("owntracks/alice/phone", (0...16).map { MQTTSourceTests.ownTracks($0) }) == 0)
        #expect(try broker.publish("owntracks/bob/phone", (0...16).map { MQTTSourceTests.ownTracks($0) }) == 0)
        #expect(await daemon.waitForLog("event exit", timeout: 15), "\(daemon.log)")
        let outbox = try StateStore(directory: cli.stateDir).outbox.events(after: 0, limit: 1000).filter {
            $0.region != nil
        }
        #expect(outbox.map(\.type) == ["determined", "enter", "exit"], "\(outbox.map(\.body))")
        #expect(Set(outbox.compactMap(\.subject)) == ["alice/phone"])
        let listed = try await MQTTSinkTests.sinks(cli, until: MQTTSinkTests.drained)
        #expect(MQTTSinkTests.drained(listed), "\(listed)")

        // What the phones' apps receive on owntracks/+/+/event: field by field, as the booklet gives them.
        let messages = MQTTSinkTests.split(
            try broker.receive(clientID: "phone-app", topic: "owntracks/+/+/event", seconds: 2))
        #expect(messages.map(\.topic) == ["owntracks/alice/phone/event", "owntracks/alice/phone/event"], "\(messages)")
        let transitions = try messages.map { try JSON.parse($0.payload) }
        for (transition, event) in zip(transitions, outbox.dropFirst()) {
            let fix = event.fields.fix
            let expected: JSONObject = [
                "_type": "transition", "event": event.type == "enter" ? "enter" : "leave", "desc": .string(Self.first),
                "rid": .string(Self.first), "t": "c", "tid": "ne",
                "tst": .number(event.time.timeIntervalSince1970.rounded(.down)), "wtst": 1_700_000_000,
                "lat": .number(try #require(fix).latitude), "lon": .number(try #require(fix).longitude),
                "acc": 5, "id": .string(event.id),
            ]
            #expect(transition.objectValue?.keys.sorted() == expected.keys.sorted(), "\(transition)")
            for (key, value) in expected { #expect(transition[key] == value, "\(key) of \(transition)") }
        }

        // Changed: the same waypoint (its tst) with a new radius and name replaces the region; sent again as it
        // is, it changes nothing.
        let changed = Self.waypoint(tst: 1_700_000_000, desc: "Depot, wider", rad: 250)
        #expect(try broker.publish("owntracks/alice/phone/waypoint", [changed]) == 0)
        #expect(await daemon.waitForLog("0 added, 1 changed (\"\(Self.first)\")", timeout: 10), "\(daemon.log)")
        #expect(try broker.publish("owntracks/alice/phone/waypoint", [changed]) == 0)
        #expect(await daemon.waitForLog("0 added, 0 changed, 0 removed, 1 unchanged", timeout: 10), "\(daemon.log)")
        let widened = try Self.regions(cli)[Self.first]
        #expect(
            widened?["radius"]?.doubleValue == 250 && widened?["name"]?.stringValue == "Depot, wider",
            "\(String(describing: widened))")

        // Bad: one line, nothing changed.
        let bad = Self.waypoint(tst: 1_700_000_000, desc: "Depot", rad: -5)
        #expect(try broker.publish("owntracks/alice/phone/waypoint", [bad]) == 0)
        let refusal =
            #"refused the OwnTracks waypoints on "owntracks/alice/phone/waypoint", nothing changed: rad: -5 is out of range"#
        #expect(await daemon.waitForLog(refusal, timeout: 10), "\(daemon.log)")
        #expect(try Self.regions(cli)[Self.first]?["radius"]?.doubleValue == 250)

        // The phone's whole list without the first waypoint: removed; the new one added.
        let list =
            #"{"_type":"waypoints","waypoints":[\#(Self.waypoint(tst: 1_700_000_100, desc: "Home", rad: 80, lat: 48.86, lon: 2.36))]}"#
        #expect(try broker.publish("owntracks/alice/phone/waypoints", [list]) == 0)
        #expect(
            await daemon.waitForLog(
                #"1 added ("\#(Self.second)"), 0 changed, 1 removed ("\#(Self.first)")"#, timeout: 10),
            "\(daemon.log)")
        let replaced = try await Self.regions(cli) { $0[Self.first] == nil && $0[Self.second] != nil }
        #expect(Set(replaced.keys) == [Self.second], "\(replaced.keys)")

        // Deleted as OwnTracks deletes one (a waypoint whose lat is out of range).
        #expect(
            try broker.publish(
                "owntracks/alice/phone/waypoint", [Self.waypoint(tst: 1_700_000_100, desc: "Home", rad: 80, lat: 1000)])
                == 0)
        #expect(await daemon.waitForLog(#"1 removed ("\#(Self.second)")"#, timeout: 10), "\(daemon.log)")
        #expect(try await Self.regions(cli) { $0.isEmpty }.isEmpty)
        #expect(await daemon.stop() != nil)

        // Without --mqtt-waypoints: a waypoint is ignored, as before.
        let plain = try cli.daemon(["--source", "\(url)/owntracks/#"], log: "plain.log")
        #expect(await plain.waitForLog("running:", timeout: 10), "\(plain.log)")
        #expect(
            try broker.publish(
                "owntracks/alice/phone/waypoint", [Self.waypoint(tst: 1_700_000_200, desc: "X", rad: 50)]) == 0)
        #expect(await plain.waitForLog("of class OwnTracks waypoint", timeout: 10), "\(plain.log)")
        #expect(try Self.regions(cli).isEmpty)
        #expect(await plain.stop() != nil)
    }
}
