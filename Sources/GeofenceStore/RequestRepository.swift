import Foundation
import GeofenceCore

/// A change made under a client's request id: recorded in the transaction that makes the change, so that a
/// retry with the same id (after an answer was lost: the engine died, the connection broke) is answered
/// from the record instead of being applied twice.
package struct RequestRecord: Sendable, Equatable {
    /// How long records are kept: a retry comes within minutes, not days.
    package static let retention: Double = 7 * 24 * 3600

    package var id: String
    package var uid: UInt32
    package var method: String

    package init(id: String, uid: UInt32, method: String) {
        self.id = id
        self.uid = uid
        self.method = method
    }
}

extension Schema {
    static func registerRequests(_ m: inout DatabaseMigrator) {
        m.registerMigration("020-request-records") { db in
            try db.execute(
                """
                CREATE TABLE requests (
                    id         TEXT NOT NULL,
                    uid        INTEGER NOT NULL,
                    method     TEXT NOT NULL,
                    answer     TEXT NOT NULL,
                    created_at REAL NOT NULL,
                    PRIMARY KEY (uid, id)
                )
                """)
            try db.execute("CREATE INDEX requests_by_age ON requests (created_at)")
        }
    }
}

/// The answers to clients' requests (`requests`), kept a while so that a request sent again gets the same
/// answer instead of being done twice.
package struct RequestRepository: Sendable {
    let queue: DatabaseQueue

    /// The answer recorded for `uid`'s request `id`, and the method it was for.
    package func recorded(id: String, uid: UInt32) throws -> (method: String, answer: String)? {
        try queue.read { db in
            var found: (String, String)?
            try db.forEachRow("SELECT method, answer FROM requests WHERE uid = ? AND id = ?", [Int64(uid), id]) {
                found = (try $0.string("method"), try $0.string("answer"))
            }
            return found.map { (method: $0.0, answer: $0.1) }
        }
    }

    /// Records an answer within the caller's transaction, and forgets records past their retention.
    static func record(_ request: RequestRecord, answer: String, now: Date, db: DatabaseConnection) throws {
        try db.execute(
            "DELETE FROM requests WHERE created_at < ?", [now.timeIntervalSince1970 - RequestRecord.retention])
        try db.execute(
            "INSERT OR REPLACE INTO requests (id, uid, method, answer, created_at) VALUES (?, ?, ?, ?, ?)",
            [request.id, Int64(request.uid), request.method, answer, now.timeIntervalSince1970])
    }
}

extension RegionRepository {
    /// Adds a region as `add(_:replace:now:)` does, recording `answer(stored)` under `request` in the same
    /// transaction.
    package func add(
        _ region: Region, replace: Bool, request: RequestRecord, now: Date = Date(),
        answer: @Sendable (StoredRegion) -> String
    ) throws -> StoredRegion {
        try queue.write { db in
            try Self.insert(region, replace: replace, now: now, db: db)
            guard let stored = try Self.find(id: region.id, db: db) else {
                throw StoreError.regionNotFound(region.id)
            }
            try RequestRepository.record(request, answer: answer(stored), now: now, db: db)
            return stored
        }
    }

    /// Removes regions as `remove(ids:)` does, recording `answer(removed)` under `request` in the same
    /// transaction.
    package func remove(
        ids: [String], request: RequestRecord, now: Date = Date(), answer: @Sendable ([String]) -> String
    ) throws -> [String] {
        try queue.write { db in
            var removed: [String] = []
            for id in ids where !removed.contains(id) {
                guard try Self.deleteRegion(id: id, db: db) else { throw StoreError.regionNotFound(id) }
                removed.append(id)
            }
            try RequestRepository.record(request, answer: answer(removed), now: now, db: db)
            return removed
        }
    }
}

extension DeliveryRepository {
    /// Adds a global hook as `addHook(_:)` does, recording `answer` under `request` in the same transaction.
    @discardableResult
    package func addHook(_ hook: GlobalHook, request: RequestRecord, answer: String, now: Date = Date()) throws
        -> GlobalHook
    {
        try queue.write { db in
            let added = try Self.insertHook(hook, db: db)
            try RequestRepository.record(request, answer: answer, now: now, db: db)
            return added
        }
    }

    /// Removes global hooks as `removeHooks(ids:)` does, recording `answer(removed)` under `request` in the
    /// same transaction.
    package func removeHooks(
        ids: [String], request: RequestRecord, now: Date = Date(),
        answer: @Sendable ([(id: String, stopped: Int)]) -> String
    ) throws -> [(id: String, stopped: Int)] {
        try queue.write { db in
            let removed = try Self.deleteHooks(ids: ids, now: now, db: db)
            try RequestRepository.record(request, answer: answer(removed), now: now, db: db)
            return removed
        }
    }
}

extension SinkRepository {
    /// Adds a sink as `add(_:)` does, recording `answer` under `request` in the same transaction.
    @discardableResult
    package func add(_ sink: SinkDefinition, request: RequestRecord, answer: String, now: Date = Date()) throws
        -> SinkDefinition
    {
        try queue.write { db in
            let added = try Self.insert(sink, now: now, db: db)
            try RequestRepository.record(request, answer: answer, now: now, db: db)
            return added
        }
    }

    /// Removes sinks as `remove(ids:)` does, recording `answer(removed)` under `request` in the same
    /// transaction.
    package func remove(
        ids: [String], request: RequestRecord, now: Date = Date(), answer: @Sendable ([String]) -> String
    )
        throws -> [String]
    {
        try queue.write { db in
            let removed = try Self.delete(ids: ids, db: db)
            try RequestRepository.record(request, answer: answer(removed), now: now, db: db)
            return removed
        }
    }
}
