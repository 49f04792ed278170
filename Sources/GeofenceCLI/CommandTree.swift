/// The `geofence` command tree: every command, option and example, in one place.
enum CommandTree {
    static let stateDir = OptionSpec.value(
        "--state-dir", valueName: "dir",
        help: "Directory holding the store (geofence.db). Created with mode 0700 when missing.",
        defaultDescription: StateDirectory.helpDefault, environment: "GEOFENCE_STATE_DIR", inherited: true)
    static let json = OptionSpec.flag("--json", help: "Print JSON instead of text, for scripts.", inherited: true)
    static let requestID = OptionSpec.value(
        "--request-id", valueName: "id",
        help: """
            Make the change under this id (1 to 128 bytes; generated when not given). A running engine records it: the same command again with the same id is answered from the record, not applied twice.
            """)

    static let root = CommandSpec(
        name: "geofence",
        abstract: "Geofencing and location monitoring for Linux, fed by gpsd or a fleet's stream.",
        discussion: """
            geofence watches regions (circles, and polygons with geodesic edges) and turns real boundary \
            crossings into durable events. Regions live in a SQLite store in the state directory; \
            `geofence run` monitors them with live fixes from gpsd, or from a fleet's JSON lines or MQTT \
            topic, and `geofence replay` runs recorded gpsd output through exactly the same pipeline.
            """,
        options: [
            stateDir, json, socket,
            .flag("--version", help: "Print the version and exit."),
        ],
        subcommands: [
            add, remove, list, show, importCommand, export, replay, run, locate, status, watch, services, permission,
            hook, sink, events, vehicles,
        ],
        runsWithoutSubcommand: true,
        examples: [
            Example(
                "Watch a depot, 200 m around a point:",
                "geofence add --id depot --lat 51.5007 --lon -0.1246 --radius 200"),
            Example("See what is watched:", "geofence list"),
            Example("Run a recorded drive through the regions:", "gpspipe -w | geofence replay -"),
        ])

    static let add = CommandSpec(
        name: "add",
        abstract: "Add a region to monitor: a circle (--lat, --lon, --radius) or a polygon (--polygon).",
        discussion: """
            The region is stored at once and survives restarts; a running engine picks it up within a \
            second. Coordinates are WGS84 degrees; the radius is in metres, measured along the ellipsoid. \
            A polygon's edges are geodesics; a fix is inside when it is farther inside its boundary than \
            its margin, as for a circle (see Docs/regions-format.md for holes, parts and limits). \
            An id must be unique: adding one that exists is an error unless --replace is given (which \
            also resets every vehicle's state for that region).
            """,
        options: [
            .value("--lat", valueName: "degrees", help: "Latitude of a circle's centre, -90 to 90."),
            .value("--lon", valueName: "degrees", help: "Longitude of a circle's centre, -180 to 180."),
            .value("--radius", valueName: "metres", help: "A circle's radius in metres, more than 0."),
            .value(
                "--polygon", valueName: "file|positions",
                help: """
                    A polygon instead of a circle: a GeoJSON file (a Feature, a Polygon or a MultiPolygon; - \
                    for standard input), or its corners as 'lat,lon lat,lon ...' (closed for you).
                    """),
            .value(
                "--id", valueName: "id",
                help: """
                    Unique id, 1 to 128 bytes, no control, bidi control or invisible characters; compared in \
                    Unicode NFC (café is café however typed). Generated when not given.
                    """),
            .value("--name", valueName: "text", help: "A name for people."),
            .value(
                "--notify", valueName: "events",
                help: "Comma-separated events to notify: enter, exit, dwell.",
                defaultDescription: "enter,exit, plus dwell when --dwell is given"),
            .value(
                "--dwell", valueName: "duration", help: "Fire `dwell` after this long inside (e.g. 5m, 90s, 1h30m)."),
            .value(
                "--expires", valueName: "duration|timestamp",
                help: """
                    Stop monitoring after this long (e.g. 30d) or at this time (e.g. 2027-01-01T00:00:00Z). A \
                    time in the past is taken, as import takes it: the region expires at once, with a warning.
                    """),
            .repeating(
                "--subject", valueName: "name",
                help: "Only monitor this subject (a gpsd device or vehicle). Repeat for several; default all."),
            .value("--on-enter", valueName: "command", help: "Shell command run on enter (see Docs/hooks.md)."),
            .value("--on-exit", valueName: "command", help: "Shell command run on exit."),
            .value("--on-dwell", valueName: "command", help: "Shell command run on dwell."),
            .flag("--replace", help: "Replace a region with the same id instead of failing."),
            requestID,
        ],
        examples: [
            Example(
                "A depot with enter and exit events:",
                "geofence add --id depot --lat 51.5007 --lon -0.1246 --radius 200"),
            Example(
                "A customer site that reports a 10-minute stay, for 30 days:",
                "geofence add --id customer-42 --lat 48.8584 --lon 2.2945 --radius 150 --dwell 10m --expires 30d"),
            Example(
                "A yard as a polygon of its corners:",
                "geofence add --id yard --polygon '51.5010,-0.1250 51.5010,-0.1240 51.5003,-0.1240 51.5003,-0.1250'"),
            Example("A district from a GeoJSON file:", "geofence add --id district-7 --polygon district-7.geojson"),
        ])

