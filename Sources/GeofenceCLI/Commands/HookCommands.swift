import Foundation
import GeofenceCore
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
        let store = try c.openStore()
        var hook = GlobalHook(id: "", events: events, command: command, createdBy: getuid(), createdAt: c.now)
        if let id = a.value("--id") {
            if let problem = GlobalHook.problem(withID: id) { throw c.usage("invalid value for --id: \(problem)") }
            hook.id = id
            try store.addHook(hook)
        } else {
            // A generated id: retry on the (astronomically unlikely) collision rather than fail.
            var attempt = 0
            while true {
                hook.id = "hook-" + RegionCommands.generatedID().dropFirst("region-".count)
                do {
                    try store.addHook(hook)
                    break
                } catch HookStoreError.duplicateHook where attempt < 5 {
                    attempt += 1
                }
            }
        }
        if c.json {
            c.console.print(JSONValue.object(json(hook, counts: [:])).serialized())
        } else {
            c.console.print(
                "Added hook \(RegionCommands.quoted(hook.id)): on \(describe(hook.events)) runs: \(command)")
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

    static func json(_ hook: GlobalHook, counts: [DeliveryStatus: Int]) -> JSONObject {
        var o: JSONObject = [
            "id": .string(hook.id), "on": .array((hook.events.isEmpty ? ["all"] : hook.events).map { .string($0) }),
            "command": .string(hook.command), "createdAt": .string(TimestampParser.format(hook.createdAt)),
        ]
        if let uid = hook.createdBy { o["createdBy"] = .number(Double(uid)) }
        o["deliveries"] = .object(
            JSONObject(
                uniqueKeysWithValues: DeliveryStatus.allCases.map { ($0.rawValue, .number(Double(counts[$0] ?? 0))) })
        )
        return o
    }

    // MARK: hook list

    static func list(_ c: CommandContext) throws {
        let store = try c.openStore()
        let hooks = try store.hooks()
        let counts = try store.deliveryCounts()
        if c.json {
            c.console.print(
                JSONValue.array(hooks.map { .object(json($0, counts: counts[$0.reference] ?? [:])) }).serialized())
            return
        }
        let regionCounts = counts["region"]
        guard !hooks.isEmpty || regionCounts != nil else {
            c.console.message("No hooks. Add one with: geofence hook add --on enter,exit --command CMD")
            return
        }
        var table = TextTable(["ID", "ON", "PENDING", "DONE", "DEAD", "COMMAND"])
        func numbers(_ counts: [DeliveryStatus: Int]?) -> [String] {
            let c = counts ?? [:]
            return [String((c[.pending] ?? 0) + (c[.running] ?? 0)), String(c[.done] ?? 0), String(c[.dead] ?? 0)]
        }
        for hook in hooks {
            table.add(
                [hook.id, hook.events.isEmpty ? "all" : hook.events.joined(separator: ",")]
                    + numbers(counts[hook.reference]) + [hook.command])
        }
        if let regionCounts {
            table.add(["(regions' own)", "enter,exit,dwell"] + numbers(regionCounts) + ["see geofence show ID"])
        }
        c.console.write(table.render())
    }

    // MARK: hook remove

    static func remove(_ c: CommandContext) throws {
        let ids = c.arguments.values("id")
        let removed = try c.openStore().removeHooks(ids: ids, now: c.now)
        if c.json {
            c.console.print(
                JSONValue.object([
                    "removed": .array(removed.map { .string($0.id) }),
                    "stopped": .number(Double(removed.reduce(0) { $0 + $1.stopped })),
                ]).serialized())
            return
        }
        for (id, stopped) in removed {
            c.console.print(
                "Removed hook \(RegionCommands.quoted(id))"
                    + (stopped > 0
                        ? "; \(stopped) waiting deliveries stopped (see geofence events --dead)" : ""))
        }
    }
}
