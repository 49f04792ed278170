extension CommandTree {
    /// `geofence sink ...`: where the engine publishes events itself.
    static let sink = CommandSpec(
        name: "sink", abstract: "Manage event sinks: MQTT brokers the engine publishes events to.",
        discussion: """
            A sink takes every committed event of the types it is registered for, in order, and publishes it \
            to an MQTT broker at QoS 1; an event counts as delivered when the broker acknowledged it (PUBACK). \
            Each sink keeps its own durable cursor in the store, so a broker that is away, or an engine that \
            is restarted or killed, delays events and never loses one: delivery is at least once, in order per \
            region (de-duplicate by the event's id). A sink never holds the monitor back.

            Besides each event, a sink keeps a retained state topic per vehicle and region (inside or \
            outside), so that a dashboard that connects later sees where each vehicle is, and a retained \
            engine status topic: online while the engine is connected, offline (its last will) when it is not. \
            Topics, payloads, TLS and recipes (OwnTracks, Home Assistant, Node-RED): Docs/mqtt.md.

            Sinks run in `geofence run`; a running engine starts and stops them as they are added and removed. \
            Adding and removing them is for root or the engine's own user.
            """,
        subcommands: [sinkAdd, sinkList, sinkRemove],
        examples: [
            Example("Publish every event to a local broker:", "geofence sink add --mqtt mqtt://localhost"),
            Example("See the sinks, whether they are connected and how far behind:", "geofence sink list"),
        ])

    static let sinkAdd = CommandSpec(
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
            \(hookEventTypes); or all.
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
            requestID,
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

    static let sinkList = CommandSpec(
        name: "list",
        abstract: "List the sinks: where they publish, connected or not, events waiting.",
        discussion: """
            WAITING is the sink's lag: events committed after its cursor that it takes. While the engine \
            runs, CONNECTED says whether the broker is connected, and PROBLEM the last error.
            """,
        examples: [Example("", "geofence sink list"), Example("For scripts:", "geofence sink list --json")])

    static let sinkRemove = CommandSpec(
        name: "remove",
        abstract: "Remove sinks by id.",
        discussion: """
            All or nothing: if any id does not exist, nothing is removed. A running engine stops the sink at \
            once; events it had not delivered are not delivered. Retained messages it published stay on the \
            broker (clear one with an empty retained message: mosquitto_pub -r -n -t TOPIC).
            """,
        options: [requestID],
        arguments: [.repeating("id", help: "Ids of the sinks to remove.", atLeastOne: true)],
        examples: [Example("", "geofence sink remove local")])
}
