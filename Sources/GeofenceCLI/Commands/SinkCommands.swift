import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

/// `geofence sink add`: publish events to an MQTT broker.
struct SinkAddCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "add",
        abstract: "Publish events to an MQTT broker (QoS 1, acknowledged, in order).",
        discussion: """
            The sink takes the events committed from now on. --mqtt is the broker alone, \
            mqtt://[USER@]HOST[:PORT] (1883) or mqtts://HOST[:PORT] (TLS, 8883). The URL is stored, so it \
            takes no password: give the password in a file the engine reads (--password-file) or a variable \
            of the engine's environment (--password-env).

            Topics are templates: {subject}, {region} and {type} become the event's values, each as one topic \
            level with / + # and other bytes percent-encoded (/dev/ttyACM0 is %2Fdev%2FttyACM0); \
            {subject-levels} keeps each / of the subject as a level (alice/phone, as OwnTracks names a device). \
            An event without a subject has `engine`, one without a region its type. Event types for --on: \
            \(CommandTree.hookEventTypes); or all.
            """,
        options: [
            .value(
                "--mqtt", valueName: "url", help: "The broker: mqtt://[USER@]HOST[:PORT] or mqtts://...",
                required: true),
            .value(
                "--topic", valueName: "template", help: "Where each event goes.",
                default: "geofence/{subject}/{region}/event"),
            .value(
                "--format", valueName: "event|owntracks",
                help: """
                    event: the event's JSON (Docs/events.md); owntracks: an OwnTracks transition for enter and \
                    exit (other events are not published, the state topic still is).
                    """, default: "event"),
            .value("--on", valueName: "types", help: "Comma-separated event types, or all.", default: "all"),
            .value(
                "--state-topic", valueName: "template",
                help: "Retained inside/outside per vehicle and region; none for no state topic.",
                default: "geofence/{subject}/{region}/state"),
            .value(
                "--status-topic", valueName: "topic",
                help: "Retained online/offline (the last will) of the engine; none for no status topic.",
                default: "geofence/engine/status"),
            .value(
                "--password-file", valueName: "file",
                help: "Read the password from this file (one line) when connecting; an absolute path."),
            .value(
                "--password-env", valueName: "name",
                help: "Read the password from this variable of the engine's environment."),
            .value("--ca", valueName: "file", help: "With mqtts://, trust the CA certificates in this PEM file."),
            .value(
                "--cert", valueName: "file",
                help: "With mqtts://, present this client certificate (PEM) to a broker that asks for one; with --key."),
            .value(
                "--key", valueName: "file",
                help: "The private key (PEM, without a passphrase) of --cert: an absolute path the engine can read."),
            .value(
                "--id", valueName: "name",
                help: "A name for the sink: letters, digits, '.', '_', '-'. Generated when not given."),
            CommandTree.requestID,
        ],
        examples: [
            Example("Every event to a local broker:", "geofence sink add --id local --mqtt mqtt://localhost"),
            Example(
                "Crossings only, over TLS, with a password from a file:",
                "geofence sink add --mqtt mqtts://engine@broker.example --password-file /etc/geofence/sink.pw --on enter,exit"
            ),
            Example(
                "OwnTracks transitions, for Home Assistant's OwnTracks integration:",
                "geofence sink add --mqtt mqtt://localhost --format owntracks --on enter,exit,determined --topic 'owntracks/{subject}/event'"
            ),
        ])

    let url: String
    /// The request's parameters, every one checked.
    let params: JSONObject
    let requestID: String

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
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
        let requestID = try RegionCommands.requestID(a.value("--request-id"), c)
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
        self.url = url
        self.params = params
        self.requestID = requestID
    }

    func run(_ c: CommandContext) throws {
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
}

/// `geofence sink list`.
struct SinkListCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "list",
        abstract: "List the sinks: where they publish, connected or not, events waiting.",
        discussion: """
            WAITING is the sink's lag: events committed after its cursor that it takes. While the engine \
            runs, CONNECTED says whether the broker is connected, and PROBLEM the last error.
            """,
        examples: [Example("", "geofence sink list"), Example("For scripts:", "geofence sink list --json")])

    init(parsing a: ParsedArguments, context c: CommandContext) throws {}

    func run(_ c: CommandContext) throws {
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
}

/// `geofence sink remove`.
struct SinkRemoveCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "remove",
        abstract: "Remove sinks by id.",
        discussion: """
            All or nothing: if any id does not exist, nothing is removed. A running engine stops the sink at \
            once; events it had not delivered are not delivered. Retained messages it published stay on the \
            broker (clear one with an empty retained message: mosquitto_pub -r -n -t TOPIC).
            """,
        options: [CommandTree.requestID],
        arguments: [.repeating("id", help: "Ids of the sinks to remove.", atLeastOne: true)],
        examples: [Example("", "geofence sink remove local")])

    let removal: RemovalByID

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        removal = try RemovalByID(parsing: a, context: c)
    }

    func run(_ c: CommandContext) throws {
        let result = try removal.send(.sinkRemove, check: "geofence sink list", c)
        if c.json {
            c.console.print(result.serialized())
            return
        }
        for id in result["removed"]?.arrayValue?.compactMap(\.stringValue) ?? [] {
            c.console.print("Removed sink \(RegionCommands.quoted(id))")
        }
    }
}
