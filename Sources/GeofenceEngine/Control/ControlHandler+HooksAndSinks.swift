import Foundation
import GeofenceCore
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

extension ControlHandler {
    // MARK: Hooks

    /// Hooks run as whoever registered them when the engine runs as root; an engine that is not root can
    /// only run them as itself, so it takes hooks only from its own user.
    func checkHookOwner(_ uid: UInt32) throws {
        let me = getuid()
        guard me != 0, uid != me, uid != 0 else { return }
        throw ControlError(
            .permissionDenied,
            "this engine runs as \(ControlHandler.userName(me)) and runs hooks only for that user; "
                + "run it as root to take hooks from \(ControlHandler.userName(uid))")
    }

    func addHook(_ p: JSONObject, peer: ControlPeer) throws -> JSONValue {
        try checkHookOwner(peer.uid)
        let request = try requestRecord(p, .hookAdd, peer: peer)
        if let request, let recorded = try recordedAnswer(request) { return recorded }
        func insert(_ hook: GlobalHook) throws {
            if let request {
                let answer = JSONValue.object(HookReport.json(hook, counts: [:])).serialized()
                try store.deliveries.addHook(hook, request: request, answer: answer)
            } else {
                try store.deliveries.addHook(hook)
            }
        }
        let command = try string(p, "command")
        if let problem = GlobalHook.problem(withCommand: command) {
            throw ControlError(.invalid, "command: \(problem)")
        }
        let events = try (p["on"]?.arrayValue ?? []).map { item -> String in
            guard let type = item.stringValue, GlobalHook.eventTypes.contains(type) else {
                throw ControlError(.invalid, "on: \(item.serialized()) is not an event type")
            }
            return type
        }
        var hook = GlobalHook(
            id: "", events: GlobalHook.eventTypes.filter(Set(events).contains), command: command, createdBy: peer.uid,
            createdAt: Date())
        if let id = p["id"]?.stringValue {
            if let problem = GlobalHook.problem(withID: id) { throw ControlError(.invalid, "id: \(problem)") }
            hook.id = id
            try insert(hook)
        } else {
            hook.id = try Self.generatedID("hook") { id, isLast in
                hook.id = id
                do { try insert(hook) } catch HookStoreError.duplicateHook where !isLast { return false }
                return true
            }
        }
        return .object(HookReport.json(hook, counts: [:]))
    }

    /// Stores something under a generated id (`PREFIX-` and a random base-36 number), trying another on the
    /// (astronomically unlikely) collision rather than failing: `insert` returns false for a taken id, and on
    /// the last of six tries (`isLast`) lets the store's error through.
    static func generatedID(_ prefix: String, _ insert: (String, _ isLast: Bool) throws -> Bool) throws -> String {
        for attempt in 0...5 {
            let id = prefix + "-" + String(UInt32.random(in: 0...UInt32.max), radix: 36)
            if try insert(id, attempt == 5) { return id }
        }
        preconditionFailure("the last try returns or throws")
    }

    // MARK: Sinks

    /// Every sink as `sink list --json` and `status` show it: its definition (no password, only where it is
    /// read from), its cursor and lag, and, while an engine runs, its health.
    package func sinkReports() throws -> [JSONObject] {
        let health =
            engine == nil ? nil : (try store.settings.value(DaemonSettings.sinks)).flatMap { try? JSON.parse($0) }
        return try store.sinks.progress().map { progress in
            var o = SinkRequest.json(progress.sink)
            o["cursor"] = .number(Double(progress.cursor))
            o["waiting"] = .number(Double(progress.waiting))
            if let health {
                let own = health[progress.sink.id]
                o["connected"] = own?["connected"] ?? false
                if let problem = own?["problem"] { o["problem"] = problem }
                if let delivered = own?["delivered"] { o["delivered"] = delivered }
            } else {
                o["connected"] = false
                o["problem"] = "the engine is not running"
            }
            return o
        }
    }
}
