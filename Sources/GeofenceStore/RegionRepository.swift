import Foundation
import GeofenceCore

/// One entry of the region change log: an insertion of the regions `seq...lastSeq` (one region, or a whole
/// import), or the deletion of region `seq`.
package struct RegionChange: Sendable, Equatable {
    package var seq: Int64
    package var lastSeq: Int64
    package var inserted: Bool

    package init(seq: Int64, lastSeq: Int64, inserted: Bool) {
        self.seq = seq
        self.lastSeq = lastSeq
        self.inserted = inserted
    }
}

/// A region as the store holds it: the requested definition plus where it stands in monitoring.
package struct StoredRegion: Sendable, Equatable {
    /// Grows with every insertion (a replaced region gets a new one); orders regions against subjects.
    package var seq: Int64
    package var region: Region
    package var status: RegionStatus
    package var attempts: Int
    package var nextRetry: Date?
    package var createdAt: Date
    package var updatedAt: Date

    package init(
        seq: Int64, region: Region, status: RegionStatus, attempts: Int, nextRetry: Date?, createdAt: Date,
        updatedAt: Date
    ) {
        self.seq = seq
        self.region = region
        self.status = status
        self.attempts = attempts
        self.nextRetry = nextRetry
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// The requested regions (`regions`, polygons included) and the log of their insertions and deletions
/// (`region_changes`) that engines follow.
package struct RegionRepository: Sendable {
    let queue: DatabaseQueue

    /// Limits used when reading regions back: looser than the ones applied on input, so that a region
    /// stored under older or wider limits is never dropped on load.
    package static let storedLimits: RegionLimits = {
        var l = RegionLimits()
        l.maxRadius = 40_000_000
        l.maxIDBytes = 1 << 20
        l.maxNameBytes = 1 << 20
        l.maxCommandBytes = 1 << 24
        l.checksNames = false
        return l
    }()

    /// Adds a region. With `replace`, a region with the same id is replaced (and its states start over).
    @discardableResult
    package func add(_ region: Region, replace: Bool = false, now: Date = Date()) throws -> StoredRegion {
        try queue.write { db in
            try Self.insert(region, replace: replace, now: now, db: db)
            guard let stored = try Self.find(id: region.id, db: db) else {
                throw StoreError.regionNotFound(region.id)
            }
            return stored
        }
    }

    /// Adds many regions in one transaction: all or nothing. Without `replace`, any existing id refuses the
    /// whole batch. `progress` is called with the number written so far, now and then.
    ///
    /// A larger page cache for the duration (the id index is written in no particular order); durability is
    /// unchanged: one transaction, committed as any other. An import that arrives in parts (the engine's)
    /// uses `RegionImport` instead, which stores each part as it comes.
    package func addAll(
        _ regions: [Region], replace: Bool = false, now: Date = Date(),
        progress: (@Sendable (Int) -> Void)? = nil
    ) throws {
        try queue.write { db in
            let cacheSize = try db.scalar("PRAGMA cache_size", as: Int.self) ?? -2000
            try db.execute("PRAGMA cache_size = \(RegionInserter.cacheSize)")
            defer { try? db.execute("PRAGMA cache_size = \(cacheSize)") }
            let inserter = try RegionInserter(db: db, replace: replace, now: now)
            try inserter.add(regions, progress: progress)
            try inserter.finish()
            progress?(regions.count)
        }
    }

    static let insertRegionSQL = """
        INSERT INTO regions (id, name, lat, lon, radius, notify, dwell, expires, hooks, subjects,
                             created_by, created_at, updated_at, status, status_reason, polygon)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'monitoring', NULL, ?)
        """

    /// The `notify` column: the kinds in their order, comma-separated.
    static func notifyText(_ notify: Set<NotifyKind>) -> String {
        notify.sorted().map(\.rawValue).joined(separator: ",")
    }

    /// Binds a region to `insertRegionSQL`.
    static func bindInsert(_ statement: Statement, _ region: Region, notify: String, now: Date) throws {
        let hooks: String? =
            region.hooks.isEmpty
            ? nil
            : JSONValue.object(
                JSONObject(
                    uniqueKeysWithValues: NotifyKind.allCases.compactMap { k in
                        region.hooks[k].map { (k.rawValue, JSONValue.string($0)) }
                    })
            ).serialized()
        let subjects = region.subjects.map { JSONValue.array($0.map { .string($0) }).serialized() }
        try statement.bind(region.id, at: 1)
        try statement.bind(region.name, at: 2)
        try statement.bind(region.center.latitude, at: 3)
        try statement.bind(region.center.longitude, at: 4)
        try statement.bind(region.radius, at: 5)
        try statement.bind(notify, at: 6)
        try statement.bind(region.dwell, at: 7)
        try statement.bind(region.expires?.timeIntervalSince1970, at: 8)
        try statement.bind(hooks, at: 9)
        try statement.bind(subjects, at: 10)
        try statement.bind(region.createdBy.map { Int64($0) }, at: 11)
        try statement.bind((region.createdAt ?? now).timeIntervalSince1970, at: 12)
        try statement.bind(now.timeIntervalSince1970, at: 13)
        try statement.bind(region.polygon.map { DatabaseValue.blob($0.encoded) }, at: 14)
    }

    /// Most polygon positions one store may hold, all regions together (Docs/regions-format.md): about 2.5
    /// GiB of shapes in the engine (128 bytes a vertex). The setting `limits.polygon-positions` overrides it.
    package static let maxPolygonPositions = 20_000_000
    package static let polygonPositionsKey = "limits.polygon-positions"

    /// Refuses the transaction's changes if the store's polygons now hold too many positions: a scan of
    /// the rows' lengths (SQLite reads no blob for `length`), made only when polygons were written.
    static func checkPolygonPositions(db: DatabaseConnection) throws {
        // 16 bytes a position and a few header bytes a polygon (counted as positions: a slight overcount).
        let bytes = try db.scalar("SELECT coalesce(sum(length(polygon)), 0) FROM regions", as: Int64.self) ?? 0
        let limit =
            try db.scalar(
                "SELECT CAST(value AS INTEGER) FROM settings WHERE key = ?", [polygonPositionsKey], as: Int64.self)
            ?? Int64(maxPolygonPositions)
        let positions = bytes / 16
        if positions > limit { throw StoreError.tooManyPolygonPositions(Int(positions), limit: Int(limit)) }
    }

    static func insert(_ region: Region, replace: Bool, now: Date, db: DatabaseConnection) throws {
        if replace {
            try db.execute("DELETE FROM regions WHERE id = ?", [region.id])
        }
        let statement = try db.cachedStatement(insertRegionSQL)
        defer {
            statement.reset()
            statement.clearBindings()
        }
        try bindInsert(statement, region, notify: notifyText(region.notify), now: now)
        do {
            while try statement.step() {}
        } catch let error as DatabaseError where error.isUniqueConstraintViolation {
            throw StoreError.duplicateRegions([region.id])
        }
        try db.execute("INSERT INTO region_changes (seq, op) VALUES (last_insert_rowid(), 'insert')")
        if region.polygon != nil { try checkPolygonPositions(db: db) }
    }

    /// Removes a region (and its states). Returns false when there was none.
    @discardableResult
    package func remove(id: String) throws -> Bool {
        try queue.write { db in try Self.deleteRegion(id: id, db: db) }
    }

    /// Deletes by the id in NFC, as ids are stored; else (a store written before ids were normalized) as given.
    static func deleteRegion(id: String, db: DatabaseConnection) throws -> Bool {
        let normal = VisibleName.normalized(id)
        try db.execute("DELETE FROM regions WHERE id = ?", [normal])
        if db.changes == 0, normal != id { try db.execute("DELETE FROM regions WHERE id = ?", [id]) }
        return db.changes > 0
    }

    /// Removes several regions, all or nothing: if any id is missing, nothing is removed.
    /// Returns the ids removed, in the order given.
    package func remove(ids: [String]) throws -> [String] {
        try queue.write { db in
            var removed: [String] = []
            for id in ids where !removed.contains(id) {
                guard try Self.deleteRegion(id: id, db: db) else { throw StoreError.regionNotFound(id) }
                removed.append(id)
            }
            return removed
        }
    }

    static let regionColumns = """
        seq, id, name, lat, lon, radius, notify, dwell, expires, hooks, subjects, created_by, created_at, updated_at,
        \(statusSQL) AS shown_status, \(statusReasonSQL) AS shown_status_reason, attempts, next_retry, polygon
        """

    /// The settings key of the engine's mark: the highest region seq an engine has taken into its monitor.
    /// A region above it is `pending: waiting-for-engine` whatever its stored status says, until an engine
    /// takes it; so an engine's start writes this one row instead of rewriting every new region's status.
    package static let takenSeqKey = "engine.taken-seq"

    static let takenSeqSQL = """
        coalesce((SELECT CAST(value AS INTEGER) FROM settings WHERE key = '\(takenSeqKey)'), 0)
        """

    /// A region's status as shown: the stored one, or `pending` while it waits for an engine.
    static let statusSQL = """
        CASE WHEN status = 'monitoring' AND seq > \(takenSeqSQL) THEN 'pending' ELSE status END
        """

    static let statusReasonSQL = """
        CASE WHEN status = 'monitoring' AND seq > \(takenSeqSQL) THEN 'waiting-for-engine' ELSE status_reason END
        """

    /// The region with this id (compared in NFC, as ids are stored; else as given, for a store written
    /// before ids were normalized).
    package func find(id: String) throws -> StoredRegion? {
        let normal = VisibleName.normalized(id)
        return try queue.read { db in
            try Self.find(id: normal, db: db) ?? (normal == id ? nil : Self.find(id: id, db: db))
        }
    }

    static func find(id: String, db: DatabaseConnection) throws -> StoredRegion? {
        var found: StoredRegion?
        try db.forEachRow("SELECT \(regionColumns) FROM regions WHERE id = ?", [id]) { found = try decodeRegion($0) }
        return found
    }

    /// Every requested region, in insertion order.
    package func all() throws -> [StoredRegion] {
        try queue.read { db in
            var all: [StoredRegion] = []
            try db.forEachRow("SELECT \(Self.regionColumns) FROM regions ORDER BY seq") {
                all.append(try Self.decodeRegion($0))
            }
            return all
        }
    }

    /// At most `limit` regions after `seq`, in order: a page, for reading a million regions a part at a time.
    package func page(afterSeq seq: Int64, limit: Int) throws -> [StoredRegion] {
        try queue.read { db in
            var page: [StoredRegion] = []
            try db.forEachRow(
                "SELECT \(Self.regionColumns) FROM regions WHERE seq > ? ORDER BY seq LIMIT ?", [seq, limit]
            ) { page.append(try Self.decodeRegion($0)) }
            return page
        }
    }

    /// The regions with these sequence numbers (those that still exist).
    package func find(seqs: [Int64]) throws -> [StoredRegion] {
        try queue.read { db in
            var found: [StoredRegion] = []
            let sql = "SELECT \(Self.regionColumns) FROM regions WHERE seq = ?"
            for seq in seqs {
                try db.forEachRow(sql, [seq]) { found.append(try Self.decodeRegion($0)) }
            }
            return found
        }
    }

    package func count() throws -> Int {
        try queue.read { db in try db.scalar("SELECT count(*) FROM regions", as: Int.self) ?? 0 }
    }

    /// Counts of regions by status kind.
    package func countsByStatus() throws -> [String: Int] {
        try queue.read { db in
            var counts: [String: Int] = [:]
            try db.forEachRow("SELECT \(Self.statusSQL) AS shown, count(*) AS count FROM regions GROUP BY shown") {
                counts[try $0.string("shown")] = try $0.int("count")
            }
            return counts
        }
    }

    /// A region's `hooks` column: commands by kind, from a JSON object (nil when it is not one). Members
    /// that are not a kind geofence knows, or not a string, are left out.
    package static func decodeHooks(_ text: String) -> [NotifyKind: String]? {
        guard case .object(let o)? = try? JSON.parse(text) else { return nil }
        var hooks: [NotifyKind: String] = [:]
        for (key, value) in o {
            if let kind = NotifyKind(rawValue: key), let command = value.stringValue { hooks[kind] = command }
        }
        return hooks
    }

    static func decodeRegion(_ s: Statement) throws -> StoredRegion {
        let id = try s.string("id")
        var hooks: [NotifyKind: String] = [:]
        if let text = try s.optionalString("hooks") {
            guard let decoded = decodeHooks(text) else { throw StoreError.corruptRow("hooks of region \"\(id)\"") }
            hooks = decoded
        }
        var subjects: [String]?
        if let text = try s.optionalString("subjects") {
            guard case .array(let items)? = try? JSON.parse(text) else {
                throw StoreError.corruptRow("subjects of region \"\(id)\"")
            }
            subjects = items.compactMap(\.stringValue)
        }
        let notify = Set(try s.string("notify").split(separator: ",").compactMap { NotifyKind(rawValue: String($0)) })
        var polygon: RegionPolygon?
        if let bytes = try s.optionalBytes("polygon") {
            guard let parts = RegionPolygon.decodeParts(bytes) else {
                throw StoreError.corruptRow("polygon of region \"\(id)\"")
            }
            do { polygon = try RegionPolygon(parts: parts, limits: storedLimits) } catch {
                throw StoreError.corruptRow("region \"\(id)\": \(error)")
            }
        }
        let name = try s.optionalString("name")
        let center = Coordinate(latitude: try s.double("lat"), longitude: try s.double("lon"))
        let radius = try s.double("radius")
        let dwell = try s.optionalDouble("dwell")
        let expires = try s.optionalDate("expires")
        let createdBy = try s.optionalInt64("created_by").map { UInt32(truncatingIfNeeded: $0) }
        let createdAt = try s.date("created_at")
        let region: Region
        do {
            region = try Region(
                id: id, name: name, center: center, radius: radius, notify: notify, dwell: dwell, expires: expires,
                hooks: hooks, subjects: subjects, createdBy: createdBy, createdAt: createdAt, polygon: polygon,
                limits: storedLimits)
        } catch {
            throw StoreError.corruptRow("region \"\(id)\": \(error)")
        }
        let kind = RegionStatus.Kind(rawValue: try s.string("shown_status")) ?? .failed
        return StoredRegion(
            seq: try s.int64("seq"), region: region,
            status: RegionStatus(kind, reason: try s.optionalString("shown_status_reason")),
            attempts: try s.int("attempts"), nextRetry: try s.optionalDate("next_retry"), createdAt: createdAt,
            updatedAt: try s.date("updated_at"))
    }

    // MARK: Following changes

    /// The latest region change generation (0 when nothing ever changed).
    package func generation() throws -> Int64 {
        try queue.read { db in
            try db.scalar("SELECT coalesce(max(generation), 0) FROM region_changes", as: Int64.self) ?? 0
        }
    }

    /// Region insertions and deletions after `generation`, in order, and the generation they lead to.
    package func changes(after generation: Int64) throws -> (generation: Int64, changes: [RegionChange]) {
        try queue.read { db in
            var latest = generation
            var changes: [RegionChange] = []
            try db.forEachRow(
                "SELECT generation, seq, op, last_seq FROM region_changes WHERE generation > ? ORDER BY generation",
                [generation]
            ) {
                latest = try $0.int64("generation")
                let seq = try $0.int64("seq")
                changes.append(
                    RegionChange(
                        seq: seq, lastSeq: try $0.optionalInt64("last_seq") ?? seq,
                        inserted: try $0.string("op") == "insert"))
            }
            return (latest, changes)
        }
    }

}