    static let remove = CommandSpec(
        name: "remove",
        abstract: "Remove regions by id.",
        discussion: "All or nothing: if any id does not exist, nothing is removed. Events already recorded are kept.",
        options: [requestID],
        arguments: [.repeating("id", help: "Ids of the regions to remove.", atLeastOne: true)],
        examples: [Example("Stop watching the depot:", "geofence remove depot")])

    static let list = CommandSpec(
        name: "list",
        abstract: "List the requested regions and their monitoring status.",
        discussion: """
            Status is one of monitoring, pending (with a reason), failed (with a reason), suspended, \
            accuracyLimited or expired. A region whose monitoring fails is never dropped: it stays here.
            """,
        examples: [
            Example("A table:", "geofence list"),
            Example("For scripts:", "geofence list --json"),
        ])

    static let show = CommandSpec(
        name: "show",
        abstract: "Show one region, its status and every subject's state in it.",
        arguments: [.required("id", help: "The region's id.")],
        examples: [Example("", "geofence show depot")])

    static let importCommand = CommandSpec(
        name: "import",
        abstract: "Add regions from a regions file (JSON) or a GeoJSON FeatureCollection.",
        discussion: """
            The file holds {"regions": [ ... ]} (see Docs/regions-format.md and regions.example.json), or \
            is a GeoJSON FeatureCollection of Polygon and MultiPolygon features whose properties carry \
            id, name, notify, dwell, expires and hooks (what export --format geojson writes). \
            Import is all or nothing: every entry is checked first, each problem is reported with its \
            position and field, and nothing is stored unless every entry is good. Ids already in the \
            store are an error unless --replace is given.
            """,
        options: [
            .flag("--replace", help: "Replace regions whose ids already exist."),
            .flag("--dry-run", help: "Check the file and report, store nothing."),
            requestID,
        ],
        arguments: [.required("file", help: "The regions file, or - for standard input.")],
        examples: [
            Example("The example file:", "geofence import regions.example.json"),
            Example("Check a file only:", "geofence import --dry-run regions.json"),
            Example("Districts drawn in a GIS:", "geofence import districts.geojson"),
        ])

    static let export = CommandSpec(
        name: "export",
        abstract: "Write the regions as a regions file or as GeoJSON.",
        discussion: """
            json writes the import format (export, edit, import --replace). geojson writes a \
            FeatureCollection: a polygon as itself, a circle as a polygon of 64 vertices with the circle \
            (lat, lon, radius) in its properties, which also carry notify, dwell, hooks and status; it \
            imports back as the same regions.
            """,
        options: [
            .value("--format", valueName: "json|geojson", help: "Output format.", default: "json"),
            .value("--output", short: "-o", valueName: "file", help: "Write to this file instead of stdout."),
        ],
        examples: [
            Example("Back up the regions:", "geofence export > regions.json"),
            Example("Look at them on a map:", "geofence export --format geojson -o regions.geojson"),
        ])

    static let vehicles = CommandSpec(
        name: "vehicles",
        abstract: "List the vehicles the store knows: their last fix and the regions they are inside.",
        discussion: """
            Every subject (a gpsd device or a fleet vehicle) with its state in the store, by name: when its \
            last fix was, where, how accurate, and the regions it is inside. An engine keeps in memory only \
            the vehicles heard from within --idle-after (1d by default); the others are here until they \
            return. --prune removes the vehicles not heard from for the given time, with their region \
            states (their events stay in the outbox); a vehicle that comes back later starts over, with \
            `determined`. Prune with the engine stopped: one that runs refuses it (exit 75).
            """,
        options: [
            .value(
                "--prune", valueName: "older-than",
                help: "Remove the vehicles not heard from for this long (e.g. 30d), and print how many.")
        ],
        examples: [
            Example("Which vehicles are where:", "geofence vehicles"),
            Example("Forget vehicles not seen for a month (engine stopped):", "geofence vehicles --prune 30d"),
        ])

    static let replay = CommandSpec(
        name: "replay",
        abstract: "Run recorded gpsd JSON reports through the filter and the monitor.",
        discussion: """
            Reads the lines `gpspipe -w` prints (one JSON report per line; non-TPV reports are skipped), \
            runs every TPV through the fix filter and the region monitor against the stored regions, and \
            stores state and events exactly as `geofence run` does. Each event is printed as one JSON \
            line on stdout once it is stored. Decisions use the fixes' own time, so a recording behaves \
            as it did live.
            """,
        options: [
            .flag(
                "--stats", help: "Print the filter's counts (accepted, duplicate, no fix, ...) on stderr at the end."),
            .flag("--trace", help: "Print the filter's verdict on every TPV as a JSON line on stderr."),
            .value(
                "--subject", valueName: "name",
                help: "Subject for reports that name no device.", default: "gpsd"),
            .flag(
                "--hooks",
                help: """
                    Run the hooks of the events in the outbox (these, as they are stored, and any earlier ones \
                    waiting); at the end, wait for them, retrying failures for up to a minute, and report on \
                    stderr (see Docs/hooks.md).
                    """),
        ] + hookOptions,
        arguments: [.required("file", help: "The recording, or - for standard input.")],
        examples: [
            Example("A recording:", "geofence replay --stats drive.json"),
            Example("Live from gpsd:", "gpspipe -w | geofence replay -"),
        ])
}
