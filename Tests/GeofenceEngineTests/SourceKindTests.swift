import Foundation
import GeofenceCore
import GeofenceEngine
import Testing

/// The kinds of source `run --source` can name (`SourceKinds.all`), and what the help and errors make of
/// the list: the same texts as when the kinds were written out by hand.
@Suite("source kinds")
struct SourceKindTests {
    static func arguments(_ values: [String: String] = [:], environment: [String: String] = [:])
        -> SourceArguments
    {
        SourceArguments(value: { values[$0] }, environment: environment)
    }

    @Test("each --source text goes to its kind, and to none when it names none")
    func naming() {
        let cases: [(String, String?)] = [
            ("gpsd", "GPSDSourceKind"), ("json:-", "JSONLinesSourceKind"), ("json:/tmp/f", "JSONLinesSourceKind"),
            ("mqtt://h/t", "MQTTSourceKind"), ("mqtts://h/t", "MQTTSourceKind"), ("json:", nil), ("serial", nil),
            ("GPSD", nil), ("nats://h:4222", "NATSSourceKind"), ("nats:", nil),
        ]
        for (text, kind) in cases {
            #expect(SourceKinds.kind(named: text).map { "\($0)" } == kind, "\(text)")
        }
    }

    @Test("the errors and the help list every kind, in the registry's order")
    func texts() {
        #expect(
            SourceKinds.notAKind("serial")
                == #""serial" is not gpsd, json:PATH, mqtt://HOST[:PORT]/TOPIC or nats://HOST:PORT[,HOST:PORT…]"#)
        #expect(
            SourceKinds.subjectRefusal
                == "--subject names a gpsd receiver: a fleet's vehicles are named by their fixes (--source json:, mqtt:// or nats://)"
        )
        #expect(SourceKinds.valueName == "gpsd|json:path|mqtt://host/topic|nats://host:port,…")
        #expect(
            SourceKinds.help
                == "Where fixes come from: gpsd; TPV JSON lines (the `device` field names the vehicle) from a file, a "
                + "FIFO, or - for standard input; an MQTT broker's topic filter, mqtt://[USER@]HOST[:PORT]/FILTER "
                + "(QoS 1, a persistent session; TPV or OwnTracks JSON), mqtts:// for TLS; or a NATS JetStream "
                + "cluster, nats://[USER@]HOST:PORT[,HOST:PORT…] (the password from --nats-password-file or "
                + "GEOFENCE_NATS_PASSWORD): this engine joins the engines that share the fleet's partitions (with "
                + "--partitions; Docs/cluster.md).")
        #expect(SourceKinds.all.filter { $0.takesSubject }.map { "\($0)" } == ["GPSDSourceKind"])
    }

    @Test("a kind's refusals name the option; a password is neither printed nor kept on the command line")
    func parsing() throws {
        do {
            _ = try GPSDSourceKind.parse("gpsd", Self.arguments(["--gpsd": "host:notaport"]))
            Issue.record("a bad --gpsd was taken")
        } catch SourceOptionError.invalid(let option, let reason) {
            #expect(option == "--gpsd" && !reason.isEmpty)
        }
        #expect(try JSONLinesSourceKind.parse("json:-", Self.arguments()).path == "-")
        let text = "mqtt://engine:s3cret@broker/fleet/#"
        let mqtt = try MQTTSourceKind.parse(text, Self.arguments(["--source": text]))
        #expect(mqtt.address.password == "s3cret")
        #expect(MQTTSourceKind.printable(text) == "mqtt://engine:(set)@broker/fleet/#")
        let secret = try #require(MQTTSourceKind.commandLineSecret(in: text))
        #expect(secret.variable == "GEOFENCE_MQTT_PASSWORD" && secret.value == "s3cret")
        #expect(Array(text.utf8)[secret.span].first == UInt8(ascii: ":"))
        #expect(
            mqtt.printedSecrets(Self.arguments(["--source": text]))
                == [PrintedSecret(name: "mqtt-password", variable: "GEOFENCE_MQTT_PASSWORD", option: "--source")])
        #expect(throws: SourceOptionError.usage("an MQTT password needs a user name: mqtt://USER@HOST[:PORT]/TOPIC")) {
            _ = try MQTTSourceKind.parse(
                "mqtt://broker/t", Self.arguments(environment: ["GEOFENCE_MQTT_PASSWORD": "p"]))
        }
        #expect(GPSDSourceKind.printable("gpsd") == "gpsd")
        #expect(GPSDSourceKind().printedSecrets(Self.arguments()).isEmpty)
    }
}
