import Foundation
import GeofenceEngine
import Testing

/// `--source mqtt://...` as users type it: wildcards are the topic filter's, never a URL fragment.
@Suite("MQTT address")
struct MQTTAddressTests {
    @Test("host, port, user, percent-encoded password, a filter with # and +; shown without the password")
    func parses() throws {
        let a = try MQTTAddress(parsing: "mqtt://engine:p%40ss%3Aw%2Frd@broker.example:1884/fleet/+/tpv/#")
        #expect(a.host == "broker.example" && a.port == 1884)
        #expect(a.username == "engine" && a.password == "p@ss:w/rd")
        #expect(a.topicFilter == "fleet/+/tpv/#")
        #expect(!a.tls)
        #expect(a.description == "mqtt://engine@broker.example:1884/fleet/+/tpv/#")
        let b = try MQTTAddress(parsing: "mqtt://[::1]/#")
        #expect(b.host == "::1" && b.port == 1883 && b.topicFilter == "#")
        #expect(b.description == "mqtt://[::1]:1883/#")
        let c = try MQTTAddress(parsing: "mqtts://broker/fleet/#")
        #expect(c.tls && c.port == 8883)
        #expect(c.description == "mqtts://broker:8883/fleet/#")
    }

    @Test("refused: no topic, a misplaced wildcard, a bad port, an empty host or user")
    func refuses() {
        for text in [
            "mqtt://broker", "mqtt://broker/", "mqtt://broker/a/#/b", "mqtt://broker/a#", "mqtt://broker/a+/b",
            "mqtt://broker:0/a", "mqtt://broker:x/a", "mqtt:///a", "mqtt://@broker/a", "http://broker/a",
            "mqtt://[::1/a",
        ] {
            #expect(throws: MQTTAddressError.self, "\(text)") { try MQTTAddress(parsing: text) }
        }
    }

    @Test("the password's place in the URL as typed (for blanking it in argv), colon included")
    func passwordSpan() {
        let text = "mqtt://u:secret@h/a/#"
        let span = MQTTAddress.passwordSpan(in: text)
        #expect(span.map { String(decoding: Array(text.utf8)[$0], as: UTF8.self) } == ":secret")
        #expect(MQTTAddress.passwordSpan(in: "mqtt://u@h/a") == nil)
        #expect(MQTTAddress.passwordSpan(in: "mqtt://h/a:b@c") == nil, "an @ in the filter is no userinfo")
    }

    @Test("the client id is the same for one state directory, and differs for another")
    func clientID() {
        let a = MQTTAddress.clientID(stateDirectory: "/var/lib/geofence/p0")
        #expect(a == MQTTAddress.clientID(stateDirectory: "/var/lib/geofence/p0/"))
        #expect(a != MQTTAddress.clientID(stateDirectory: "/var/lib/geofence/p1"))
        #expect(a.hasPrefix("geofence-"))
    }
}
