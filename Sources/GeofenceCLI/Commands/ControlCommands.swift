import Foundation
import GeofenceCore
import GeofenceEngine

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence services`: show or switch Location Services.
struct ServicesCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
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

    /// true for on, false for off; nil to show the switch.
    let on: Bool?

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        if let state = a.value("state") {
            guard state == "on" || state == "off" else {
                throw c.usage("invalid value for state: \"\(state)\" is not on or off")
            }
            on = state == "on"
        } else {
            on = nil
        }
    }

    func run(_ c: CommandContext) throws {
        let result: JSONValue
        if let on {
            result = try c.interruptible(requestID: nil, check: "geofence services") {
                try c.call(.servicesSet, ["on": .bool(on)])
            }
        } else {
            result = try c.call(.servicesGet)
        }
        if c.json {
            c.console.print(result.serialized())
        } else {
            c.console.print("Location Services are \(result["on"]?.boolValue == true ? "on" : "off")")
        }
    }
}

/// `geofence permission list`: the users the engine knows.
struct PermissionListCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "list", abstract: "List the users the engine knows and their status.")

    init(parsing a: ParsedArguments, context c: CommandContext) throws {}

    func run(_ c: CommandContext) throws {
        let users = try c.call(.permissionList).arrayValue ?? []
        if c.json {
            c.console.print(JSONValue.array(users).serialized())
            return
        }
        var table = TextTable(["USER", "UID", "STATUS", "EFFECTIVE", "REQUESTED", "REASON"])
        for u in users {
            table.add([
                u["user"]?.stringValue ?? "", String(u["uid"]?.intValue ?? -1),
                (u["status"]?.stringValue ?? "") + (u["privileged"]?.boolValue == true ? " (always)" : ""),
                u["effective"]?.stringValue ?? "", u["requestedAt"]?.stringValue ?? "-",
                u["reason"]?.stringValue ?? "",
            ])
        }
        c.console.write(table.render())
    }
}

/// `geofence permission request`: ask for access.
struct PermissionRequestCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
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
        examples: [Example("", "geofence permission request --reason 'delivery tracking app'")])

    let reason: String?

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        reason = a.value("--reason")
    }

    func run(_ c: CommandContext) throws {
        var params: JSONObject = [:]
        if let reason { params["reason"] = .string(reason) }
        let result = try c.interruptible(requestID: nil, check: "geofence status") {
            try c.call(.permissionRequest, params)
        }
        if c.json {
            c.console.print(result.serialized())
        } else {
            c.console.print(result["message"]?.stringValue ?? "request recorded")
        }
    }
}

/// `geofence permission grant|deny|reset USER`: an administrator's decision about a user.
protocol PermissionDecisionCommand: GeofenceSubcommand {
    static var method: ControlMethod { get }
    var user: String { get }
    init(user: String)
}

extension PermissionDecisionCommand {
    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        self.init(user: try a.required("user"))
    }

    func run(_ c: CommandContext) throws {
        let result = try c.interruptible(requestID: nil, check: "geofence permission list") {
            try c.call(Self.method, ["user": .string(user)])
        }
        if c.json {
            c.console.print(result.serialized())
        } else {
            c.console.print("\(result["user"]?.stringValue ?? "?") is now \(result["status"]?.stringValue ?? "?")")
        }
    }
}

struct PermissionGrantCommand: PermissionDecisionCommand {
    static let spec = CommandSpec(
        name: "grant", abstract: "Authorize a user.",
        arguments: [.required("user", help: "A user name or uid.")],
        examples: [Example("", "sudo geofence permission grant alice")])
    static let method = ControlMethod.permissionGrant
    let user: String
}

struct PermissionDenyCommand: PermissionDecisionCommand {
    static let spec = CommandSpec(
        name: "deny", abstract: "Deny a user.", arguments: [.required("user", help: "A user name or uid.")])
    static let method = ControlMethod.permissionDeny
    let user: String
}

struct PermissionResetCommand: PermissionDecisionCommand {
    static let spec = CommandSpec(
        name: "reset", abstract: "Forget the decision about a user (back to notDetermined).",
        arguments: [.required("user", help: "A user name or uid.")])
    static let method = ControlMethod.permissionReset
    let user: String
}

/// `geofence watch`: live events and state changes as JSON lines.
struct WatchCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
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

    init(parsing a: ParsedArguments, context c: CommandContext) throws {}

    func run(_ c: CommandContext) throws {
        let route = try c.route()
        if let other = route.other, route.socket == nil {
            throw CommandFailure(
                "no engine serves \(c.stateDirectory) to watch: the engine at \(other.socket) serves "
                    + "\(other.stateDirectory)", exitCode: .unavailable)
        }
        guard let path = route.socket else {
            throw CommandFailure(
                "no engine is running to watch (looked for its socket at "
                    + ControlSocket.candidates(option: c.arguments.value("--socket"), environment: c.environment)
                    .joined(separator: ", ") + "): start it with `geofence run`", exitCode: .unavailable)
        }
        Self.exitOnStopSignals()
        var first = true
        var failure: ControlError?
        var outputClosed = false
        do {
            // The stream ends only when the engine closes the connection (it stopped, or refused).
            try ControlClient(path: path).stream(ControlRequest(method: .watch)) { line in
                if first {
                    first = false
                    // The answer to the request itself: on or a refusal.
                    if let response = ControlResponse.parse(Array(line.utf8)), case .failure(let e) = response.result {
                        failure = e
                        return false
                    }
                    return true
                }
                // Events are not answers; an answer after them is the engine ending the watch (cut off).
                if line.hasPrefix(#"{"ok":false"#), let response = ControlResponse.parse(Array(line.utf8)),
                    case .failure(let e) = response.result
                {
                    failure = e
                    return false
                }
                c.console.print(line)
                // Its reader went away (`| head -n 1`): an end as the user's Ctrl-C is.
                outputClosed = c.console.outputClosed
                return !outputClosed
            }
        } catch {
            throw CommandFailure(error.message, exitCode: .unavailable)
        }
        if let failure {
            throw CommandFailure(failure.message, exitCode: ExitCode(rawValue: failure.exitStatus) ?? .failure)
        }
        if outputClosed { return }
        throw CommandFailure(
            first
                ? "the engine at \(path) closed the connection without answering"
                : "the engine at \(path) stopped: no more events to watch", exitCode: .unavailable)
    }

    /// Ctrl-C or a SIGTERM is how a user ends `watch`: exit 0, at once (every line printed is already
    /// written: the console does not buffer). A handler of its own, installed from this nonisolated
    /// function, never from main-actor code.
    private static func exitOnStopSignals() {
        signal(SIGINT) { _ in _exit(0) }
        signal(SIGTERM) { _ in _exit(0) }
    }
}
