import Foundation
import GeofenceCore

/// A global hook (`geofence hook add`): a shell command run for every event of the listed types.
package struct GlobalHook: Sendable, Equatable {
    /// Every event type a hook can be registered for: region events, then state events.
    package static let eventTypes: [String] =
        RegionEventType.allCases.map(\.rawValue) + StateEvent.Kind.allCases.map(\.rawValue)

    /// 1 to 64 characters of `A-Z a-z 0-9 . _ -`, so it is safe to show and to type.
    package var id: String
    /// The event types it runs for, in `eventTypes` order; empty means every type, present and future.
    package var events: [String]
    package var command: String
    /// Unix uid of the client that added it; a root daemon will run the hook as this user (issue 5).
    package var createdBy: UInt32?
    package var createdAt: Date

    package init(id: String, events: [String], command: String, createdBy: UInt32? = nil, createdAt: Date) {
        self.id = id
        self.events = events
        self.command = command
        self.createdBy = createdBy
        self.createdAt = createdAt
    }

    /// Whether the hook runs for events of `type`.
    package func matches(_ type: String) -> Bool { events.isEmpty || events.contains(type) }

    /// The `hook` column of its deliveries.
    package var reference: String { "hook:\(id)" }

    /// Why `id` is not a valid hook id, or nil when it is.
    package static func problem(withID id: String) -> String? {
        if id.isEmpty { return "is empty" }
        if id.count > 64 { return "is longer than 64 characters" }
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        if let bad = id.first(where: { !allowed.contains($0) }) {
            return "contains \(JSONValue.string(String(bad)).serialized()): use letters, digits, '.', '_' and '-'"
        }
        return nil
    }

    /// Why `command` cannot be a hook command, or nil when it can.
    package static func problem(withCommand command: String) -> String? {
        if command.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { return "is empty" }
        if command.utf8.count > 4096 { return "is longer than 4096 bytes" }
        if command.utf8.contains(0) { return "contains a NUL byte" }
        return nil
    }
}

/// Errors of the hook and delivery store functions.
package enum HookStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    case duplicateHook(String)
    case hookNotFound(String)
    /// A delivery id or event id that matches nothing.
    case deliveryNotFound(String)
    /// The deliveries named are all done: there is nothing to retry.
    case nothingToRetry(String)

    package var description: String {
        switch self {
        case .duplicateHook(let id): "a hook with id \"\(id)\" already exists (remove it first)"
        case .hookNotFound(let id): "no hook with id \"\(id)\""
        case .deliveryNotFound(let ref): "no delivery or event with id \"\(ref)\""
        case .nothingToRetry(let what): "nothing to retry: \(what)"
        }
    }
}

extension DeliveryRepository {
    /// Adds a global hook. It applies to every event not yet dispatched to hooks: in practice, events from now on.
    @discardableResult
    package func addHook(_ hook: GlobalHook) throws -> GlobalHook {
        try queue.write { db in try Self.insertHook(hook, db: db) }
    }

    static func insertHook(_ hook: GlobalHook, db: DatabaseConnection) throws -> GlobalHook {
        do {
            try db.execute(
                "INSERT INTO hooks (id, events, command, created_by, created_at) VALUES (?, ?, ?, ?, ?)",
                [
                    hook.id, hook.events.isEmpty ? "*" : hook.events.joined(separator: ","), hook.command,
                    hook.createdBy.map { Int64($0) }, hook.createdAt.timeIntervalSince1970,
                ])
        } catch let error as DatabaseError where error.isUniqueConstraintViolation {
            throw HookStoreError.duplicateHook(hook.id)
        }
        return hook
    }

    /// Every global hook, oldest first.
    package func hooks() throws -> [GlobalHook] {
        try queue.read { db in try Self.hooks(db: db) }
    }

    static func hooks(db: DatabaseConnection) throws -> [GlobalHook] {
        var hooks: [GlobalHook] = []
        try db.forEachRow("SELECT id, events, command, created_by, created_at FROM hooks ORDER BY created_at, id") {
            let events = try $0.string("events")
            hooks.append(
                GlobalHook(
                    id: try $0.string("id"),
                    events: events == "*" ? [] : events.split(separator: ",").map(String.init),
                    command: try $0.string("command"),
                    createdBy: try $0.optionalInt64("created_by").map { UInt32(truncatingIfNeeded: $0) },
                    createdAt: try $0.date("created_at")))
        }
        return hooks
    }

    /// Removes global hooks, all or nothing. Their deliveries still waiting become `dead` ("hook removed"), so
    /// nothing runs a command its owner took away, and what was not delivered stays visible (and retryable).
    /// Returns, per hook, how many deliveries were stopped.
    package func removeHooks(ids: [String], now: Date = Date()) throws -> [(id: String, stopped: Int)] {
        try queue.write { db in try Self.deleteHooks(ids: ids, now: now, db: db) }
    }

    static func deleteHooks(ids: [String], now: Date, db: DatabaseConnection) throws -> [(id: String, stopped: Int)] {
        var removed: [(id: String, stopped: Int)] = []
        for id in ids where !removed.contains(where: { $0.id == id }) {
            try db.execute("DELETE FROM hooks WHERE id = ?", [id])
            guard db.changes > 0 else { throw HookStoreError.hookNotFound(id) }
            try db.execute(
                """
                UPDATE deliveries SET status = 'dead', last_error = 'hook removed', finished_at = ?,
                                      change_seq = \(Self.nextChangeSeq)
                WHERE hook = ? AND status = 'pending'
                """, [now.timeIntervalSince1970, "hook:\(id)"])
            removed.append((id, db.changes))
        }
        try Self.bumpHookGeneration(db: db)
        return removed
    }

    /// Delivery counts per `hook` reference (`hook:<id>`, `region`) and status.
    package func countsByHook() throws -> [String: [DeliveryStatus: Int]] {
        try queue.read { db in
            var counts: [String: [DeliveryStatus: Int]] = [:]
            try db.forEachRow("SELECT hook, status, count(*) AS count FROM deliveries GROUP BY hook, status") {
                if let status = DeliveryStatus(rawValue: try $0.string("status")) {
                    counts[try $0.string("hook"), default: [:]][status] = try $0.int("count")
                }
            }
            return counts
        }
    }

    /// SQL for the next value of `deliveries.change_seq`, which `geofence events --follow` watches.
    static let nextChangeSeq = "(SELECT coalesce(max(change_seq), 0) + 1 FROM deliveries)"

    /// Tells a running hook runner that deliveries changed behind its back.
    static func bumpHookGeneration(db: DatabaseConnection) throws {
        try db.execute("UPDATE hook_dispatch SET generation = generation + 1 WHERE id = 1")
    }
}
