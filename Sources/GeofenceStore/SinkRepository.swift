import Foundation
import GeofenceCore

/// A sink as the store keeps it (`geofence sink add`): where events go, which ones, in what shape.
///
/// It holds no secret: a password is named by where it lives (a file, an environment variable of the
/// engine), and read when the engine connects.
package struct SinkDefinition: Sendable, Equatable {
    /// 1 to 64 characters of `A-Z a-z 0-9 . _ -`, as a hook's id.
    package var id: String
    /// The kind of sink (`SinkKinds` in the engine): `mqtt` or `http`.
    package var kind: String
    /// Where it delivers, without a password (`mqtt://user@host:1883`, `https://example.com/hook`).
    package var url: String
    /// The topic of each event, a template (`geofence/{subject}/{region}/event`); empty for a webhook.
    package var topic: String
    /// The retained state topic per (subject, region), a template; nil: none.
    package var stateTopic: String?
    /// The retained engine status topic (`online`, `offline` as the last will); nil: none.
    package var statusTopic: String?
    /// `event` (the event JSON of Docs/events.md) or `owntracks` (an OwnTracks transition).
    package var format: String
    /// The event types it takes, in `GlobalHook.eventTypes` order; empty: every type.
    package var events: [String]
    package var passwordFile: String?
    /// The name of an environment variable of the engine holding the password.
    package var passwordEnvironment: String?
    /// With TLS, a PEM file of the CA certificates to trust (nil: the system's).
    package var caFile: String?
    /// With TLS, the client's certificate and its private key (PEM files), for a broker that asks for one.
    package var certificateFile: String?
    package var keyFile: String?
    /// A webhook's signing secret: the file it is read from when the sink starts (nil: requests unsigned).
    package var secretFile: String?
    /// A webhook's extra request headers, each `Name: value`, in the order given.
    package var headers: [String]
    /// A webhook's limit on one request, in seconds (nil: the kind's default).
    package var timeout: Double?
    /// A webhook's events per request: nil, one (the body is the event's JSON); more, a JSON array of them.
    package var batch: Int?
    /// With the `homeassistant` format, the prefix of its discovery topics (`homeassistant`); nil otherwise.
    package var discoveryPrefix: String?
    package var createdBy: UInt32?
    package var createdAt: Date

    package init(
        id: String, kind: String = "mqtt", url: String, topic: String, stateTopic: String? = nil,
        statusTopic: String? = nil, format: String = "event", events: [String] = [], passwordFile: String? = nil,
        passwordEnvironment: String? = nil, caFile: String? = nil, certificateFile: String? = nil,
        keyFile: String? = nil, secretFile: String? = nil, headers: [String] = [], timeout: Double? = nil,
        batch: Int? = nil, discoveryPrefix: String? = nil, createdBy: UInt32? = nil, createdAt: Date = Date()
    ) {
        self.id = id
        self.kind = kind
        self.url = url
        self.topic = topic
        self.stateTopic = stateTopic
        self.statusTopic = statusTopic
        self.format = format
        self.events = events
        self.passwordFile = passwordFile
        self.passwordEnvironment = passwordEnvironment
        self.caFile = caFile
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.secretFile = secretFile
        self.headers = headers
        self.timeout = timeout
        self.batch = batch
        self.discoveryPrefix = discoveryPrefix
        self.createdBy = createdBy
        self.createdAt = createdAt
    }

    /// Whether the sink takes events of `type`.
    package func matches(_ type: String) -> Bool { events.isEmpty || events.contains(type) }
}

/// A sink with how far it has got.
package struct SinkProgress: Sendable, Equatable {
    package var sink: SinkDefinition
    /// The highest event seq delivered and acknowledged (or skipped by the filter).
    package var cursor: Int64
    /// Events after the cursor that the sink takes: its lag.
    package var waiting: Int
}

/// Errors of the sink store functions.
package enum SinkStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    case duplicateSink(String)
    case sinkNotFound(String)

    package var description: String {
        switch self {
        case .duplicateSink(let id): "a sink with id \"\(id)\" already exists (remove it first)"
        case .sinkNotFound(let id): "no sink with id \"\(id)\""
        }
    }
}

