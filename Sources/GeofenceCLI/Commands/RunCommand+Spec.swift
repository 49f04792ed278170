import GeofenceEngine

extension CommandTree {
    /// Every valued option of `run` may also come from the environment, under one name each: GEOFENCE_ and the
    /// option's name in capitals, `--stale-after` → GEOFENCE_STALE_AFTER (so the unit's EnvironmentFile=,
    /// /etc/default/geofence, holds an engine's settings). The command line wins over the environment, the
    /// environment over the default.
    static func fromEnvironment(_ options: [OptionSpec]) -> [OptionSpec] {
        options.map { option in
            guard option.kind == .value, option.environmentVariable == nil else { return option }
            var named = option
            named.environmentVariable =
                "GEOFENCE_"
                + option.name.drop(while: { $0 == "-" }).uppercased().replacingOccurrences(of: "-", with: "_")
            return named
        }
    }

    static let gpsd = OptionSpec.value(
        "--gpsd", valueName: "host[:port[:device]]",
        help: "The gpsd to use, as gpsd's own clients take it; a device limits it to one receiver.",
        defaultDescription: "localhost:2947", environment: "GEOFENCE_GPSD")

}

extension OptionSpec {
    /// A source kind's option (`SourceKind.options`), as `run` declares it.
    init(_ option: SourceOption) {
        self = .value(
            option.name, valueName: option.valueName, help: option.help, default: option.defaultValue,
            defaultDescription: option.defaultDescription)
    }
}

