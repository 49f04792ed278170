import Foundation
import GeofenceCore

#if canImport(Glibc)
    import Glibc
#endif

/// One entry of the region change log: an insertion of the regions `seq...lastSeq` (one region, or a whole
/// import), or the deletion of region `seq`.
public struct RegionChange: Sendable, Equatable {
    public var seq: Int64
    public var lastSeq: Int64
    public var inserted: Bool

    public init(seq: Int64, lastSeq: Int64, inserted: Bool) {
        self.seq = seq
        self.lastSeq = lastSeq
        self.inserted = inserted
    }
}

/// A region as the store holds it: the requested definition plus where it stands in monitoring.
public struct StoredRegion: Sendable, Equatable {
    /// Grows with every insertion (a replaced region gets a new one); orders regions against subjects.
    public var seq: Int64
    public var region: Region
    public var status: RegionStatus
    public var attempts: Int
    public var nextRetry: Date?
    public var createdAt: Date
    public var updatedAt: Date
}

/// An event in the outbox.
public struct StoredEvent: Sendable, Equatable {
    public var seq: Int64
    public var id: String
    public var type: String
    public var region: String?
    public var subject: String?
    public var time: Date
    public var createdAt: Date
    /// The event's JSON, exactly as hooks and `replay` see it.
    public var body: String
}

/// A subject's persisted monitor state.
public struct StoredSubject: Sendable, Equatable {
    public var subject: String
    public var record: SubjectRecord
    public var pairs: [(regionSeq: Int64, record: PairRecord)]
    public var updatedAt: Date

    public static func == (a: StoredSubject, b: StoredSubject) -> Bool {
        a.subject == b.subject && a.record == b.record && a.updatedAt == b.updatedAt
            && a.pairs.elementsEqual(b.pairs) { $0.regionSeq == $1.regionSeq && $0.record == $1.record }
    }
}

/// Errors of the store's own making (SQLite's come as `DatabaseError`).
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    case duplicateRegions([String])
    case regionNotFound(String)
    case cannotCreateDirectory(String, String)
    case corruptRow(String)
    /// The store's polygons would hold more positions than `StateStore.maxPolygonPositions`.
    case tooManyPolygonPositions(Int, limit: Int)

    public var description: String {
        switch self {
        case .duplicateRegions(let ids) where ids.count == 1:
            "a region with id \"\(ids[0])\" already exists (use --replace to overwrite it)"
        case .duplicateRegions(let ids):
            "\(ids.count) regions already exist: \(ids.prefix(5).map { "\"\($0)\"" }.joined(separator: ", "))"
                + (ids.count > 5 ? ", ..." : "") + " (use --replace to overwrite them)"
        case .regionNotFound(let id): "no region with id \"\(id)\""
        case .cannotCreateDirectory(let path, let reason): "cannot create the state directory \(path): \(reason)"
        case .corruptRow(let what): "the store holds a row it cannot read: \(what)"
        case .tooManyPolygonPositions(let count, let limit):
            "the regions' polygons would hold \(count) positions: at most \(limit) are allowed in one store "
                + "(remove some, or simplify them)"
        }
    }
}

/// The durable state of one state directory: requested regions, monitor state, the event outbox,
/// settings. Shared by the CLI and the daemon through SQLite's WAL.
public final class StateStore: Sendable {
    public static let fileName = "geofence.db"
    public let directory: String
    public let queue: DatabaseQueue

    /// Limits used when reading regions back: looser than the ones applied on input, so that a region
    /// stored under older or wider limits is never dropped on load.
    static let storedLimits: RegionLimits = {
        var l = RegionLimits()
        l.maxRadius = 40_000_000
        l.maxIDBytes = 1 << 20
        l.maxNameBytes = 1 << 20
        l.maxCommandBytes = 1 << 24
        l.checksNames = false
        return l
    }()

    /// Opens (creating if needed, mode 0700) the state directory and its database, and migrates it.
    public init(directory: String, options: DatabaseConnection.Options = .init()) throws {
        try StateStore.makeDirectory(directory)
        self.directory = directory
        let path = (directory as NSString).appendingPathComponent(StateStore.fileName)
        let connection = try DatabaseConnection(path: path, options: options)
        if !options.readOnly { try Schema.migrator.migrate(connection) }
        queue = DatabaseQueue(connection: connection)
    }

    /// A store that lives in memory only, for tests and embedders who need no durability: the same schema and
    /// the same transactions as a file, gone with the process. Its `directory` is `:memory:`.
    package static func inMemory() throws -> StateStore {
        try StateStore(memory: ())
    }

