import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

/// `geofence sink ...`.
enum SinkCommands {
    static func run(_ path: [String], _ c: CommandContext) throws {
        switch path {
        case ["sink", "add"]: try add(c)
        case ["sink", "list"]: try list(c)
        case ["sink", "remove"]: try remove(c)
        default:
            throw CommandFailure("'\(path.joined(separator: " "))' is not implemented", exitCode: .software)
        }
    }

    static func add(_ c: CommandContext) throws {
        let a = c.arguments
        let url = try a.required("--mqtt")
        // Said before anything is sent: a password typed into the URL is in `ps` and the shell's history.
        if (try? MQTTAddress(broker: url))?.password != nil {
            throw c.usage(
                "invalid value for --mqtt: a sink's URL is stored, so it takes no password; use --password-file "
                    + "FILE or --password-env NAME")
        }
        do {
            _ = try MQTTAddress(broker: url)
        } catch {
            throw c.usage("invalid value for --mqtt: \(error)")
        }
        var params: JSONObject = ["url": .string(url)]
        let on = a.value("--on") ?? "all"
        params["on"] = .array(try HookCommands.eventTypes(on, c).map { .string($0) })
        for (option, key) in [
            ("--topic", "topic"), ("--format", "format"), ("--state-topic", "stateTopic"),
            ("--status-topic", "statusTopic"), ("--password-file", "passwordFile"), ("--password-env", "passwordEnv"),
            ("--ca", "caFile"), ("--cert", "certFile"), ("--key", "keyFile"), ("--id", "id"),
        ] {
            if let value = a.value(option) { params[key] = .string(value) }
        }
        let requestID = try RegionCommands.requestID(c)
        params["requestId"] = .string(requestID)
        for (option, check) in [
            ("--topic", TopicTemplate.problem), ("--state-topic", { $0 == "none" ? nil : TopicTemplate.problem($0) }),
            ("--status-topic", { $0 == "none" ? nil : TopicTemplate.problem($0) }),
        ] as [(String, (String) -> String?)] {
            if let value = a.value(option), let problem = check(value) {
                throw c.usage("invalid value for \(option): \(problem)")
            }
        }
        if let format = a.value("--format"), SinkFormat(rawValue: format) == nil {
            throw c.usage("invalid value for --format: \(RegionCommands.quoted(format)) is not event or owntracks")
        }
        if let id = a.value("--id"), let problem = GlobalHook.problem(withID: id) {
            throw c.usage("invalid value for --id: \(problem)")
        }
        for option in ["--password-file", "--cert", "--key"] {
            if let file = a.value(option), !file.hasPrefix("/") {
                throw c.usage("invalid value for \(option): give an absolute path (the engine reads it)")
            }
        }
        let sink = try c.interruptible(requestID: requestID, check: "geofence sink list") {
            try c.call(.sinkAdd, params)
        }
        if c.json {
            c.console.print(sink.serialized())
            return
        }
        let types = (sink["on"]?.arrayValue?.compactMap(\.stringValue) ?? []).joined(separator: ",")
        c.console.print(
            "Added sink \(RegionCommands.quoted(sink["id"]?.stringValue ?? "?")): \(types) events to "
                + "\(sink["url"]?.stringValue ?? url) on \(sink["topic"]?.stringValue ?? "?")")
    }

    static func list(_ c: CommandContext) throws {
        let sinks = try c.call(.sinkList).arrayValue ?? []
        if c.json {
            c.console.print(JSONValue.array(sinks).serialized())
            return
        }
        guard !sinks.isEmpty else {
            c.console.message("No sinks. Add one with: geofence sink add --mqtt mqtt://HOST")
            return
        }
        var table = TextTable(["ID", "ON", "CONNECTED", "WAITING", "URL", "TOPIC", "PROBLEM"])
        for sink in sinks {
            table.add([
                sink["id"]?.stringValue ?? "",
                (sink["on"]?.arrayValue?.compactMap(\.stringValue) ?? []).joined(separator: ","),
                sink["connected"]?.boolValue == true ? "yes" : "no",
                String(sink["waiting"]?.intValue ?? 0), sink["url"]?.stringValue ?? "",
                sink["topic"]?.stringValue ?? "", sink["problem"]?.stringValue ?? "",
            ])
        }
        c.console.write(table.render())
    }

    static func remove(_ c: CommandContext) throws {
        let ids = c.arguments.values("id")
        let requestID = try RegionCommands.requestID(c)
        let result = try c.interruptible(requestID: requestID, check: "geofence sink list") {
            try c.call(.sinkRemove, ["ids": .array(ids.map { .string($0) }), "requestId": .string(requestID)])
        }
        if c.json {
            c.console.print(result.serialized())
            return
        }
        for id in result["removed"]?.arrayValue?.compactMap(\.stringValue) ?? [] {
            c.console.print("Removed sink \(RegionCommands.quoted(id))")
        }
    }
}