/// `geofence run`'s help and options (its parsing and work: RunCommand.swift).
extension RunCommand {
    static let spec = CommandSpec(
        name: "run",
        abstract: "Run the engine: monitor the stored regions with live fixes.",
        discussion: """
            The daemon. It loads the regions from the store, reads fixes from gpsd (or, for a fleet, from \
            gpsd-style JSON lines with --source json:PATH), runs them through the fix filter and the region \
            monitor, and stores state and events exactly as `replay` does. Regions added or removed with \
            the CLI while it runs are picked up within a second. One line per event and state change goes \
            to stderr (with syslog priority prefixes under systemd). SIGTERM or SIGINT stop it cleanly \
            within two seconds. A stop that cannot commit what it judged (a full disk) says so in one line \
            naming each vehicle and the fix time from which to send its fixes again, and exits 74. Only one \
            engine may run on a state directory at a time.

            When gpsd is absent, dies or restarts, the engine keeps retrying with backoff; a source (gpsd or \
            JSON lines) that gives no usable fix within the first-fix deadline is reported `silent`, one \
            that stops giving them for the staleness limit `lost`, and `restored` when fixes return. JSON \
            lines that give no usable fix are counted by reason (`status` shows the counts) and the first of \
            each kind is logged. A JSON source that cannot be opened at start is an error (exit 66).

            With --source mqtt://..., the engine subscribes with QoS 1 and a persistent session (clean \
            session off, a fixed client id), so fixes published while it is down are delivered when it \
            returns; it reconnects with backoff (1 s doubling to 30 s). A payload is a gpsd TPV (its \
            `device` names the vehicle, else the topic) or an OwnTracks location (the vehicle USER/DEVICE \
            from owntracks/USER/DEVICE); others are counted by reason. A broker that is unreachable or \
            refuses the connection at start is an error (exit 69). The password is never logged or shown.

            Every option below can also be set in the environment (its variable is shown with it; under \
            systemd, in /etc/default/geofence): the command line wins, then the environment, then the \
            default. --print-config shows the settings that would take effect and where each came from, and \
            exits. Under systemd (Type=notify) the engine says when it is ready, what it does, when it stops, \
            and that its monitor is alive (the unit's WatchdogSec=); see Docs/operations.md.
            """,
        options: CommandTree.fromEnvironment(
            [
                CommandTree.gpsd,
                .value(
                    "--subject", valueName: "name",
                    help: """
                        The name of this box's receiver: the subject of its fixes and events (and the vehicle \
                        in `vehicles`), instead of gpsd's device path. With a gpsd source only.
                        """, defaultDescription: "gpsd's device path, e.g. /dev/ttyACM0"),
                .value(
                    "--source", valueName: SourceKinds.valueName, help: SourceKinds.help, default: "gpsd"),
            ] + SourceKinds.all.flatMap { $0.options }.map(OptionSpec.init)
                + [
                    .value(
                        "--first-fix-deadline", valueName: "duration",
                        help: "Report the source `silent` if no usable fix arrives this long after (re)starting.",
                        default: "60s"),
                    .value(
                        "--stale-after", valueName: "duration",
                        help: "Report the source `lost` when usable fixes stop for this long.", default: "10s"),
                    .value(
                        "--max-accuracy", valueName: "metres",
                        help: "Refuse fixes whose horizontal accuracy is worse (poorer ones are weighed, not refused).",
                        default: "5000"),
                    .value(
                        "--max-future-skew", valueName: "duration",
                        help: """
                            Refuse fixes dated further ahead of this machine's clock (a device's wrong clock would \
                            hold its true fixes back as out of order).
                            """,
                        default: "5s"),
                    .value(
                        "--min-margin", valueName: "metres",
                        help: "Narrowest half-width of the hysteresis band around a boundary.", default: "5"),
                    .value(
                        "--acceleration", valueName: "m/s²",
                        help: "How hard a vehicle manoeuvres: a fix that needs more acceleration is an outlier.",
                        default: "4"),
                    .value(
                        "--pass-acceleration", valueName: "m/s²",
                        help: """
                            Report a pass between two fixes outside a region when every path a vehicle could take \
                            between them, going faster than their speeds by at most this much, crosses it; `off` \
                            reports none (Docs/events.md, "Passes between fixes").
                            """,
                        default: "0.5"),
                    .value(
                        "--pass-turn-acceleration", valueName: "m/s²",
                        help: """
                            For a pass between two fixes with courses: how sharply a vehicle can turn, brake and \
                            speed up together, which bounds how far a path can swerve from the line between them \
                            (8: a car on dry asphalt; 4 for heavy vehicles); `off` bounds only its length.
                            """,
                        default: "8"),
                    .value(
                        "--track-factor", valueName: "factor",
                        help: """
                            Let a vehicle's track decide a fix in the band when the motion check's estimate is \
                            outside that band, made this many times as wide as for a fix whose accuracy is two of \
                            the estimate's standard deviations (1.5: three); `off` lets only fixes decide \
                            (Docs/events.md, "Decisions on the track").
                            """,
                        default: "1.5"),
                    .value(
                        "--idle-after", valueName: "duration",
                        help:
                            "Drop a vehicle not heard from for this long from memory (its state stays in the store and returns with its next fix); `never` keeps all.",
                        default: "1d"),
                    .value(
                        "--max-regions", valueName: "n",
                        help:
                            "Monitor at most this many regions (the oldest first); the others wait as `pending: limit`."
                    ),
                    .value(
                        "--metrics", valueName: "address",
                        help: """
                            Serve Prometheus metrics at http://ADDRESS/metrics and a health check at /healthz (200 \
                            while the monitor, the store and the source all work, else 503 and why): IP:PORT, \
                            [IPV6]:PORT, or a port alone for 127.0.0.1. Off unless given; bind it to loopback or a \
                            trusted network.
                            """),
                    .value(
                        "--api", valueName: "on|off",
                        help: """
                            on: serve the HTTP API (/v1/: regions, status, events and their live stream, vehicles; \
                            Docs/http.md) on the server of --metrics, to clients with a token of `geofence token add`.
                            """, default: "off"),
                    .value(
                        "--map-tiles", valueName: "url-template",
                        help: """
                            With --api on: the live map (/map) draws on tiles from this server (Leaflet's template, \
                            such as https://tile.openstreetmap.org/{z}/{x}/{y}.png), and may load images from it \
                            only. Off unless given: a graticule, and no network.
                            """),
                    .value(
                        "--tls-cert", valueName: "file",
                        help: "Serve --metrics (and the API) over HTTPS with this certificate (PEM); with --tls-key."),
                    .value("--tls-key", valueName: "file", help: "The private key (PEM) of --tls-cert."),
                    .value(
                        "--log-level", valueName: "level", help: "error, warning, notice, info or debug.",
                        default: "info"),
                    .flag(
                        "--print-config",
                        help:
                            "Print the settings that would take effect and where each came from, and exit (no engine starts)."
                    ),
                ] + CommandTree.hookOptions),
        examples: [
            Example("With the local gpsd:", "geofence run"),
            Example("With one receiver of a remote gpsd:", "geofence run --gpsd 10.0.0.7:2947:/dev/ttyACM0"),
            Example("A box that names itself in its events:", "geofence run --subject truck-7"),
            Example(
                "A fleet, fed by gpsd-style JSON lines:",
                "kcat -C -b kafka:9092 -t fixes -u | geofence run --source json:-"),
            Example(
                "A fleet from an MQTT broker (password from a file):",
                "geofence run --source 'mqtt://engine@broker/fleet/#' --mqtt-password-file /etc/geofence/mqtt.pw"),
            Example(
                "Settings from the environment, checked before a restart:",
                "GEOFENCE_STALE_AFTER=30s geofence run --print-config"),
            Example("With metrics for Prometheus on loopback:", "geofence run --metrics 127.0.0.1:9464"),
            Example(
                "With the HTTP API over HTTPS on every address:",
                "geofence run --metrics 0.0.0.0:8443 --api on --tls-cert /etc/geofence/cert.pem --tls-key /etc/geofence/key.pem"
            ),
            Example("As a service:", "sudo systemctl enable --now geofence"),
        ])

}
