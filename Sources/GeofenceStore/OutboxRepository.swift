import Foundation
import GeofenceCore
import Synchronization

/// An event in the outbox.
package struct StoredEvent: Sendable, Equatable {
    package var seq: Int64
    package var id: String
    package var type: String
    package var region: String?
    package var subject: String?
    package var time: Date
    package var createdAt: Date
    /// The event's JSON, exactly as hooks and `replay` see it.
    package var body: String {
        didSet { decoded = DecodedFields() }
    }
    private var decoded = DecodedFields()

    /// What consumers read of `body`: decoded the first time one asks, then kept with the event (its copies
    /// share it), so a batch's events are decoded at most once, and not at all by a consumer that needs none.
    package var fields: EventFields { decoded.fields(of: body) }

    package init(
        seq: Int64, id: String, type: String, region: String?, subject: String?, time: Date, createdAt: Date,
        body: String
    ) {
        self.seq = seq
        self.id = id
        self.type = type
        self.region = region
        self.subject = subject
        self.time = time
        self.createdAt = createdAt
        self.body = body
    }

    package static func == (a: StoredEvent, b: StoredEvent) -> Bool {
        // The fields follow from the body.
        a.seq == b.seq && a.id == b.id && a.type == b.type && a.region == b.region && a.subject == b.subject
            && a.time == b.time && a.createdAt == b.createdAt && a.body == b.body
    }
}

/// A `StoredEvent`'s fields once decoded.
private final class DecodedFields: Sendable {
    private let value = Mutex<EventFields?>(nil)

    func fields(of body: String) -> EventFields {
        value.withLock { value in
            if let value { return value }
            let decoded = EventFields(body: body)
            value = decoded
            return decoded
        }
    }
}

