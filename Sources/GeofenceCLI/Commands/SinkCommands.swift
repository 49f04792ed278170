import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

/// `geofence sink add`: publish events to an MQTT broker, or POST them to a webhook.
struct SinkAddCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "add",
        abstract: "Publish events to an MQTT broker, or POST them to a webhook (acknowledged, in order).",
        discussion: """
            The sink takes the events committed from now on. Give --mqtt or --http.

            --mqtt is the broker alone, mqtt://[USER@]HOST[:PORT] (1883) or mqtts://HOST[:PORT] (TLS, 8883). \
            The URL is stored, so it takes no password: give the password in a file the engine reads \
            (--password-file) or a variable of the engine's environment (--password-env). Topics are \
            templates: {subject}, {region} and {type} become the event's values, each as one topic level with \
            / + # and other bytes percent-encoded (/dev/ttyACM0 is %2Fdev%2FttyACM0); {subject-levels} keeps \
            each / of the subject as a level (alice/phone, as OwnTracks names a device). An event without a \
            subject has `engine`, one without a region its type.

            --http is a webhook, http:// or https:// (the system's CAs, or --http-ca): each event's JSON is \
            POSTed to it (with --batch N, up to N events per request as a JSON array), one request at a time \
            on a kept-alive connection, with X-Geofence-Event-Id (for de-duplication) and, with --secret-file, \
            X-Geofence-Signature: t=UNIX,v1=HEX, the HMAC-SHA256 of "<t>.<body>" (Docs/http.md). 2xx acknowledges; 4xx other than 408 and 429 makes the event a dead \
            letter (geofence events --dead) and the sink goes on; anything else is retried with backoff.

            Event types for --on: \(CommandTree.hookEventTypes); or all.
            """,
        options: [
            .value("--mqtt", valueName: "url", help: "The broker: mqtt://[USER@]HOST[:PORT] or mqtts://..."),
            .value("--http", valueName: "url", help: "The webhook: http://HOST[:PORT]/PATH or https://..."),
            .value(
                "--topic", valueName: "template",
                help: "MQTT: where each event goes (homeassistant: where each vehicle's tracker state goes).",
                defaultDescription: "geofence/{subject}/{region}/event; homeassistant: geofence/{subject}/tracker"),
            .value(
                "--format", valueName: "event|owntracks|homeassistant",
                help: """
                    MQTT: event: the event's JSON (Docs/events.md); owntracks: an OwnTracks transition for enter \
                    and exit (other events are not published, the state topic still is); homeassistant: one \
                    Home Assistant device tracker per vehicle by MQTT discovery, its state the region it is in \
                    (Docs/mqtt.md).
                    """, default: "event"),
            .value(
                "--discovery-prefix", valueName: "prefix",
                help: "MQTT, --format homeassistant: Home Assistant's discovery prefix.",
                defaultDescription: "homeassistant"),
            .value("--on", valueName: "types", help: "Comma-separated event types, or all.", default: "all"),
            .value(
                "--state-topic", valueName: "template",
                help: "MQTT: retained inside/outside per vehicle and region; none for no state topic.",
                defaultDescription: "geofence/{subject}/{region}/state; homeassistant: none"),
            .value(
                "--status-topic", valueName: "topic",
                help: "MQTT: retained online/offline (the last will) of the engine; none for no status topic.",
                default: "geofence/engine/status"),
            .value(
                "--password-file", valueName: "file",
                help: "MQTT: read the password from this file (one line) when connecting; an absolute path."),
            .value(
                "--password-env", valueName: "name",
                help: "MQTT: read the password from this variable of the engine's environment."),
            .value("--ca", valueName: "file", help: "With mqtts://, trust the CA certificates in this PEM file."),
            .value(
                "--cert", valueName: "file",
                help: "With mqtts://, present this client certificate (PEM) to a broker that asks for one; with --key."),
            .value(
                "--key", valueName: "file",
                help: "The private key (PEM, without a passphrase) of --cert: an absolute path the engine can read."),
            .value(
                "--secret-file", valueName: "file",
                help:
                    "HTTP: sign each request with the secret in this file (read when the sink starts); an absolute path."
            ),
            .repeating(
                "--header", valueName: "'Name: value'",
                help: "HTTP: add this header to each request (repeatable); sink list shows its name only."),
            .value("--http-ca", valueName: "file", help: "With https://, trust the CA certificates in this PEM file."),
            .value(
                "--batch", valueName: "n",
                help: "HTTP: POST up to this many events per request, as a JSON array (1: each event's JSON alone).",
                default: "1"),
            .value(
                "--timeout", valueName: "duration", help: "HTTP: give a request up (and retry it) after this long.",
                default: "10s"),
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
            Example(
                "One Home Assistant device tracker per vehicle, found by MQTT discovery:",
                "geofence sink add --id ha --mqtt mqtt://localhost --format homeassistant"),
            Example(
                "Crossings POSTed to a backend, signed:",
                "geofence sink add --id backend --http https://fleet.example/geofence --secret-file /etc/geofence/webhook.secret --on enter,exit"
            ),
        ])

    static let mqttOnly = [
        "--topic", "--format", "--state-topic", "--status-topic", "--password-file", "--password-env", "--ca", "--cert",
        "--key", "--discovery-prefix",
    ]
    static let httpOnly = ["--secret-file", "--header", "--http-ca", "--timeout", "--batch"]

    let url: String
    /// The request's parameters, every one checked.
    let params: JSONObject
    let requestID: String

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        let url: String
        var params: JSONObject
        switch (a.value("--mqtt"), a.value("--http")) {
        case (let mqtt?, nil): (url, params) = try Self.mqtt(mqtt, a, c)
        case (nil, let http?): (url, params) = try Self.http(http, a, c)
        case (nil, nil): throw c.usage("give --mqtt URL (a broker) or --http URL (a webhook)")
        case (_?, _?): throw c.usage("give --mqtt or --http, not both: one sink delivers to one place")
        }
        self.url = url
        let on = a.value("--on") ?? "all"
        params["on"] = .array(try HookCommands.eventTypes(on, c).map { .string($0) })
        if let id = a.value("--id") {
            if let problem = GlobalHook.problem(withID: id) { throw c.usage("invalid value for --id: \(problem)") }
            params["id"] = .string(id)
        }
        let requestID = try RegionCommands.requestID(a.value("--request-id"), c)
        params["requestId"] = .string(requestID)
        self.params = params
        self.requestID = requestID
    }

    private static func mqtt(_ url: String, _ a: ParsedArguments, _ c: CommandContext) throws -> (String, JSONObject) {
        if let other = httpOnly.first(where: { a.source(of: $0) == .commandLine }) {
            throw c.usage("\(other) is for a webhook (--http), not --mqtt")
        }
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
        var params: JSONObject = ["kind": .string(MQTTSinkKind.kind), "url": .string(url)]
        for (option, key) in [
            ("--topic", "topic"), ("--format", "format"), ("--state-topic", "stateTopic"),
            ("--status-topic", "statusTopic"), ("--password-file", "passwordFile"), ("--password-env", "passwordEnv"),
            ("--ca", "caFile"), ("--cert", "certFile"), ("--key", "keyFile"), ("--discovery-prefix", "discoveryPrefix"),
        ] {
            if let value = a.value(option) { params[key] = .string(value) }
        }
        for (option, check) in [
            ("--topic", TopicTemplate.problem), ("--state-topic", { $0 == "none" ? nil : TopicTemplate.problem($0) }),
            ("--status-topic", { $0 == "none" ? nil : TopicTemplate.problem($0) }),
        ] as [(String, (String) -> String?)] {
            if let value = a.value(option), let problem = check(value) {
                throw c.usage("invalid value for \(option): \(problem)")
            }
        }
        if let format = a.value("--format"), SinkFormat(rawValue: format) == nil {
            throw c.usage(
                "invalid value for --format: \(RegionCommands.quoted(format)) is not event, owntracks or homeassistant")
        }
        if let prefix = a.value("--discovery-prefix") {
            guard a.value("--format") == SinkFormat.homeassistant.rawValue else {
                throw c.usage("--discovery-prefix is for --format homeassistant")
            }
            if let problem = HomeAssistantDiscovery.prefixProblem(prefix) {
                throw c.usage("invalid value for --discovery-prefix: \(problem)")
            }
        }
        for option in ["--password-file", "--cert", "--key"] {
            if let file = a.value(option), !file.hasPrefix("/") {
                throw c.usage("invalid value for \(option): give an absolute path (the engine reads it)")
            }
        }
        return (url, params)
    }

    private static func http(_ url: String, _ a: ParsedArguments, _ c: CommandContext) throws -> (String, JSONObject) {
        if let other = mqttOnly.first(where: { a.source(of: $0) == .commandLine }) {
            throw c.usage("\(other) is for an MQTT sink (--mqtt), not --http")
        }
        let tls: Bool
        do {
            tls = try HTTPSinkKind.checkedURL(url)
        } catch {
            throw c.usage("invalid value for --http: \(error)")
        }
        var params: JSONObject = ["kind": .string(HTTPSinkKind.kind), "url": .string(url)]
        let headers = a.values("--header")
        for header in headers {
            if let problem = HTTPSinkKind.headerProblem(header) {
                throw c.usage("invalid value for --header: \(problem)")
            }
        }
        if !headers.isEmpty { params["headers"] = .array(headers.map { .string($0) }) }
        if let text = a.value("--timeout") {
            let seconds: Double
            do {
                seconds = try DurationParser.parse(text)
            } catch {
                throw c.usage("invalid value for --timeout: \(error)")
            }
            guard seconds >= 0.1, seconds <= HTTPSinkKind.maximumTimeout else {
                throw c.usage("invalid value for --timeout: give 100ms to \(Int(HTTPSinkKind.maximumTimeout))s")
            }
            params["timeout"] = .number(seconds)
        }
        if let text = a.value("--batch"), text != "1" {
            guard let n = Int(text), (1...HTTPSinkKind.maximumBatch).contains(n) else {
                throw c.usage(
                    "invalid value for --batch: \(RegionCommands.quoted(text)) is not 1 to \(HTTPSinkKind.maximumBatch)"
                )
            }
            params["batch"] = .number(Double(n))
        }
        if a.value("--http-ca") != nil && !tls {
            throw c.usage("--http-ca is for TLS: use https://")
        }
        for (option, key) in [("--secret-file", "secretFile"), ("--http-ca", "caFile")] {
            guard let file = a.value(option) else { continue }
            guard file.hasPrefix("/") else {
                throw c.usage("invalid value for \(option): give an absolute path (the engine reads it)")
            }
            // Missing here is missing for the engine too: said at once (the engine says whether it can read it).
            guard FileManager.default.fileExists(atPath: file) else {
                throw CommandFailure("\(option) \(file): no such file", exitCode: .noInput)
            }
            params[key] = .string(file)
        }
        return (url, params)
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
        let topic = sink["topic"]?.stringValue.map { " on " + $0 } ?? ""
        c.console.print(
            "Added sink \(RegionCommands.quoted(sink["id"]?.stringValue ?? "?")): \(types) events to "
                + "\(sink["url"]?.stringValue ?? url)\(topic)")
    }
}

/// `geofence sink list`.
struct SinkListCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "list",
        abstract: "List the sinks: where they deliver, connected or not, events waiting.",
        discussion: """
            WAITING is the sink's lag: events committed after its cursor that it takes. While the engine \
            runs, CONNECTED says whether the broker is connected (for a webhook: whether its last request was \
            answered), and PROBLEM the last error. A webhook's refused events: geofence events --dead.
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
            c.console.message("No sinks. Add one with: geofence sink add --mqtt mqtt://HOST (or --http URL)")
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
