import Foundation
import GeofenceCore
import GeofenceStore

/// `sink add --mqtt URL`: events published to an MQTT broker, QoS 1, acknowledged, in order (`MQTTSink`).
package enum MQTTSinkKind: SinkKind {
    package static let kind = "mqtt"

    /// The broker (no password: the URL is stored), its credentials by file or variable, TLS files, the
    /// format and the topics.
    package static func definition(_ p: JSONObject) throws -> SinkDefinition {
        func text(_ key: String) throws -> String? { try SinkRequest.text(p, key) }
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
        guard let format = SinkFormat(rawValue: formatName) else {
            throw ControlError(
                .invalid, "format: \"\(formatName.prefix(32))\" is not event, owntracks or homeassistant")
        }
        var discoveryPrefix = try text("discoveryPrefix")
        if format == .homeassistant {
            discoveryPrefix = discoveryPrefix ?? HomeAssistantDiscovery.defaultPrefix
            if let problem = discoveryPrefix.flatMap(HomeAssistantDiscovery.prefixProblem) {
                throw ControlError(.invalid, "discovery prefix: \(problem)")
            }
        } else if discoveryPrefix != nil {
            throw ControlError(.invalid, "a discovery prefix is for --format homeassistant")
        }
        func template(_ key: String, _ fallback: String) throws -> String? {
            let value = try text(key) ?? fallback
            if key != "topic" && value == "none" { return nil }
            if let problem = TopicTemplate.problem(value) { throw ControlError(.invalid, "\(key): \(problem)") }
            return value
        }
        let topicDefault =
            format == .homeassistant ? HomeAssistantDiscovery.defaultBase : TopicTemplate.eventDefault
        let topic = try template("topic", topicDefault) ?? topicDefault
        if format == .homeassistant, topic.contains("{region}") || topic.contains("{type}") {
            throw ControlError(
                .invalid,
                "topic: a Home Assistant tracker's topic is per vehicle: {subject} or {subject-levels}, no {region} "
                    + "or {type}")
        }
        // A Home Assistant sink's trackers say where each vehicle is; per-pair states only when asked for.
        let stateTopic = try template("stateTopic", format == .homeassistant ? "none" : TopicTemplate.stateDefault)
        let statusTopic = try template("statusTopic", TopicTemplate.statusDefault)
        if let statusTopic, statusTopic.contains("{") {
            throw ControlError(
                .invalid,
                "statusTopic: the engine's status topic has no {subject}, {subject-levels}, {region} or {type}")
        }
        return SinkDefinition(
            id: "", kind: kind, url: address.broker, topic: topic, stateTopic: stateTopic, statusTopic: statusTopic,
            format: formatName, passwordFile: passwordFile, passwordEnvironment: passwordEnvironment, caFile: caFile,
            certificateFile: certificateFile, keyFile: keyFile, discoveryPrefix: discoveryPrefix)
    }

    /// The sink, its password read from where the definition says.
    package static func makeSink(_ definition: SinkDefinition, context: SinkContext) throws -> any EventSink {
        var address = try MQTTAddress(broker: definition.url)
        address.caFile = definition.caFile
        address.certificateFile = definition.certificateFile
        address.keyFile = definition.keyFile
        if let file = definition.passwordFile {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw SinkUnavailable("cannot read the password file \(file)")
            }
            var password = String(decoding: data, as: UTF8.self)
            if password.hasSuffix("\n") { password.removeLast() }
            address.password = password
        } else if let name = definition.passwordEnvironment {
            guard let password = context.environment[name] else {
                throw SinkUnavailable("the engine's environment has no \(name) (the sink's password)")
            }
            address.password = password
        }
        var trackers: HomeAssistantTrackers?
        if definition.format == SinkFormat.homeassistant.rawValue {
            trackers = HomeAssistantTrackers(
                sinkID: definition.id,
                discovery: HomeAssistantDiscovery(
                    prefix: definition.discoveryPrefix ?? HomeAssistantDiscovery.defaultPrefix,
                    base: TopicTemplate(definition.topic), statusTopic: definition.statusTopic),
                stateDirectory: context.stateDirectory)
        }
        return MQTTSink(
            id: definition.id, address: address,
            clientID: MQTTAddress.clientID(stateDirectory: context.stateDirectory) + "-sink-" + definition.id,
            events: definition.events, format: SinkFormat(rawValue: definition.format) ?? .event,
            topic: TopicTemplate(definition.topic), stateTopic: definition.stateTopic.map(TopicTemplate.init),
            statusTopic: definition.statusTopic, logger: context.logger, trackers: trackers)
    }
}
