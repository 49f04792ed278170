extension CommandTree {
    static let socket = OptionSpec.value(
        "--socket", valueName: "path", help: "The engine's control socket.",
        defaultDescription: ControlSocket.helpDefault, environment: "GEOFENCE_SOCKET", inherited: true)

    static let services = CommandSpec(
        name: "services",
        abstract: "Show or switch Location Services: on, off.",
        discussion: """
            The engine's global switch. Off: the engine consumes no fixes, every region is suspended \
            (services-off), no location-bearing hook runs, and every client's effective permission is \
            denied; regions, states and decisions are kept. On: monitoring resumes within a second and each \
            region's state is determined again (a crossing that happened while off fires once, marked \
            inferred). Switching needs root or the engine's own user. Persisted across restarts.
            """,
        arguments: [.optional("state", help: "on or off; without it, show the switch.")],
        examples: [
            Example("Is it on?", "geofence services"),
            Example("Stop all location use now:", "sudo geofence services off"),
        ])

    static let permission = CommandSpec(
        name: "permission",
        abstract: "Manage which users may use the engine.",
        discussion: """
            Each Unix user talking to the engine has a status: notDetermined (never decided), authorized, \
            denied, or restricted (from the policy file $GEOFENCE_POLICY, default /etc/geofence/policy.json, \
            as {"restricted": ["alice", 1001]}; it cannot be granted here). Root and the engine's own user are \
            always authorized. An unauthorized user may only ask for `status` and `permission request`. \
            While Location Services are off, everyone's effective status is denied; each user's own status \
            returns when they are switched on. Every change is an `authorization` event.
            """,
        subcommands: [
            CommandSpec(name: "list", abstract: "List the users the engine knows and their status."),
            CommandSpec(
                name: "request", abstract: "Ask for access (as the user who wants it).",
                discussion: """
                    One request is pending at a time: asking again changes nothing until an administrator \
                    grants, denies or resets it.
                    """,
                options: [
                    .value(
                        "--reason", valueName: "text",
                        help: """
                            Why you need location, for the administrator: at most 256 bytes, no control, bidi or \
                            invisible characters.
                            """)
                ],
                examples: [Example("", "geofence permission request --reason 'delivery tracking app'")]),
            CommandSpec(
                name: "grant", abstract: "Authorize a user.",
                arguments: [.required("user", help: "A user name or uid.")],
                examples: [Example("", "sudo geofence permission grant alice")]),
            CommandSpec(
                name: "deny", abstract: "Deny a user.", arguments: [.required("user", help: "A user name or uid.")]),
            CommandSpec(
                name: "reset", abstract: "Forget the decision about a user (back to notDetermined).",
                arguments: [.required("user", help: "A user name or uid.")]),
        ])

    static let watch = CommandSpec(
        name: "watch",
        abstract: "Stream live events and state changes as JSON lines.",
        discussion: """
            Needs a running engine. Prints every event the engine records from now on, one JSON object a \
            line: region events (determined, enter, exit, dwell, expired) and state changes (services, \
            authorization, source silent/lost/restored, device added/removed, region-status). It exits 0 \
            when stopped (Ctrl-C, SIGTERM) or when its output is closed (`| head -n 1`: at the next event). \
            When the engine stops under it, it says so in one line on stderr and exits 69 (as when no engine \
            runs), so a script can tell the two apart and reconnect.
            """,
        examples: [Example("", "geofence watch | jq -c 'select(.type == \"enter\")'")])
}
