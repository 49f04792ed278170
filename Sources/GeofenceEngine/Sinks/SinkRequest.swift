import Foundation
import GeofenceCore
import GeofenceStore

/// `sink.add`'s parameters, checked: the same rules whether the engine or the CLI (no engine) applies them.
package enum SinkRequest {
    /// A definition from `sink.add`'s params, or a `ControlError` (`invalid`) saying what is wrong. `kind`
    /// names one of `SinkKinds.all` (default `mqtt`), which reads and checks its own params. The id is empty
    /// when none was given (one is generated).
    package static func definition(_ p: JSONObject, createdBy: UInt32?) throws -> SinkDefinition {
        func text(_ key: String) throws -> String? { try Self.text(p, key) }
        let name = try text("kind") ?? MQTTSinkKind.kind
        guard let kind = SinkKinds.kind(named: name) else { throw ControlError(.invalid, SinkKinds.unknown(name)) }
        var sink = try kind.definition(p)
        let events = try (p["on"]?.arrayValue ?? []).map { item -> String in
            guard let type = item.stringValue, GlobalHook.eventTypes.contains(type) else {
                throw ControlError(.invalid, "on: \(item.serialized()) is not an event type")
            }
            return type
        }
        var id = ""
        if let given = try text("id") {
            if let problem = GlobalHook.problem(withID: given) { throw ControlError(.invalid, "id: \(problem)") }
            id = given
        }
        sink.id = id
        sink.kind = kind.kind
        sink.events = GlobalHook.eventTypes.filter(Set(events).contains)
        sink.createdBy = createdBy
        sink.createdAt = Date()
        return sink
    }

    /// A string parameter, nil when absent or null; `badRequest` when not a string.
    package static func text(_ p: JSONObject, _ key: String) throws -> String? {
        guard let value = p[key], value != .null else { return nil }
        guard let s = value.stringValue else { throw ControlError(.badRequest, "params.\(key) must be a string") }
        return s
    }

    /// A definition as `sink list --json` shows it.
    package static func json(_ sink: SinkDefinition) -> JSONObject {
        if sink.kind == HTTPSinkKind.kind { return webhookJSON(sink) }
        var o: JSONObject = [
            "id": .string(sink.id), "kind": .string(sink.kind), "url": .string(sink.url), "topic": .string(sink.topic),
            "stateTopic": sink.stateTopic.map(JSONValue.string) ?? .null,
            "statusTopic": sink.statusTopic.map(JSONValue.string) ?? .null, "format": .string(sink.format),
            "on": .array((sink.events.isEmpty ? ["all"] : sink.events).map { .string($0) }),
            "createdAt": .string(TimestampParser.format(sink.createdAt)),
        ]
        if let file = sink.passwordFile { o["passwordFile"] = .string(file) }
        if let name = sink.passwordEnvironment { o["passwordEnv"] = .string(name) }
        if let ca = sink.caFile { o["caFile"] = .string(ca) }
        if let file = sink.certificateFile { o["certFile"] = .string(file) }
        if let file = sink.keyFile { o["keyFile"] = .string(file) }
        if let prefix = sink.discoveryPrefix { o["discoveryPrefix"] = .string(prefix) }
        if let uid = sink.createdBy { o["createdBy"] = .number(Double(uid)) }
        return o
    }

    /// A webhook's definition: its URL, where its secret is (never the secret), the names of its extra headers
    /// (their values may be credentials: `Authorization`), its CA file and timeout.
    static func webhookJSON(_ sink: SinkDefinition) -> JSONObject {
        var o: JSONObject = [
            "id": .string(sink.id), "kind": .string(sink.kind), "url": .string(sink.url),
            "on": .array((sink.events.isEmpty ? ["all"] : sink.events).map { .string($0) }),
            "timeout": .number(sink.timeout ?? HTTPSinkKind.defaultTimeout),
            "batch": .number(Double(sink.batch ?? 1)),
            "headers": .array(
                sink.headers.map { .string(String($0.prefix { $0 != ":" })) }),
            "signed": .bool(sink.secretFile != nil),
            "createdAt": .string(TimestampParser.format(sink.createdAt)),
        ]
        if let file = sink.secretFile { o["secretFile"] = .string(file) }
        if let ca = sink.caFile { o["caFile"] = .string(ca) }
        if let uid = sink.createdBy { o["createdBy"] = .number(Double(uid)) }
        return o
    }
}
