import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence hook ...` and `geofence events ...`.
enum HookCommands {
    static func run(_ path: [String], _ c: CommandContext) throws {
        do {
            switch path {
            case ["hook", "add"]: try add(c)
            case ["hook", "list"]: try list(c)
            case ["hook", "remove"]: try remove(c)
            case ["events"]: try EventsCommand.list(c)
            case ["events", "retry"]: try EventsCommand.retry(c)
            case ["events", "prune"]: try EventsCommand.prune(c)
            default:
                throw CommandFailure("'\(path.joined(separator: " "))' is not implemented", exitCode: .software)
            }
        } catch let error as HookStoreError {
            switch error {
            case .duplicateHook: throw CommandFailure(error.description, exitCode: .dataError)
            case .hookNotFound, .deliveryNotFound: throw CommandFailure(error.description, exitCode: .noInput)
            case .nothingToRetry: throw CommandFailure(error.description, exitCode: .dataError)
            }
        }
    }

    // MARK: hook add

    static func add(_ c: CommandContext) throws {
        let a = c.arguments
        let events = try eventTypes(try a.required("--on"), c)
        let command = try a.required("--command")
        if let problem = GlobalHook.problem(withCommand: command) {
            throw c.usage("invalid value for --command: \(problem)")
        }
        var params: JSONObject = ["on": .array(events.map { .string($0) }), "command": .string(command)]
        if let id = a.value("--id") {
            if let problem = GlobalHook.problem(withID: id) { throw c.usage("invalid value for --id: \(problem)") }
            params["id"] = .string(id)
        }
        let requestID = try RegionCommands.requestID(c)
        params["requestId"] = .string(requestID)
        let hook = try c.interruptible(requestID: requestID, check: "geofence hook list") {
            try c.call(.hookAdd, params)
        }
        if c.json {
            c.console.print(hook.serialized())
        } else {
            c.console.print(
                "Added hook \(RegionCommands.quoted(hook["id"]?.stringValue ?? "?")): on \(describe(events)) runs: \(command)"
            )
        }
    }

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

    // MARK: hook list

    static func list(_ c: CommandContext) throws {
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

    // MARK: hook remove

    static func remove(_ c: CommandContext) throws {
        let ids = c.arguments.values("id")
        let requestID = try RegionCommands.requestID(c)
        let result = try c.interruptible(requestID: requestID, check: "geofence hook list") {
            try c.call(.hookRemove, ["ids": .array(ids.map { .string($0) }), "requestId": .string(requestID)])
        }
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
