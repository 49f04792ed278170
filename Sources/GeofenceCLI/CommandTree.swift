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

    /// Every command below `geofence`, in the order the help lists them: one line registers a command.
    static let commands: [CommandEntry] = [
        .command(AddCommand.self),
        .command(RemoveCommand.self),
        .command(ListCommand.self),
        .command(ShowCommand.self),
        .command(ImportCommand.self),
        .command(ExportCommand.self),
        .command(ReplayCommand.self),
        .command(RunCommand.self),
        .command(DeliverCommand.self),
        .command(LocateCommand.self),
        .command(StatusCommand.self),
        .command(WatchCommand.self),
        .command(ServicesCommand.self),
        .group(
            permission,
            [
                PermissionListCommand.self,
                PermissionRequestCommand.self,
                PermissionGrantCommand.self,
                PermissionDenyCommand.self,
                PermissionResetCommand.self,
            ]),
        .group(hook, [HookAddCommand.self, HookListCommand.self, HookRemoveCommand.self]),
        .group(sink, [SinkAddCommand.self, SinkListCommand.self, SinkRemoveCommand.self]),
        .parent(EventsCommand.self, [EventsRetryCommand.self, EventsPruneCommand.self]),
        .command(VehiclesCommand.self),
        .command(MapCommand.self),
        .group(token, [TokenAddCommand.self, TokenListCommand.self, TokenRemoveCommand.self]),
    ]

    /// The command type at `path` (`[]`: `geofence` itself).
    static func command(at path: [String]) -> (any GeofenceSubcommand.Type)? {
        if path.isEmpty { return RootCommand.self }
        for entry in commands {
            if let type = entry.command(at: path[...]) { return type }
        }
        return nil
    }

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
        subcommands: commands.map { $0.spec },
        runsWithoutSubcommand: true,
        examples: [
            Example(
                "Watch a depot, 200 m around a point:",
                "geofence add --id depot --lat 51.5007 --lon -0.1246 --radius 200"),
            Example("See what is watched:", "geofence list"),
            Example("Run a recorded drive through the regions:", "gpspipe -w | geofence replay -"),
        ])

}
