import Foundation
import GeofenceCore

/// A client's recorded permission.
package struct StoredPermission: Sendable, Equatable {
    package var uid: UInt32
    package var status: AuthorizationStatus
    /// What the client said when it asked.
    package var reason: String?
    package var requestedAt: Date?
    package var updatedAt: Date
    package var updatedBy: UInt32?
}

/// The clients' permissions (`permissions`) and the Location Services switch that overrides them all.
package struct PermissionRepository: Sendable {
    let queue: DatabaseQueue

    /// The settings key of the Location Services switch (`on` or `off`; absent means on).
    package static let servicesKey = "services"

    package func servicesOn() throws -> Bool {
        try SettingsRepository(queue: queue).value(Self.servicesKey) != "off"
    }

    /// Flips the switch; `events` (the `services` event and the authorization changes it makes) commit with it.
    package func setServices(on: Bool, events: [StateEvent] = [], now: Date = Date()) throws {
        try queue.write { db in
            try SettingsRepository.set(Self.servicesKey, on ? "on" : "off", now: now, db: db)
            try OutboxRepository.insert(events, into: db, now: now)
        }
    }

    package func all() throws -> [StoredPermission] {
        try queue.read { db in
            var all: [StoredPermission] = []
            try db.forEachRow(
                "SELECT uid, status, reason, requested_at, updated_at, updated_by FROM permissions ORDER BY uid"
            ) { s in
                all.append(
                    StoredPermission(
                        uid: UInt32(truncatingIfNeeded: try s.int64("uid")),
                        status: AuthorizationStatus(rawValue: try s.string("status")) ?? .notDetermined,
                        reason: try s.optionalString("reason"), requestedAt: try s.optionalDate("requested_at"),
                        updatedAt: try s.date("updated_at"),
                        updatedBy: try s.optionalInt64("updated_by").map { UInt32(truncatingIfNeeded: $0) }))
            }
            return all
        }
    }

    package func find(uid: UInt32) throws -> StoredPermission? {
        try all().first { $0.uid == uid }
    }

    /// Records a request for access (status stays `notDetermined`, or what it was, with the reason), with
    /// `events` (its `authorization` event) in the same transaction, unless a request of `uid` is already
    /// pending (its status is `notDetermined` and it has asked): then nothing changes and it returns false.
    /// One pending request a user: asking again cannot add events (each runs hooks and goes to sinks).
    @discardableResult
    package func request(uid: UInt32, reason: String?, events: [StateEvent] = [], now: Date = Date()) throws -> Bool {
        try queue.write { db in
            let pending =
                try db.scalar(
                    """
                    SELECT count(*) FROM permissions
                    WHERE uid = ? AND status = 'notDetermined' AND requested_at IS NOT NULL
                    """, [Int64(uid)], as: Int.self) ?? 0
            guard pending == 0 else { return false }
            try db.execute(
                """
                INSERT INTO permissions (uid, status, reason, requested_at, updated_at)
                VALUES (?, 'notDetermined', ?, ?, ?)
                ON CONFLICT (uid) DO UPDATE SET reason = excluded.reason, requested_at = excluded.requested_at,
                                                updated_at = excluded.updated_at
                """, [Int64(uid), reason, now.timeIntervalSince1970, now.timeIntervalSince1970])
            try OutboxRepository.insert(events, into: db, now: now)
            return true
        }
    }

    /// Grants, denies or resets (to `notDetermined`) a client; `events` (its `authorization` event) commit
    /// with it. A reset also clears the user's request, so that they may ask again.
    package func set(
        uid: UInt32, _ status: AuthorizationStatus, by: UInt32?, events: [StateEvent] = [], now: Date = Date()
    ) throws {
        precondition(status != .restricted, "restricted comes from the policy file")
        try queue.write { db in
            try db.execute(
                """
                INSERT INTO permissions (uid, status, updated_at, updated_by) VALUES (?, ?, ?, ?)
                ON CONFLICT (uid) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at,
                                                updated_by = excluded.updated_by
                """, [Int64(uid), status.rawValue, now.timeIntervalSince1970, by.map { Int64($0) }])
            if status == .notDetermined {
                try db.execute("UPDATE permissions SET reason = NULL, requested_at = NULL WHERE uid = ?", [Int64(uid)])
            }
            try OutboxRepository.insert(events, into: db, now: now)
        }
    }
}
