extension CommandTree {
    /// `geofence sink ...`: where the engine publishes events itself. Its subcommands: `SinkAddCommand`, ...
    static let sink = CommandSpec(
        name: "sink", abstract: "Manage event sinks: MQTT brokers and webhooks the engine delivers events to.",
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

            A webhook sink (--http) POSTs each event's JSON to a URL instead, one request at a time on a \
            kept-alive connection, in order, signed with HMAC-SHA256 when given a secret; the receiver's 2xx \
            acknowledges, a 4xx other than 408 and 429 makes the event a dead letter (geofence events --dead), \
            anything else is retried with backoff. Headers, signature and a verifying receiver: Docs/http.md.

            Sinks run in `geofence run`; a running engine starts and stops them as they are added and removed. \
            Adding and removing them is for root or the engine's own user.
            """,
        examples: [
            Example("Publish every event to a local broker:", "geofence sink add --mqtt mqtt://localhost"),
            Example("POST every event to a webhook:", "geofence sink add --http http://127.0.0.1:8080/events"),
            Example("See the sinks, whether they are connected and how far behind:", "geofence sink list"),
        ])

}
