import Foundation
import GeofenceCore

/// Inserts the regions of one import within the caller's transaction, in as many calls as it comes in
/// parts, then checks and logs it as a whole (`finish`). Not `Sendable`: it lives on its connection's thread.
///
/// Built for a million regions in seconds: statements prepared once and bound column by column, the
/// duplicate check folded into the insertion (a unique-constraint failure is a duplicate; ids that existed
/// before are all reported, as a separate probe of every id would).
final class RegionInserter {
    private let db: DatabaseConnection
    private let now: Date
    /// The highest seq before the import: every region after it is one of the import's own.
    private let lastSeq: Int64
    private let insert: Statement
    private let delete: Statement?
    private let seqOfID: Statement
    private var existing: [String] = []
    private var repeated: String?
    private var notifyTexts: [Set<NotifyKind>: String] = [:]
    /// Regions inserted (or found to be duplicates) so far.
    private(set) var count = 0
    /// Whether any of them is a polygon (then `finish` checks the store's total of positions).
    private var wrotePolygons = false

    init(db: DatabaseConnection, replace: Bool, now: Date) throws {
        self.db = db
        self.now = now
        lastSeq = try db.scalar("SELECT coalesce(max(seq), 0) FROM regions", as: Int64.self) ?? 0
        insert = try db.makeStatement(RegionRepository.insertRegionSQL)
        delete = replace ? try db.makeStatement("DELETE FROM regions WHERE id = ?") : nil
        seqOfID = try db.makeStatement("SELECT seq FROM regions WHERE id = ?")
    }

    /// Inserts `regions`; `progress` is called with the number inserted so far (counting earlier calls),
    /// every 10,000.
    func add(_ regions: [Region], progress: (@Sendable (Int) -> Void)? = nil) throws {
        for region in regions {
            if let delete {
                delete.reset()
                try delete.bind(region.id, at: 1)
                while try delete.step() {}
            }
            let notify =
                notifyTexts[region.notify]
                ?? {
                    let text = RegionRepository.notifyText(region.notify)
                    notifyTexts[region.notify] = text
                    return text
                }()
            insert.reset()
            if region.polygon != nil { wrotePolygons = true }
            try RegionRepository.bindInsert(insert, region, notify: notify, now: now)
            do {
                while try insert.step() {}
            } catch let error as DatabaseError where error.isUniqueConstraintViolation {
                // Existed before this import, or came earlier in it?
                seqOfID.reset()
                try seqOfID.bind(region.id, at: 1)
                let seq = try seqOfID.step() ? seqOfID.int64("seq") : lastSeq + 1
                seqOfID.reset()
                if seq <= lastSeq {
                    existing.append(region.id)
                } else if repeated == nil {
                    repeated = region.id
                }
            }
            count += 1
            if count % 10_000 == 0 { progress?(count) }
        }
        insert.reset()
        delete?.reset()
    }

    /// Refuses the import if it met ids it may not overwrite; else logs it as one change.
    func finish() throws {
        // The error a probe of every id first, then the insertions, would give.
        if !existing.isEmpty { throw StoreError.duplicateRegions(existing) }
        if let repeated { throw StoreError.duplicateRegions([repeated]) }
        if wrotePolygons { try RegionRepository.checkPolygonPositions(db: db) }
        // One change for the whole import: every region after `lastSeq` is one of its own.
        try db.execute(
            """
            INSERT INTO region_changes (seq, op, last_seq)
            SELECT min(seq), 'insert', max(seq) FROM regions WHERE seq > ? HAVING count(*) > 0
            """, [lastSeq])
    }

    /// The page cache an import works with: its id index is written in no particular order, and the whole
    /// import is one transaction. Measured in Docs/benchmarks.md.
    static let cacheSize = "-65536"
}