    private init(memory: Void) throws {
        directory = ":memory:"
        let connection = try DatabaseConnection(path: ":memory:")
        try Schema.migrator.migrate(connection)
        queue = DatabaseQueue(connection: connection)
    }

    static func makeDirectory(_ path: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            if !isDirectory.boolValue {
                throw StoreError.cannotCreateDirectory(path, "it exists and is not a directory")
            }
            return
        }
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw StoreError.cannotCreateDirectory(path, String(cString: strerror(errno)))
        }
    }

    // MARK: Regions

    /// Adds a region. With `replace`, a region with the same id is replaced (and its states start over).
    @discardableResult
    public func addRegion(_ region: Region, replace: Bool = false, now: Date = Date()) throws -> StoredRegion {
        try queue.write { db in
            try StateStore.insert(region, replace: replace, now: now, db: db)
            guard let stored = try StateStore.region(id: region.id, db: db) else {
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
    public func importRegions(
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
    public static let maxPolygonPositions = 20_000_000
    public static let polygonPositionsKey = "limits.polygon-positions"

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
    public func removeRegion(id: String) throws -> Bool {
        try queue.write { db in try StateStore.deleteRegion(id: id, db: db) }
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
    public func removeRegions(ids: [String]) throws -> [String] {
        try queue.write { db in
            var removed: [String] = []
            for id in ids where !removed.contains(id) {
                guard try StateStore.deleteRegion(id: id, db: db) else { throw StoreError.regionNotFound(id) }
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
    public static let takenSeqKey = "engine.taken-seq"

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
    public func region(id: String) throws -> StoredRegion? {
        let normal = VisibleName.normalized(id)
        return try queue.read { db in
            try StateStore.region(id: normal, db: db) ?? (normal == id ? nil : StateStore.region(id: id, db: db))
        }
    }

    static func region(id: String, db: DatabaseConnection) throws -> StoredRegion? {
        var found: StoredRegion?
        try db.forEachRow("SELECT \(regionColumns) FROM regions WHERE id = ?", [id]) { found = try decodeRegion($0) }
        return found
    }

    /// Every requested region, in insertion order.
    public func regions() throws -> [StoredRegion] {
        try queue.read { db in
            var all: [StoredRegion] = []
            try db.forEachRow("SELECT \(StateStore.regionColumns) FROM regions ORDER BY seq") {
                all.append(try StateStore.decodeRegion($0))
            }
            return all
        }
    }

    /// At most `limit` regions after `seq`, in order: a page, for reading a million regions a part at a time.
    public func regions(afterSeq seq: Int64, limit: Int) throws -> [StoredRegion] {
        try queue.read { db in
            var page: [StoredRegion] = []
            try db.forEachRow(
                "SELECT \(StateStore.regionColumns) FROM regions WHERE seq > ? ORDER BY seq LIMIT ?", [seq, limit]
            ) { page.append(try StateStore.decodeRegion($0)) }
            return page
        }
    }

    /// The regions with these sequence numbers (those that still exist).
    public func regions(seqs: [Int64]) throws -> [StoredRegion] {
        try queue.read { db in
            var found: [StoredRegion] = []
            let sql = "SELECT \(StateStore.regionColumns) FROM regions WHERE seq = ?"
            for seq in seqs {
                try db.forEachRow(sql, [seq]) { found.append(try StateStore.decodeRegion($0)) }
            }
            return found
        }
    }

    public func regionCount() throws -> Int {
        try queue.read { db in try db.scalar("SELECT count(*) FROM regions", as: Int.self) ?? 0 }
    }

    /// Counts of regions by status kind.
    public func regionCountsByStatus() throws -> [String: Int] {
        try queue.read { db in
            var counts: [String: Int] = [:]
            try db.forEachRow("SELECT \(StateStore.statusSQL) AS shown, count(*) AS count FROM regions GROUP BY shown")
            {
                counts[try $0.string("shown")] = try $0.int("count")
            }
            return counts
        }
    }

    public func setStatus(
        seq: Int64, _ status: RegionStatus, attempts: Int? = nil, nextRetry: Date? = nil, now: Date = Date()
    ) throws {
        try queue.write { db in
            try StateStore.setStatus(seq: seq, status, attempts: attempts, nextRetry: nextRetry, now: now, db: db)
        }
    }

    static func setStatus(
        seq: Int64, _ status: RegionStatus, attempts: Int?, nextRetry: Date?, now: Date, db: DatabaseConnection
    ) throws {
        try db.execute(
            """
            UPDATE regions SET status = ?, status_reason = ?, attempts = coalesce(?, attempts), next_retry = ?,
                               updated_at = ?
            WHERE seq = ? AND (status IS NOT ? OR status_reason IS NOT ? OR next_retry IS NOT ?
                               OR attempts IS NOT coalesce(?, attempts))
            """,
            [
                status.kind.rawValue, status.reason, attempts.map { Int64($0) }, nextRetry?.timeIntervalSince1970,
                now.timeIntervalSince1970, seq, status.kind.rawValue, status.reason,
                nextRetry?.timeIntervalSince1970, attempts.map { Int64($0) },
            ])
    }

    static func decodeRegion(_ s: Statement) throws -> StoredRegion {
        let id = try s.string("id")
        var hooks: [NotifyKind: String] = [:]
        if let text = try s.optionalString("hooks") {
            guard case .object(let o)? = try? JSON.parse(text) else {
                throw StoreError.corruptRow("hooks of region \"\(id)\"")
            }
            for (key, value) in o {
                if let kind = NotifyKind(rawValue: key), let command = value.stringValue { hooks[kind] = command }
            }
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
    public func regionGeneration() throws -> Int64 {
        try queue.read { db in
            try db.scalar("SELECT coalesce(max(generation), 0) FROM region_changes", as: Int64.self) ?? 0
        }
    }

    /// Region insertions and deletions after `generation`, in order, and the generation they lead to.
    public func regionChanges(after generation: Int64) throws -> (generation: Int64, changes: [RegionChange]) {
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

    // MARK: Monitor state and the outbox

    /// Every subject's persisted state; with `heardSince`, only the subjects whose last fix is that recent
    /// (what an engine keeps in memory: the others come back with their next fix, `subject(named:)`).
    public func subjects(heardSince cutoff: Date? = nil) throws -> [StoredSubject] {
        try queue.read { db in
            if let cutoff {
                return try Self.readSubjects(
                    db, where: "WHERE last_fix_time >= ?1",
                    pairsWhere: "WHERE subject IN (SELECT subject FROM subjects WHERE last_fix_time >= ?1)",
                    [cutoff.timeIntervalSince1970])
            }
            return try Self.readSubjects(db, where: "", pairsWhere: "", [])
        }
    }

    /// The subject whose state was written last (its last fix is the freshest the engine recorded), without
    /// its region states: what `status` shows, in one look at the table however large the fleet.
    public func latestSubject() throws -> StoredSubject? {
        try queue.read { db in
            var found: StoredSubject?
            try db.forEachRow(Self.subjectColumns + " WHERE last_fix IS NOT NULL ORDER BY updated_at DESC LIMIT 1") {
                found = try Self.storedSubject($0)
            }
            return found
        }
    }

    /// One subject's persisted state, or nil for a subject the store has never seen.
    public func subject(named name: String) throws -> StoredSubject? {
        try queue.read { db in
            try Self.readSubjects(db, where: "WHERE subject = ?1", pairsWhere: "WHERE subject = ?1", [name]).first
        }
    }

    /// The columns `storedSubject` reads, in its order.
    private static let subjectColumns =
        "SELECT subject, last_fix_time, baseline_seq, last_fix, updated_at FROM subjects"

    /// A row of `subjectColumns`, without its region states.
    private static func storedSubject(_ s: Statement) throws -> StoredSubject {
        StoredSubject(
            subject: try s.string("subject"),
            record: SubjectRecord(
                lastFixTime: try s.optionalDate("last_fix_time"), baselineSeq: try s.int64("baseline_seq"),
                lastFix: eventFix(try s.optionalString("last_fix"))),
            pairs: [], updatedAt: try s.date("updated_at"))
    }

    /// A subject's last fix as the store keeps it (its event JSON).
    static func eventFix(_ text: String?) -> EventFix? {
        text.flatMap { try? JSON.parse($0).objectValue }.flatMap(EventFix.init(json:))
    }

    private static func readSubjects(
        _ db: DatabaseConnection, where filter: String, pairsWhere pairsFilter: String, _ arguments: StatementArguments
    ) throws -> [StoredSubject] {
        var bySubject: [String: Int] = [:]
        var all: [StoredSubject] = []
        try db.forEachRow(Self.subjectColumns + " \(filter) ORDER BY subject", arguments) { s in
            bySubject[try s.string("subject")] = all.count
            all.append(try Self.storedSubject(s))
        }
        try db.forEachRow(
            "SELECT subject, region_seq, state, since, dwell_fired FROM region_states \(pairsFilter)", arguments
        ) { s in
            guard let i = bySubject[try s.string("subject")], let state = RegionState(rawValue: try s.string("state"))
            else { return }
            all[i].pairs.append(
                (
                    regionSeq: try s.int64("region_seq"),
                    record: PairRecord(
                        state: state, since: try s.optionalDate("since"), dwellFired: try s.bool("dwell_fired"))
                ))
        }
        return all
    }

    /// Persists what the monitor decided, in one transaction: events into the outbox together with the
    /// state changes that caused them. Either all of it is stored or none.
    /// Writes the monitor's outputs in one transaction; with `taken`, also raises the engine's mark to it
    /// (see `markTaken(upTo:)`).
    public func apply(_ outputs: [MonitorOutput], taken: Int64? = nil, now: Date = Date()) throws {
        guard taken != nil || outputs.contains(where: { !$0.isEmpty }) else { return }
        try queue.write { db in
            for out in outputs { try StateStore.apply(out, now: now, db: db) }
            if let taken { try StateStore.markTaken(upTo: taken, now: now, db: db) }
        }
    }

    static func apply(_ out: MonitorOutput, now: Date, db: DatabaseConnection) throws {
        let t = now.timeIntervalSince1970
        for event in out.events {
            try db.execute(
                "INSERT INTO events (id, type, region, subject, time, created_at, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    event.id, event.type.rawValue, event.region, event.subject, event.time.timeIntervalSince1970, t,
                    JSONValue.object(event.json).serialized(),
                ])
        }
        for update in out.pairUpdates {
            if let record = update.record {
                // A region the CLI removed a moment ago has no row to refer to: then there is nothing to keep.
                try db.execute(
                    """
                    INSERT OR REPLACE INTO region_states (subject, region_seq, state, since, dwell_fired)
                    SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM regions WHERE seq = ?)
                    """,
                    [
                        update.subject, update.regionSeq, record.state.rawValue, record.since?.timeIntervalSince1970,
                        record.dwellFired, update.regionSeq,
                    ])
            } else {
                try db.execute(
                    "DELETE FROM region_states WHERE subject = ? AND region_seq = ?",
                    [update.subject, update.regionSeq])
            }
        }
        if let update = out.subjectUpdate {
            try db.execute(
                """
                INSERT OR REPLACE INTO subjects (subject, last_fix_time, baseline_seq, last_fix, updated_at)
                VALUES (?, ?, ?, ?, ?)
                """,
                [
                    update.subject, update.record.lastFixTime?.timeIntervalSince1970, update.record.baselineSeq,
                    update.record.lastFix.map { JSONValue.object($0.json).serialized() }, t,
                ])
        }
        for change in out.statusChanges {
            try setStatus(seq: change.regionSeq, change.status, attempts: nil, nextRetry: nil, now: now, db: db)
        }
    }

    /// Every subject's state in one region: recorded pairs, and `outside` for subjects whose baseline covers
    /// the region without a record. Subjects that never evaluated the region are absent (unknown).
    public func states(regionSeq: Int64) throws -> [(subject: String, record: PairRecord)] {
        try queue.read { db in
            var states: [(subject: String, record: PairRecord)] = []
            try db.forEachRow(
                """
                SELECT s.subject, r.state, r.since, r.dwell_fired, s.baseline_seq FROM subjects s
                LEFT JOIN region_states r ON r.subject = s.subject AND r.region_seq = ?
                UNION ALL
                SELECT r.subject, r.state, r.since, r.dwell_fired, NULL FROM region_states r
                WHERE r.region_seq = ? AND NOT EXISTS (SELECT 1 FROM subjects s WHERE s.subject = r.subject)
                ORDER BY 1
                """, [regionSeq, regionSeq]
            ) { s in
                if let stateText = try s.optionalString("state"), let state = RegionState(rawValue: stateText) {
                    let since = try s.optionalDate("since")
                    states.append(
                        (
                            try s.string("subject"),
                            PairRecord(state: state, since: since, dwellFired: try s.bool("dwell_fired"))
                        ))
                } else if let baseline = try s.optionalInt64("baseline_seq"), baseline >= regionSeq {
                    states.append((try s.string("subject"), PairRecord(state: .outside)))
                }
            }
            return states
        }
    }

    /// Puts state events (source lost, device added, ...) into the outbox.
    public func append(_ events: [StateEvent], now: Date = Date()) throws {
        guard !events.isEmpty else { return }
        try queue.write { db in try Self.insert(events, into: db, now: now) }
    }

    /// Inserts state events within the caller's transaction (so they commit with the change they report).
    static func insert(_ events: [StateEvent], into db: DatabaseConnection, now: Date) throws {
        for event in events {
            try db.execute(
                """
                INSERT INTO events (id, type, region, subject, time, created_at, body)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    event.id, event.type.rawValue, event.region, event.subject, event.time.timeIntervalSince1970,
                    now.timeIntervalSince1970, JSONValue.object(event.json).serialized(),
                ])
        }
    }

    /// Outbox events after `seq`, oldest first.
    public func events(after seq: Int64 = 0, limit: Int = 1000) throws -> [StoredEvent] {
        try queue.read { db in
            var events: [StoredEvent] = []
            try db.forEachRow(
                """
                SELECT seq, id, type, region, subject, time, created_at, body FROM events
                WHERE seq > ? ORDER BY seq LIMIT ?
                """, [seq, limit]
            ) { s in
                events.append(try StateStore.decodeEvent(s))
            }
            return events
        }
    }

    /// The sequence number of the newest event (0 when the outbox is empty).
    public func latestEventSeq() throws -> Int64 {
        try queue.read { db in try db.scalar("SELECT coalesce(max(seq), 0) FROM events", as: Int64.self) ?? 0 }
    }

    public func eventCount() throws -> Int {
        try queue.read { db in try db.scalar("SELECT count(*) FROM events", as: Int.self) ?? 0 }
    }

    /// The outbox sequence number of the event with this id, nil when the outbox has none.
    package func eventSeq(id: String) throws -> Int64? {
        try queue.read { db in try db.scalar("SELECT seq FROM events WHERE id = ?", [id], as: Int64.self) }
    }

    public func hasEvent(id: String) throws -> Bool {
        try queue.read { db in try db.scalar("SELECT 1 FROM events WHERE id = ?", [id], as: Int.self) != nil }
    }

    // MARK: Settings

    public func setting(_ key: String) throws -> String? {
        try queue.read { db in try db.scalar("SELECT value FROM settings WHERE key = ?", [key], as: String.self) }
    }

    public func setSetting(_ key: String, _ value: String, now: Date = Date()) throws {
        try queue.write { db in
            try db.execute(
                "INSERT OR REPLACE INTO settings (key, value, updated_at) VALUES (?, ?, ?)",
                [key, value, now.timeIntervalSince1970])
        }
    }

    /// `PRAGMA integrity_check`: empty when the database is sound.
    public func integrityCheck() throws -> [String] {
        try queue.writeWithoutTransaction { db in try db.integrityCheck() }
    }
}

/// One vehicle (subject) as `geofence vehicles` shows it: its last fix and the regions it is inside.
public struct VehicleSummary: Sendable, Equatable {
    public var subject: String
    public var lastFixTime: Date?
    public var lastFix: EventFix?
    /// Ids of the regions it is inside, in id order.
    public var inside: [String]
}

extension StateStore {
    /// Every vehicle the store knows, by name, with its last fix and the regions it is inside.
    public func vehicles() throws -> [VehicleSummary] {
        try queue.read { db in
            var all: [VehicleSummary] = []
            try db.forEachRow(
                """
                SELECT s.subject, s.last_fix_time, s.last_fix,
                       (SELECT group_concat(id, char(31)) FROM (
                            SELECT r.id FROM region_states rs JOIN regions r ON r.seq = rs.region_seq
                            WHERE rs.subject = s.subject AND rs.state = 'inside' ORDER BY r.id)) AS inside
                FROM subjects s ORDER BY s.subject
                """
            ) { row in
                all.append(
                    VehicleSummary(
                        subject: try row.string("subject"), lastFixTime: try row.optionalDate("last_fix_time"),
                        lastFix: Self.eventFix(try row.optionalString("last_fix")),
                        inside: try row.optionalString("inside").map { $0.split(separator: "\u{1F}").map(String.init) }
                            ?? []))
            }
            return all
        }
    }

    /// Removes every vehicle whose last fix is before `cutoff` (or that has none), with its region states;
    /// its events stay. Returns the names removed.
    @discardableResult
    public func pruneVehicles(lastFixBefore cutoff: Date) throws -> [String] {
        try queue.write { db in
            var gone: [String] = []
            try db.forEachRow(
                "SELECT subject FROM subjects WHERE last_fix_time IS NULL OR last_fix_time < ?1 ORDER BY subject",
                [cutoff.timeIntervalSince1970]
            ) { gone.append(try $0.string("subject")) }
            try db.execute(
                """
                DELETE FROM region_states WHERE subject IN
                    (SELECT subject FROM subjects WHERE last_fix_time IS NULL OR last_fix_time < ?1)
                """, [cutoff.timeIntervalSince1970])
            try db.execute(
                "DELETE FROM subjects WHERE last_fix_time IS NULL OR last_fix_time < ?1", [cutoff.timeIntervalSince1970]
            )
            return gone
        }
    }
}
