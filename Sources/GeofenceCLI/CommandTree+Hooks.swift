extension CommandTree {
    /// `geofence hook ...`: global hooks.
    static let hook = CommandSpec(
        name: "hook", abstract: "Manage global hooks: shell commands run for events.",
        discussion: """
            A hook is a shell command (`/bin/sh -c COMMAND`) the engine runs for each event of the types it \
            is registered for. The event reaches it only as data: GEOFENCE_* environment variables \
            (GEOFENCE_EVENT, GEOFENCE_EVENT_ID, GEOFENCE_REGION, GEOFENCE_LAT, ...) and the event's JSON on \
            stdin, never in the command string. Exit 0 means delivered; anything else is retried with \
            backoff, in event order per region. Delivery is at-least-once: de-duplicate by \
            GEOFENCE_EVENT_ID. Hooks run in `geofence run` and in `geofence replay --hooks`.

            Global hooks run for every region (and for state events); a region's own hooks are given to \
            `geofence add` (--on-enter, --on-exit, --on-dwell) or in the regions file. The whole contract \
            and recipes (curl, mosquitto_pub, kcat, a file): Docs/hooks.md.
            """,
        subcommands: [hookAdd, hookList, hookRemove],
        examples: [
            Example(
                "POST every crossing to a backend:",
                #"geofence hook add --on enter,exit --command 'curl -fsS -m 10 -H "Content-Type: application/json" --data-binary @- https://fleet.example/geofence'"#
            ),
            Example("See what is registered:", "geofence hook list"),
        ])

    static let hookAdd = CommandSpec(
        name: "add",
        abstract: "Register a shell command to run for events of some types.",
        discussion: """
            The hook applies to events the engine has not yet handed to hooks: in practice, from now on. \
            Event types: \(hookEventTypes). Use `all` for every type, including future ones.
            """,
        options: [
            .value(
                "--on", valueName: "types", help: "Comma-separated event types, or all.", required: true),
            .value(
                "--command", valueName: "command",
                help: "The shell command. Quote it once, for your shell; read event data from $GEOFENCE_* or stdin.",
                required: true),
            .value(
                "--id", valueName: "name",
                help: "A name for the hook: letters, digits, '.', '_', '-'. Generated when not given."),
            requestID,
        ],
        examples: [
            Example(
                "Append every event to a file, one JSON line each:",
                #"geofence hook add --id journal --on all --command 'flock /var/log/geofence.jsonl.lock sh -c "cat >> /var/log/geofence.jsonl"'"#
            ),
            Example(
                "Publish enters and exits to MQTT:",
                #"geofence hook add --on enter,exit --command 'mosquitto_pub -h broker -q 1 -t "fleet/$GEOFENCE_SUBJECT/$GEOFENCE_REGION" -s'"#
            ),
            Example(
                "Tell someone when the receiver goes quiet:",
                #"geofence hook add --on source --command 'logger -t geofence "location $GEOFENCE_STATE"'"#),
        ])

    static let hookList = CommandSpec(
        name: "list",
        abstract: "List the global hooks, with their deliveries by status.",
        examples: [Example("", "geofence hook list"), Example("For scripts:", "geofence hook list --json")])

    static let hookRemove = CommandSpec(
        name: "remove",
        abstract: "Remove global hooks by id.",
        discussion: """
            All or nothing: if any id does not exist, nothing is removed. Deliveries of a removed hook that \
            were still waiting become dead (reason: hook removed): they stay visible in \
            `geofence events --dead` and can be retried by hand. A delivery running at that moment finishes.
            """,
        options: [requestID],
        arguments: [.repeating("id", help: "Ids of the hooks to remove.", atLeastOne: true)],
        examples: [Example("", "geofence hook remove journal")])

    static let hookEventTypes =
        "enter, exit, dwell, determined, expired (region events); source, device, services, "
        + "authorization, region-status (state events)"

    /// `geofence events ...`: the outbox and its deliveries.
    static let events = CommandSpec(
        name: "events", abstract: "Show events and their hook deliveries.",
        discussion: """
            Every event the engine stored, newest last, with one line per delivery (an event given to a \
            hook): its status (pending, running, done, dead), attempts, when the next attempt is due, the last \
            exit status and the start of the hook's output. A delivery is retried with backoff until it \
            succeeds, or it is dead after the maximum attempts or age (see Docs/hooks.md); dead ones are kept \
            until pruned, and can be retried with `geofence events retry`.

            --pending shows deliveries waiting or running, and events whose deliveries the engine has not made \
            yet (`dispatched: false`): everything still owed, so a script can wait for it to be empty. --failed \
            shows deliveries waiting for a retry after a failed attempt, --dead those given up. With --json, one array of events, each with its deliveries and \
            their attempt history; with --follow --json, one JSON object per line.
            """,
        options: [
            .flag(
                "--pending", help: "Only what is still owed: deliveries waiting or running, events not dispatched yet."),
            .flag("--failed", help: "Only deliveries waiting for a retry after a failed attempt."),
            .flag("--dead", help: "Only deliveries given up."),
            .flag("--follow", short: "-f", help: "Keep printing new events and delivery changes until interrupted."),
            .value(
                "--limit", short: "-n", valueName: "n", help: "Show at most this many events (the newest).",
                default: "50"),
            .value("--region", valueName: "id", help: "Only events of this region."),
            .value("--subject", valueName: "name", help: "Only events of this subject (a gpsd device or vehicle)."),
            .value(
                "--type", valueName: "types",
                help: """
                    Only events of these comma-separated types: determined, enter, exit, dwell, expired, source, \
                    device, services, authorization, region-status.
                    """),
            .value(
                "--since", valueName: "duration|timestamp",
                help: "Only events that happened this long ago or later (e.g. 1h), or at or after this time."),
        ],
        subcommands: [eventsRetry, eventsPrune],
        runsWithoutSubcommand: true,
        examples: [
            Example("The latest events and how their hooks did:", "geofence events"),
            Example("What failed and gave up:", "geofence events --dead"),
            Example(
                "One vehicle's crossings of the last day:",
                "geofence events --subject truck-17 --type enter,exit --since 1d"),
            Example("Watch deliveries as they happen:", "geofence events --follow"),
            Example("Retry everything that gave up, once the receiver is back:", "geofence events retry --all-dead"),
        ])

    static let eventsRetry = CommandSpec(
        name: "retry",
        abstract: "Retry dead (or waiting) deliveries now, with a fresh budget of attempts.",
        discussion: """
            ID is a delivery id (the number in `geofence events`) or an event id (then all its dead and \
            waiting deliveries). A running engine starts them within a second, in their order: a retried \
            delivery goes before the later deliveries of its region. Delivered ones are not run again.
            """,
        options: [.flag("--all-dead", help: "Retry every dead delivery.")],
        arguments: [.optional("id", help: "A delivery id or an event id.")],
        examples: [
            Example("One delivery:", "geofence events retry 42"),
            Example("All deliveries of one event:", "geofence events retry 0193a4c2-7f1e-7c3a-9d2b-5e8f0a1b2c3d"),
            Example("Everything that gave up:", "geofence events retry --all-dead"),
        ])

    static let eventsPrune = CommandSpec(
        name: "prune",
        abstract: "Delete old events whose deliveries are all done or dead.",
        discussion: """
            Deletes the events stored more than DURATION ago, with their deliveries, when none of those is \
            still pending or running. An event still waiting for a hook, or for a sink (`geofence sink list`), \
            is never deleted.
            """,
        options: [
            .value(
                "--older-than", valueName: "duration", help: "Age of the events to delete (e.g. 30d, 12h).",
                required: true)
        ],
        examples: [Example("Keep a month:", "geofence events prune --older-than 30d")])

    /// How hooks run: shared by `run` and `replay --hooks` (read with `HookOptions.configuration`).
    static let hookOptions: [OptionSpec] = [
        .value(
            "--hook-timeout", valueName: "duration",
            help: "Kill a hook (its whole process group) that runs longer; the delivery is retried.", default: "30s"),
        .value("--hook-concurrency", valueName: "n", help: "Hooks running at once, at most.", default: "4"),
        .value(
            "--hook-retry-initial", valueName: "duration", help: "Delay before the first retry; it doubles each time.",
            default: "1s"),
        .value("--hook-retry-max", valueName: "duration", help: "Longest delay between retries.", default: "5m"),
        .value(
            "--hook-max-attempts", valueName: "n",
            help: "Give a delivery up (dead) after this many attempts; 0: never.",
            default: "100"),
        .value(
            "--hook-max-age", valueName: "duration",
            help: "Give a delivery up (dead) when it fails this long after it was queued; 0: never.", default: "24h"),
        .value(
            "--hook-output-limit", valueName: "bytes", help: "Bytes of a hook's stdout, and of its stderr, kept.",
            default: "65536"),
    ]
}
