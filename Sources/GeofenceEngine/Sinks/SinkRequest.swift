import Foundation
import GeofenceCore
import GeofenceStore

/// `sink.add`'s parameters, checked: the same rules whether the engine or the CLI (no engine) applies them.
package enum SinkRequest {
    /// A definition from `sink.add`'s params, or a `ControlError` (`invalid`) saying what is wrong. The id is
    /// empty when none was given (one is generated).
    package static func definition(_ p: JSONObject, createdBy: UInt32?) throws -> SinkDefinition {
        func text(_ key: String) throws -> String? {
            guard let value = p[key], value != .null else { return nil }
            guard let s = value.stringValue else { throw ControlError(.badRequest, "params.\(key) must be a string") }
            return s
        }
        guard let url = try text("url") else { throw ControlError(.badRequest, "sink.add needs params.url") }
        let address: MQTTAddress
        do {
            address = try MQTTAddress(broker: url)
        } catch {
            throw ControlError(.invalid, "url: \(error)")
        }
        if address.password != nil {
            throw ControlError(
                .invalid,
                "url: a sink's URL is stored, so it takes no password: give a file (--password-file) or a variable "
                    + "of the engine's environment (--password-env)")
        }
        let passwordFile = try text("passwordFile")
        let passwordEnvironment = try text("passwordEnv")
        if passwordFile != nil && passwordEnvironment != nil {
            throw ControlError(.invalid, "give --password-file or --password-env, not both")
        }
        if (passwordFile != nil || passwordEnvironment != nil) && address.username == nil {
            throw ControlError(.invalid, "a password needs a user name: mqtt://USER@HOST[:PORT]")
        }
        if let file = passwordFile {
            guard file.hasPrefix("/") else { throw ControlError(.invalid, "password file: give an absolute path") }
            guard FileManager.default.isReadableFile(atPath: file) else {
                throw ControlError(.invalid, "the engine cannot read the password file \(file)")
            }
        }
        if let name = passwordEnvironment,
            name.isEmpty
                || name.utf8.contains(where: { !($0 == 95 || (48...57).contains($0) || (65...90).contains($0)) })
        {
            throw ControlError(.invalid, "password variable: use A-Z, 0-9 and _ (e.g. GEOFENCE_SINK_PASSWORD)")
        }
        let caFile = try text("caFile")
        if let caFile {
            guard address.tls else { throw ControlError(.invalid, "a CA file is for TLS: use mqtts://") }
            guard caFile.hasPrefix("/"), FileManager.default.isReadableFile(atPath: caFile) else {
                throw ControlError(.invalid, "the engine cannot read the CA file \(caFile) (give an absolute path)")
            }
        }
        let certificateFile = try text("certFile")
        let keyFile = try text("keyFile")
        if certificateFile != nil || keyFile != nil {
            guard address.tls else { throw ControlError(.invalid, "a client certificate is for TLS: use mqtts://") }
            guard let certificateFile, let keyFile else {
                throw ControlError(.invalid, "a client certificate and its key go together (--cert and --key)")
            }
            for (what, file) in [("certificate", certificateFile), ("key", keyFile)]
            where !file.hasPrefix("/") || !FileManager.default.isReadableFile(atPath: file) {
                throw ControlError(.invalid, "the engine cannot read the \(what) file \(file) (give an absolute path)")
            }
        }
        let formatName = try text("format") ?? SinkFormat.event.rawValue
        guard SinkFormat(rawValue: formatName) != nil else {
            throw ControlError(.invalid, "format: \"\(formatName.prefix(32))\" is not event or owntracks")
        }
        func template(_ key: String, _ fallback: String) throws -> String? {
            let value = try text(key) ?? fallback
            if key != "topic" && value == "none" { return nil }
            if let problem = TopicTemplate.problem(value) { throw ControlError(.invalid, "\(key): \(problem)") }
            return value
        }
        let topic = try template("topic", TopicTemplate.eventDefault) ?? TopicTemplate.eventDefault
        let stateTopic = try template("stateTopic", TopicTemplate.stateDefault)
        let statusTopic = try template("statusTopic", TopicTemplate.statusDefault)
        if let statusTopic, statusTopic.contains("{") {
            throw ControlError(
                .invalid,
                "statusTopic: the engine's status topic has no {subject}, {subject-levels}, {region} or {type}")
        }
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
        return SinkDefinition(
            id: id, kind: "mqtt", url: address.broker, topic: topic, stateTopic: stateTopic, statusTopic: statusTopic,
            format: formatName, events: GlobalHook.eventTypes.filter(Set(events).contains), passwordFile: passwordFile,
            passwordEnvironment: passwordEnvironment, caFile: caFile, certificateFile: certificateFile,
            keyFile: keyFile,
            createdBy: createdBy, createdAt: Date())
    }

    /// A definition as `sink list --json` shows it.
    package static func json(_ sink: SinkDefinition) -> JSONObject {
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
        if let uid = sink.createdBy { o["createdBy"] = .number(Double(uid)) }
        return o
    }
}
