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
        examples: [
            Example(
                "POST every crossing to a backend:",
                #"geofence hook add --on enter,exit --command 'curl -fsS -m 10 -H "Content-Type: application/json" --data-binary @- https://fleet.example/geofence'"#
            ),
            Example("See what is registered:", "geofence hook list"),
        ])

    static let hookEventTypes =
        "enter, exit, dwell, determined, expired (region events); source, device, services, "
        + "authorization, region-status (state events)"

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
