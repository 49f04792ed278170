import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

/// Kinds of sink (`SinkKinds.all`): `sink.add` names one (`mqtt` when it names none), and a kind this engine
/// does not know, in a request or in the store, is one clear error.
@Suite("sink kinds", .serialized)
struct SinkKindTests {
    static let unknown = #"unknown kind of sink "nats": this engine knows mqtt, http"#

    @Test("sink.add of a kind the engine does not know is refused, one error, and nothing is added")
    func unknownKindInRequest() async throws {
        try await withCLI { cli in
            let daemon = try cli.daemon(["--gpsd", "127.0.0.1:9"])
            #expect(await daemon.waitForLog("control socket at", timeout: 10), "\(daemon.log)")
            let raw = try RawClient(cli.socket)
            defer { raw.close() }
            // An MQTT URL, so that an engine that ignored the kind would have made an MQTT sink of it.
            let refused = try JSON.parse(
                try raw.exchange(
                    #"{"id":1,"method":"sink.add","params":{"kind":"nats","id":"n","url":"mqtt://127.0.0.1:9"}}"#))
            #expect(refused["ok"] == false)
            #expect(refused["error"]?["code"]?.stringValue == "invalid")
            #expect(refused["error"]?["message"]?.stringValue == Self.unknown, "\(refused)")
            #expect(try StateStore(directory: cli.stateDir).sinks.all().isEmpty, "nothing was added")

            let named = try JSON.parse(
                try raw.exchange(
                    #"{"id":2,"method":"sink.add","params":{"kind":"mqtt","id":"named","url":"mqtt://127.0.0.1:9"}}"#))
            #expect(named["ok"] == true, "\(named)")
            let unnamed = try JSON.parse(
                try raw.exchange(#"{"id":3,"method":"sink.add","params":{"id":"plain","url":"mqtt://127.0.0.1:9"}}"#))
            #expect(unnamed["ok"] == true, "\(unnamed)")
            let kinds = try StateStore(directory: cli.stateDir).sinks.all().map { "\($0.id) \($0.kind)" }.sorted()
            #expect(kinds == ["named mqtt", "plain mqtt"])
            _ = await daemon.stop()
        }
    }

    @Test("a stored sink of a kind the engine does not know is that sink's problem in sink list")
    func unknownKindInStore() async throws {
        try await withCLI { cli in
            // Stored by a newer engine, say, and read by this one.
            let store = try StateStore(directory: cli.stateDir)
            _ = try store.sinks.add(SinkDefinition(id: "later", kind: "nats", url: "nats://h:4222", topic: "t"))
            let daemon = try cli.daemon(["--gpsd", "127.0.0.1:9"])
            #expect(await daemon.waitForLog("sink later: ", timeout: 10), "\(daemon.log)")
            #expect(daemon.log.contains("sink later: \(Self.unknown); trying again every second"), "\(daemon.log)")
            let sinks = try await MQTTSinkTests.sinks(cli) { $0.first?["problem"] != nil }
            #expect(sinks.count == 1)
            #expect(sinks.first?["id"]?.stringValue == "later")
            #expect(sinks.first?["connected"] == false)
            #expect(sinks.first?["problem"]?.stringValue == Self.unknown, "\(sinks)")
            _ = await daemon.stop()
        }
    }
}