/// The event sinks (`sinks`) and how far each has taken the outbox (`sink_cursors`).
package struct SinkRepository: Sendable {
    let queue: DatabaseQueue

    /// Adds a sink; it takes the events committed from now on (its cursor starts at the newest event).
    @discardableResult
    package func add(_ sink: SinkDefinition, now: Date = Date()) throws -> SinkDefinition {
        try queue.write { db in try Self.insert(sink, now: now, db: db) }
    }

    static func insert(_ sink: SinkDefinition, now: Date, db: DatabaseConnection) throws -> SinkDefinition {
        do {
            try db.execute(
                """
                INSERT INTO sinks (id, kind, url, topic, state_topic, status_topic, format, events, password_file,
                                   password_env, ca_file, cert_file, key_file, secret_file, headers, timeout,
                                   batch, discovery_prefix, created_by, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    sink.id, sink.kind, sink.url, sink.topic, sink.stateTopic, sink.statusTopic, sink.format,
                    sink.events.isEmpty ? "*" : sink.events.joined(separator: ","), sink.passwordFile,
                    sink.passwordEnvironment, sink.caFile, sink.certificateFile, sink.keyFile, sink.secretFile,
                    sink.headers.isEmpty ? nil : JSONValue.array(sink.headers.map { .string($0) }).serialized(),
                    sink.timeout, sink.batch.map { Int64($0) }, sink.discoveryPrefix, sink.createdBy.map { Int64($0) },
                    sink.createdAt.timeIntervalSince1970,
                ])
        } catch let error as DatabaseError where error.isUniqueConstraintViolation {
            throw SinkStoreError.duplicateSink(sink.id)
        }
        try db.execute(
            """
            INSERT OR REPLACE INTO sink_cursors (sink, seq, updated_at)
            SELECT ?, coalesce(max(seq), 0), ? FROM events
            """, [sink.id, now.timeIntervalSince1970])
        return sink
    }

    /// Every sink, oldest first.
    package func all() throws -> [SinkDefinition] {
        try queue.read { db in
            var sinks: [SinkDefinition] = []
            try db.forEachRow(
                """
                SELECT id, kind, url, topic, state_topic, status_topic, format, events, password_file, password_env,
                       ca_file, cert_file, key_file, secret_file, headers, timeout, batch, discovery_prefix,
                       created_by, created_at
                FROM sinks ORDER BY created_at, id
                """
            ) { s in
                let events = try s.string("events")
                let headers = try s.optionalString("headers").flatMap { try? JSON.parse($0) }?.arrayValue ?? []
                sinks.append(
                    SinkDefinition(
                        id: try s.string("id"), kind: try s.string("kind"), url: try s.string("url"),
                        topic: try s.string("topic"), stateTopic: try s.optionalString("state_topic"),
                        statusTopic: try s.optionalString("status_topic"), format: try s.string("format"),
                        events: events == "*" ? [] : events.split(separator: ",").map(String.init),
                        passwordFile: try s.optionalString("password_file"),
                        passwordEnvironment: try s.optionalString("password_env"),
                        caFile: try s.optionalString("ca_file"),
                        certificateFile: try s.optionalString("cert_file"), keyFile: try s.optionalString("key_file"),
                        secretFile: try s.optionalString("secret_file"), headers: headers.compactMap(\.stringValue),
                        timeout: try s.optionalDouble("timeout"),
                        batch: try s.optionalInt64("batch").map { Int(clamping: $0) },
                        discoveryPrefix: try s.optionalString("discovery_prefix"),
                        createdBy: try s.optionalInt64("created_by").map { UInt32(truncatingIfNeeded: $0) },
                        createdAt: try s.date("created_at")))
            }
            return sinks
        }
    }

    /// Every sink with its cursor and how many events it has still to deliver.
    package func progress() throws -> [SinkProgress] {
        let all = try all()
        return try queue.read { db in
            try all.map { sink in
                let cursor =
                    try db.scalar("SELECT seq FROM sink_cursors WHERE sink = ?", [sink.id], as: Int64.self) ?? 0
                let waiting: Int
                if sink.events.isEmpty {
                    waiting = try db.scalar("SELECT count(*) FROM events WHERE seq > ?", [cursor], as: Int.self) ?? 0
                } else {
                    let marks = sink.events.map { _ in "?" }.joined(separator: ", ")
                    waiting =
                        try db.scalar(
                            "SELECT count(*) FROM events WHERE seq > ? AND type IN (\(marks))",
                            StatementArguments([cursor] + sink.events), as: Int.self) ?? 0
                }
                return SinkProgress(sink: sink, cursor: cursor, waiting: waiting)
            }
        }
    }

    /// Removes sinks, all or nothing, with their cursors.
    @discardableResult
    package func remove(ids: [String]) throws -> [String] {
        try queue.write { db in try Self.delete(ids: ids, db: db) }
    }

    static func delete(ids: [String], db: DatabaseConnection) throws -> [String] {
        var removed: [String] = []
        for id in ids where !removed.contains(id) {
            try db.execute("DELETE FROM sinks WHERE id = ?", [id])
            guard db.changes > 0 else { throw SinkStoreError.sinkNotFound(id) }
            try db.execute("DELETE FROM sink_cursors WHERE sink = ?", [id])
            try db.execute("DELETE FROM sink_trackers WHERE sink = ?", [id])
            removed.append(id)
        }
        return removed
    }

    /// A sink's cursor (nil: no such sink).
    package func cursor(_ id: String) throws -> Int64? {
        try queue.read { db in try db.scalar("SELECT seq FROM sink_cursors WHERE sink = ?", [id], as: Int64.self) }
    }

    /// Moves a sink's cursor forward (never back: two runners, or a stale one, cannot undo progress).
    package func advanceCursor(_ id: String, to seq: Int64, now: Date = Date()) throws {
        try queue.write { db in
            try db.execute(
                "UPDATE sink_cursors SET seq = ?, updated_at = ? WHERE sink = ? AND seq < ?",
                [seq, now.timeIntervalSince1970, id, seq])
        }
    }
}
