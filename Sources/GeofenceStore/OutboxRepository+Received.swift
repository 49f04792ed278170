import Foundation
import GeofenceCore

/// An event made by another engine, as it arrives here (read from a cluster's event stream): its JSON, exactly
/// as that engine stored it (`Docs/events.md`), and the fields the outbox keeps in columns.
package struct ReceivedEvent: Sendable, Equatable {
    package let id: String
    package let type: String
    package let region: String?
    package let subject: String?
    package let time: Date
    /// The event's JSON as received: what hooks read on stdin and sinks publish.
    package let body: String

    /// Why a message is not an event.
    package struct Invalid: Error, CustomStringConvertible, Equatable {
        package let description: String
    }

    /// The event in `payload`, or `Invalid` saying what is wrong with it: not a JSON object, or without a
    /// string `id` (1 to 128 bytes), `type` or `time` (a timestamp), or with a `region` or `subject` that is
    /// not a string.
    package init(payload: [UInt8]) throws(Invalid) {
        guard let parsed = try? JSON.parse(payload), case .object(let event) = parsed else {
            throw Invalid(description: "not a JSON object")
        }
        guard let id = event["id"]?.stringValue, (1...128).contains(id.utf8.count) else {
            throw Invalid(description: "no \"id\" (a string of 1 to 128 bytes)")
        }
        guard let type = event["type"]?.stringValue, !type.isEmpty else {
            throw Invalid(description: "event \(id): no \"type\"")
        }
        guard let timeText = event["time"]?.stringValue, let time = try? TimestampParser.parse(timeText) else {
            throw Invalid(description: "event \(id): no \"time\" (a timestamp)")
        }
        func optional(_ key: String) throws(Invalid) -> String? {
            guard let value = event[key], value != .null else { return nil }
            guard let text = value.stringValue else {
                throw Invalid(description: "event \(id): \"\(key)\" is not a string")
            }
            return text
        }
        self.id = id
        self.type = type
        region = try optional("region")
        subject = try optional("subject")
        self.time = time
        body = String(decoding: payload, as: UTF8.self)
    }
}

extension OutboxRepository {
    /// Appends events made elsewhere, in the order given, skipping each whose id the outbox already holds (a
    /// second copy of one: idempotent), and sets the setting `position` (where the reader got to, so that it
    /// resumes after what is committed) in the same transaction. Returns how many were new.
    package func appendReceived(
        _ events: [ReceivedEvent], position: (key: String, value: String)? = nil, now: Date = Date()
    ) throws -> Int {
        try queue.write { db in
            var added = 0
            for event in events {
                try db.execute(
                    """
                    INSERT INTO events (id, type, region, subject, time, created_at, body) VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (id) DO NOTHING
                    """,
                    [
                        event.id, event.type, event.region, event.subject, event.time.timeIntervalSince1970,
                        now.timeIntervalSince1970, event.body,
                    ])
                added += db.changes
            }
            if let position { try SettingsRepository.set(position.key, position.value, now: now, db: db) }
            return added
        }
    }
}
