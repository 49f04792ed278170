import Foundation
import GeofenceCore
import GeofenceEngine

#if canImport(Glibc)
    import Glibc
#endif

/// `services`, `permission ...`, `watch`.
enum ControlCommands {
    static func services(_ c: CommandContext) throws {
        let result: JSONValue
        if let state = c.arguments.value("state") {
            guard state == "on" || state == "off" else {
                throw c.usage("invalid value for state: \"\(state)\" is not on or off")
            }
            result = try c.interruptible(requestID: nil, check: "geofence services") {
                try c.call(.servicesSet, ["on": .bool(state == "on")])
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

    static func permission(_ path: [String], _ c: CommandContext) throws {
        switch path.last {
        case "list":
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
        case "request":
            var params: JSONObject = [:]
            if let reason = c.arguments.value("--reason") { params["reason"] = .string(reason) }
            let result = try c.interruptible(requestID: nil, check: "geofence status") {
                try c.call(.permissionRequest, params)
            }
            if c.json {
                c.console.print(result.serialized())
            } else {
                c.console.print(result["message"]?.stringValue ?? "request recorded")
            }
        case let verb?:
            let method: ControlMethod =
                verb == "grant" ? .permissionGrant : verb == "deny" ? .permissionDeny : .permissionReset
            let user = try c.arguments.required("user")
            let result = try c.interruptible(requestID: nil, check: "geofence permission list") {
                try c.call(method, ["user": .string(user)])
            }
            if c.json {
                c.console.print(result.serialized())
            } else {
                c.console.print(
                    "\(result["user"]?.stringValue ?? "?") is now \(result["status"]?.stringValue ?? "?")")
            }
        case nil:
            throw c.usage("missing subcommand")
        }
    }

    static func watch(_ c: CommandContext) throws {
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
        exitOnStopSignals()
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
