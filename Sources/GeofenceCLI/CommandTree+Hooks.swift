extension CommandTree {
    /// `geofence hook ...`: global hooks.
    static let hook = CommandSpec(
        name: "hook", abstract: "Manage global hooks: shell commands run for events.",
        subcommands: [CommandSpec(name: "list", abstract: "List the global hooks.")])

    /// `geofence events ...`: the outbox and its deliveries.
    static let events = CommandSpec(
        name: "events", abstract: "Show events and their hook deliveries.", runsWithoutSubcommand: true)
}
