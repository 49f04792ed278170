import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

/// What `hook` and `sink` share: the event types of `--on`.
enum HookCommands {
    /// `enter,exit` → the types in canonical order; `all` → [] (every type).
    static func eventTypes(_ text: String, _ c: CommandContext) throws -> [String] {
        var chosen = Set<String>()
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let word = part.trimmingCharacters(in: .whitespaces).lowercased()
            if word == "all" || word == "*" { return [] }
            guard GlobalHook.eventTypes.contains(word) else {
                throw c.usage(
                    "invalid value for --on: \(RegionCommands.quoted(word)) is not an event type; "
                        + "use \(CommandTree.hookEventTypes), or all")
            }
            chosen.insert(word)
        }
        return GlobalHook.eventTypes.filter(chosen.contains)
    }

    static func describe(_ events: [String]) -> String {
        events.isEmpty ? "all events" : events.joined(separator: ",")
    }
}

/// `geofence hook add`: a global hook.
struct HookAddCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "add",
        abstract: "Register a shell command to run for events of some types.",
        discussion: """
            The hook applies to events the engine has not yet handed to hooks: in practice, from now on. \
            Event types: \(CommandTree.hookEventTypes). Use `all` for every type, including future ones.
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
            CommandTree.requestID,
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

    let events: [String]
    let command: String
    /// The request's parameters, every one checked.
    let params: JSONObject
    let requestID: String

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        let events = try HookCommands.eventTypes(try a.required("--on"), c)
        let command = try a.required("--command")
        if let problem = GlobalHook.problem(withCommand: command) {
            throw c.usage("invalid value for --command: \(problem)")
        }
        var params: JSONObject = ["on": .array(events.map { .string($0) }), "command": .string(command)]
        if let id = a.value("--id") {
            if let problem = GlobalHook.problem(withID: id) { throw c.usage("invalid value for --id: \(problem)") }
            params["id"] = .string(id)
        }
        let requestID = try RegionCommands.requestID(a.value("--request-id"), c)
        params["requestId"] = .string(requestID)
        self.events = events
        self.command = command
        self.params = params
        self.requestID = requestID
    }

    func run(_ c: CommandContext) throws {
        let hook = try c.interruptible(requestID: requestID, check: "geofence hook list") {
            try c.call(.hookAdd, params)
        }
        if c.json {
            c.console.print(hook.serialized())
        } else {
            c.console.print(
                "Added hook \(RegionCommands.quoted(hook["id"]?.stringValue ?? "?")): on \(HookCommands.describe(events)) runs: \(command)"
            )
        }
    }
}

/// `geofence hook list`.
struct HookListCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "list",
        abstract: "List the global hooks, with their deliveries by status.",
        examples: [Example("", "geofence hook list"), Example("For scripts:", "geofence hook list --json")])

    init(parsing a: ParsedArguments, context c: CommandContext) throws {}

    func run(_ c: CommandContext) throws {
        let result = try c.call(.hookList)
        let hooks = result["hooks"]?.arrayValue ?? []
        if c.json {
            c.console.print(JSONValue.array(hooks).serialized())
            return
        }
        let regionCounts = result["regionDeliveries"]?.objectValue.flatMap { $0.isEmpty ? nil : $0 }
        guard !hooks.isEmpty || regionCounts != nil else {
            c.console.message("No hooks. Add one with: geofence hook add --on enter,exit --command CMD")
            return
        }
        var table = TextTable(["ID", "ON", "PENDING", "DONE", "DEAD", "COMMAND"])
        func numbers(_ counts: JSONValue?) -> [String] {
            func n(_ key: String) -> Int { counts?[key]?.intValue ?? 0 }
            return [String(n("pending") + n("running")), String(n("done")), String(n("dead"))]
        }
        for hook in hooks {
            table.add(
                [
                    hook["id"]?.stringValue ?? "",
                    (hook["on"]?.arrayValue?.compactMap(\.stringValue) ?? []).joined(separator: ","),
                ] + numbers(hook["deliveries"]) + [hook["command"]?.stringValue ?? ""])
        }
        if let regionCounts {
            table.add(
                ["(regions' own)", "enter,exit,dwell"] + numbers(.object(regionCounts)) + ["see geofence show ID"])
        }
        c.console.write(table.render())
    }
}

/// `geofence hook remove`.
struct HookRemoveCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "remove",
        abstract: "Remove global hooks by id.",
        discussion: """
            All or nothing: if any id does not exist, nothing is removed. Deliveries of a removed hook that \
            were still waiting become dead (reason: hook removed): they stay visible in \
            `geofence events --dead` and can be retried by hand. A delivery running at that moment finishes.
            """,
        options: [CommandTree.requestID],
        arguments: [.repeating("id", help: "Ids of the hooks to remove.", atLeastOne: true)],
        examples: [Example("", "geofence hook remove journal")])

    let removal: RemovalByID

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        removal = try RemovalByID(parsing: a, context: c)
    }

    func run(_ c: CommandContext) throws {
        let result = try removal.send(.hookRemove, check: "geofence hook list", c)
        if c.json {
            c.console.print(result.serialized())
            return
        }
        let stopped = result["stopped"]?.intValue ?? 0
        for id in result["removed"]?.arrayValue?.compactMap(\.stringValue) ?? [] {
            c.console.print("Removed hook \(RegionCommands.quoted(id))")
        }
        if stopped > 0 { c.console.print("\(stopped) waiting deliveries stopped (see geofence events --dead)") }
    }
}