/// An import stored while it is still arriving (the engine's `import` in parts): each part is inserted as
/// it comes, in one write transaction on a connection of its own, committed by `commit()` or dropped by
/// `rollback()` (or when the import is released unended). All or nothing, as `RegionRepository.addAll`.
///
/// The connection is its own so that nothing else the process writes meanwhile (events, statuses) ends up
/// in the import's transaction, or is undone by its rollback; those writers wait for the write lock as they
/// would for another process's (the busy timeout), and retry. It lives on a thread of its own, so that
/// inserting one part overlaps with receiving and checking the next: `add` only queues the part (waiting
/// while two are queued), and an insertion's error is thrown by the next call.
package final class RegionImport: Sendable {
    private let writer: RegionImportWriter

    /// Opens a connection to `store`'s database and begins an immediate transaction: from here until the
    /// end, the import holds the write lock. Throws what opening or `BEGIN` threw (`isBusy` when another
    /// connection kept the lock past the busy timeout).
    package init(store: StateStore, replace: Bool, now: Date = Date()) throws {
        writer = RegionImportWriter()
        try writer.start(path: store.queue.path, replace: replace, now: now)
    }

    deinit {
        // A forgotten import must not keep the write lock.
        writer.request(.rollback)
    }

    /// Regions stored so far (in the open transaction).
    package var count: Int { writer.count }

    /// Queues `regions` for insertion. Throws the error an earlier insertion failed with (the import is
    /// then rolled back, and every later call throws it too).
    package func add(_ regions: [Region]) throws { try writer.add(regions) }

    /// Inserts what is queued, checks the import as a whole and commits it. Throws as
    /// `RegionRepository.addAll` does (nothing is then stored).
    package func commit() throws { try writer.end(.commit) }

    /// Commits, recording `answer` under `request` in the same transaction (a retry with the same id is
    /// then answered from the record).
    package func commit(request: RequestRecord, answer: String) throws {
        try writer.end(.commit, record: (request, answer))
    }

    /// Drops everything of the import and releases the write lock; returns once it is released. Harmless
    /// once ended.
    package func rollback() { try? writer.end(.rollback) }
}

/// The thread behind a `RegionImport`, which owns the connection.
private final class RegionImportWriter: @unchecked Sendable {
    // @unchecked: every field below is touched only with `condition` locked; the connection lives on the
    // writer thread only.
    private let condition = NSCondition()
    private var queued: [[Region]] = []
    private var ending: Ending?
    private var failure: (any Error)?
    private var ready = false
    private var finished = false
    private var stored = 0
    /// Recorded with the commit.
    private var record: (RequestRecord, String)?

    enum Ending {
        case commit
        case rollback
    }

    static let ended = DatabaseError(code: .misuse, message: "the import was already committed or rolled back")

    func start(path: String, replace: Bool, now: Date) throws {
        let thread = Thread { [self] in run(path: path, replace: replace, now: now) }
        thread.name = "geofence.import"
        thread.start()
        try condition.withLock {
            while !ready && !finished { condition.wait() }
            if let failure { throw failure }
        }
    }

    var count: Int { condition.withLock { stored } }

    func add(_ regions: [Region]) throws {
        try condition.withLock {
            while queued.count >= 2 && !finished { condition.wait() }
            if let failure { throw failure }
            guard !finished, ending == nil else { throw Self.ended }
            queued.append(regions)
            condition.broadcast()
        }
    }

    /// Asks for the end without waiting for it.
    func request(_ how: Ending) {
        condition.withLock {
            if ending == nil { ending = how }
            condition.broadcast()
        }
    }

    func end(_ how: Ending, record: (RequestRecord, String)? = nil) throws {
        try condition.withLock {
            if ending == nil {
                ending = how
                self.record = record
            }
            condition.broadcast()
            while !finished { condition.wait() }
            if let failure { throw failure }
            if how == .commit && ending != .commit { throw Self.ended }
        }
    }

    private func run(path: String, replace: Bool, now: Date) {
        var db: DatabaseConnection?
        do {
            let connection = try DatabaseConnection(path: path)
            db = connection
            try connection.execute("PRAGMA cache_size = \(RegionInserter.cacheSize)")
            try connection.execute("BEGIN IMMEDIATE TRANSACTION")
            let inserter = try RegionInserter(db: connection, replace: replace, now: now)
            condition.withLock {
                ready = true
                condition.broadcast()
            }
            while true {
                let (next, how): ([Region]?, Ending?) = condition.withLock {
                    while queued.isEmpty && ending == nil { condition.wait() }
                    if ending == .rollback || queued.isEmpty { return (nil, ending) }
                    condition.broadcast()
                    return (queued.removeFirst(), nil)
                }
                if let next {
                    try inserter.add(next)
                    condition.withLock { stored = inserter.count }
                } else {
                    if how == .commit {
                        try inserter.finish()
                        if let (request, answer) = condition.withLock({ record }) {
                            try RequestRepository.record(request, answer: answer, now: now, db: connection)
                        }
                        try connection.execute("COMMIT TRANSACTION")
                    } else {
                        connection.rollbackIgnoringErrors()
                    }
                    break
                }
            }
        } catch {
            if let db, db.isInTransaction { db.rollbackIgnoringErrors() }
            condition.withLock { failure = error }
        }
        try? db?.close()
        condition.withLock {
            queued.removeAll()
            finished = true
            condition.broadcast()
        }
    }
}