/// The event outbox (`events`): every event, region and state alike, in commit order. Written only within
/// the transaction of the change an event reports (`insert(_:into:now:)`, composed by the other
/// repositories), read by hooks' dispatch, sinks and `geofence events`.
package struct OutboxRepository: Sendable {
    let queue: DatabaseQueue

    /// Puts state events (source lost, device added, ...) into the outbox.
    package func append(_ events: [StateEvent], now: Date = Date()) throws {
        guard !events.isEmpty else { return }
        try queue.write { db in try Self.insert(events, into: db, now: now) }
    }

    /// Inserts state events within the caller's transaction (so they commit with the change they report).
    static func insert(_ events: [StateEvent], into db: DatabaseConnection, now: Date) throws {
        for event in events {
            try insert(
                id: event.id, type: event.type.rawValue, region: event.region, subject: event.subject,
                time: event.time, json: event.json, now: now, db: db)
        }
    }

    /// Inserts region events within the caller's transaction (with the state changes that caused them).
    static func insert(_ events: [RegionEvent], into db: DatabaseConnection, now: Date) throws {
        for event in events {
            try insert(
                id: event.id, type: event.type.rawValue, region: event.region, subject: event.subject,
                time: event.time, json: event.json, now: now, db: db)
        }
    }

    private static func insert(
        id: String, type: String, region: String?, subject: String?, time: Date, json: JSONObject, now: Date,
        db: DatabaseConnection
    ) throws {
        try db.execute(
            "INSERT INTO events (id, type, region, subject, time, created_at, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                id, type, region, subject, time.timeIntervalSince1970, now.timeIntervalSince1970,
                JSONValue.object(json).serialized(),
            ])
    }

    /// Outbox events after `seq`, oldest first.
    package func events(after seq: Int64 = 0, limit: Int = 1000) throws -> [StoredEvent] {
        try queue.read { db in
            var events: [StoredEvent] = []
            try db.forEachRow(
                """
                SELECT seq, id, type, region, subject, time, created_at, body FROM events
                WHERE seq > ? ORDER BY seq LIMIT ?
                """, [seq, limit]
            ) { s in
                events.append(try Self.decodeEvent(s))
            }
            return events
        }
    }

    /// The newest `limit` outbox events, oldest first.
    package func latest(limit: Int) throws -> [StoredEvent] {
        try queue.read { db in
            var events: [StoredEvent] = []
            try db.forEachRow(
                "SELECT \(Self.eventColumns) FROM events ORDER BY seq DESC LIMIT ?", [limit]
            ) { s in
                events.append(try Self.decodeEvent(s))
            }
            return events.reversed()
        }
    }

    /// The sequence number of the newest event (0 when the outbox is empty).
    package func latestSeq() throws -> Int64 {
        try queue.read { db in try db.scalar("SELECT coalesce(max(seq), 0) FROM events", as: Int64.self) ?? 0 }
    }

    package func count() throws -> Int {
        try queue.read { db in try db.scalar("SELECT count(*) FROM events", as: Int.self) ?? 0 }
    }

    /// The outbox sequence number of the event with this id, nil when the outbox has none.
    package func seq(id: String) throws -> Int64? {
        try queue.read { db in try db.scalar("SELECT seq FROM events WHERE id = ?", [id], as: Int64.self) }
    }

    package func contains(id: String) throws -> Bool {
        try queue.read { db in try db.scalar("SELECT 1 FROM events WHERE id = ?", [id], as: Int.self) != nil }
    }

    static func decodeEvent(_ s: Statement) throws -> StoredEvent {
        StoredEvent(
            seq: try s.int64("seq"), id: try s.string("id"), type: try s.string("type"),
            region: try s.optionalString("region"), subject: try s.optionalString("subject"),
            time: try s.date("time"), createdAt: try s.date("created_at"), body: try s.string("body"))
    }

    static let eventColumns = "seq, id, type, region, subject, time, created_at, body"

    /// One event by its seq.
    package func event(seq: Int64) throws -> StoredEvent? {
        try queue.read { db in
            var found: StoredEvent?
            try db.forEachRow("SELECT \(Self.eventColumns) FROM events WHERE seq = ?", [seq]) {
                found = try Self.decodeEvent($0)
            }
            return found
        }
    }

    /// Deletes the events before seq `bound` that nothing else in the store still needs: none waits for a
    /// delivery, every sink's cursor has passed it, and, when any hook is defined, the hook dispatcher has
    /// passed it too (so a `geofence run` on the same store later runs its hooks for none it has lost). For a
    /// consumer that has handled everything before `bound` itself: an embedding program. Returns how many.
    package func prune(beforeSeq bound: Int64) throws -> Int {
        try queue.write { db in
            try db.execute(
                """
                DELETE FROM events
                WHERE seq < ?
                  AND seq <= coalesce((SELECT min(seq) FROM sink_cursors), seq)
                  AND ((NOT EXISTS (SELECT 1 FROM hooks)
                        AND NOT EXISTS (SELECT 1 FROM regions WHERE hooks IS NOT NULL))
                       OR seq <= (SELECT cursor FROM hook_dispatch WHERE id = 1))
                  AND NOT EXISTS (SELECT 1 FROM deliveries d
                                  WHERE d.event_seq = events.seq AND d.status IN ('pending', 'running'))
                """, [bound])
            return db.changes
        }
    }

    /// Deletes events committed before `cutoff` whose deliveries are all done or dead (and that were
    /// dispatched), with those deliveries. An event still waiting for a delivery, or for a sink (after the
    /// slowest sink's cursor), is never deleted.
    package func prune(before cutoff: Date) throws -> (events: Int, deliveries: Int) {
        try queue.write { db in
            let before = try db.scalar("SELECT count(*) FROM deliveries", as: Int.self) ?? 0
            try db.execute(
                """
                DELETE FROM events
                WHERE created_at < ? AND seq <= (SELECT cursor FROM hook_dispatch WHERE id = 1)
                  AND seq <= coalesce((SELECT min(seq) FROM sink_cursors), seq)
                  AND NOT EXISTS (SELECT 1 FROM deliveries d
                                  WHERE d.event_seq = events.seq AND d.status IN ('pending', 'running'))
                """, [cutoff.timeIntervalSince1970])
            let events = db.changes
            let after = try db.scalar("SELECT count(*) FROM deliveries", as: Int.self) ?? 0
            return (events, before - after)
        }
    }
}
