import Foundation
import GeofenceCore

/// A region as the daemon's monitor loads it at start: its basic fields when it has nothing more (read
/// without building a `Region`), else the whole `Region`.
package enum MonitoringDefinition: Sendable, Equatable {
    case compact(CompactRegion)
    case full(Region)
}

/// Where the regions stood at one moment, for a start: the regions up to `lastSeq` are what
/// `monitoringSnapshot(after:upTo:limit:)` loads, and whatever changed later comes through
/// `regionChanges(after: generation)`.
package struct MonitoringMark: Sendable, Equatable {
    package var generation: Int64
    package var lastSeq: Int64
    /// How many regions there were (expired ones included): room to reserve.
    package var count: Int
}

extension RegionRepository {
    /// The change generation and the last sequence number, read together.
    package func monitoringMark() throws -> MonitoringMark {
        try queue.read { db in
            MonitoringMark(
                generation: try db.scalar("SELECT coalesce(max(generation), 0) FROM region_changes", as: Int64.self)
                    ?? 0,
                lastSeq: try db.scalar("SELECT coalesce(max(seq), 0) FROM regions", as: Int64.self) ?? 0,
                count: try db.scalar("SELECT count(*) FROM regions", as: Int.self) ?? 0)
        }
    }

    /// Forgets region changes before `generation` (ones an engine has followed), at most `limit` of them: a
    /// short write however long the history. The change at `generation` stays, so that the latest
    /// generation never goes back. Returns how many went.
    @discardableResult
    package func pruneChanges(before generation: Int64, limit: Int = 50_000) throws -> Int {
        try queue.write { db in
            try db.execute(
                """
                DELETE FROM region_changes WHERE generation IN (
                    SELECT generation FROM region_changes WHERE generation < ? ORDER BY generation LIMIT ?)
                """, [generation, Int64(clamping: limit)])
            return db.changes
        }
    }

    /// How many region changes are kept.
    package func changeCount() throws -> Int {
        try queue.read { db in try db.scalar("SELECT count(*) FROM region_changes", as: Int.self) ?? 0 }
    }

    /// The regions to monitor with sequence numbers after `first` and up to `lastSeq`, at most `limit` of
    /// them, in insertion order, for a daemon's start: the same regions and definitions `all()` returns
    /// (without the expired ones), read lean. A million `Region`s would each be validated and built, a
    /// `Set` and all; most regions have no name, dwell, expiry, hooks or subject filter, and for those the
    /// row's fields are enough. Fewer than `limit` means there are no more.
    package func monitoringSnapshot(
        after first: Int64 = 0, upTo lastSeq: Int64, limit: Int = .max
    ) throws -> [(seq: Int64, definition: MonitoringDefinition)] {
        try queue.read { db in
            var regions: [(seq: Int64, definition: MonitoringDefinition)] = []
            if limit < 1 << 20 { regions.reserveCapacity(limit) }
            // Eight notify sets at most: parsed once each and shared.
            var notifySets: [String: Set<NotifyKind>] = [:]
            var columns: SnapshotColumns?
            try db.forEachRow(
                """
                SELECT \(Self.regionColumns),
                       name IS NULL AND dwell IS NULL AND expires IS NULL AND hooks IS NULL AND subjects IS NULL
                       AND polygon IS NULL AS compact
                FROM regions WHERE seq > ? AND seq <= ? AND status != 'expired' ORDER BY seq LIMIT ?
                """, [first, lastSeq, Int64(clamping: limit)]
            ) { s in
                let c = try columns ?? SnapshotColumns(s)
                columns = c
                let seq = s.int64(at: c.seq)
                if s.bool(at: c.compact) {
                    let notifyText = s.string(at: c.notify)
                    let notify =
                        notifySets[notifyText]
                        ?? {
                            let set = Set(
                                notifyText.split(separator: ",").compactMap { NotifyKind(rawValue: String($0)) })
                            notifySets[notifyText] = set
                            return set
                        }()
                    let id = s.string(at: c.id)
                    let radius = s.double(at: c.radius)
                    // `decodeRegion` applies the stored limits: a row beyond them goes that way, to fail as it would.
                    if radius <= Self.storedLimits.maxRadius
                        && id.utf8.count <= Self.storedLimits.maxIDBytes,
                        let region = CompactRegion(
                            id: id, center: Coordinate(latitude: s.double(at: c.lat), longitude: s.double(at: c.lon)),
                            radius: radius, notify: notify,
                            createdBy: s.optionalInt64(at: c.createdBy).map { UInt32(truncatingIfNeeded: $0) },
                            createdAt: Date(timeIntervalSince1970: s.double(at: c.createdAt)))
                    {
                        regions.append((seq, .compact(region)))
                        return
                    }
                }
                regions.append((seq, .full(try Self.decodeRegion(s).region)))
            }
            return regions
        }
    }

    /// The columns of the snapshot's compact rows, found by name once a query (at its first row): the
    /// daemon's start reads a million rows, where even one comparison a column shows.
    private struct SnapshotColumns {
        let seq: Int
        let compact: Int
        let notify: Int
        let id: Int
        let radius: Int
        let lat: Int
        let lon: Int
        let createdBy: Int
        let createdAt: Int

        init(_ s: Statement) throws {
            seq = try s.columnIndex("seq")
            compact = try s.columnIndex("compact")
            notify = try s.columnIndex("notify")
            id = try s.columnIndex("id")
            radius = try s.columnIndex("radius")
            lat = try s.columnIndex("lat")
            lon = try s.columnIndex("lon")
            createdBy = try s.columnIndex("created_by")
            createdAt = try s.columnIndex("created_at")
        }
    }

    /// Records that an engine has taken every region up to `seq` into its monitor: those stop being
    /// `pending: waiting-for-engine`. One row, however many regions that is (the mark only rises).
    package func markTaken(upTo seq: Int64, now: Date = Date()) throws {
        try queue.write { db in try Self.markTaken(upTo: seq, now: now, db: db) }
    }

    /// The engine's mark (0 when no engine ever took a region).
    package func takenSeq() throws -> Int64 {
        try queue.read { db in try db.scalar("SELECT \(Self.takenSeqSQL)", as: Int64.self) ?? 0 }
    }

    static func markTaken(upTo seq: Int64, now: Date, db: DatabaseConnection) throws {
        try db.execute(
            """
            INSERT INTO settings (key, value, updated_at) VALUES (?1, ?2, ?3)
            ON CONFLICT (key) DO UPDATE SET value = ?2, updated_at = ?3 WHERE CAST(value AS INTEGER) < ?2
            """, [Self.takenSeqKey, seq, now.timeIntervalSince1970])
    }

    package static let ownersSQL = """
        WITH RECURSIVE owners(uid) AS (
            SELECT (SELECT min(created_by) FROM regions WHERE created_by IS NOT NULL)
            UNION ALL
            SELECT (SELECT min(created_by) FROM regions WHERE created_by > owners.uid)
            FROM owners WHERE owners.uid IS NOT NULL
        )
        SELECT uid FROM owners WHERE uid IS NOT NULL
        """

    /// The users who own regions (their creators). One index probe per owner (a skip scan of
    /// `regions_by_owner`), not a scan of every region: the reconciler asks at every change.
    package func owners() throws -> [UInt32] {
        try queue.read { db in
            var owners: [UInt32] = []
            try db.forEachRow(Self.ownersSQL) {
                owners.append(UInt32(truncatingIfNeeded: try $0.int64("uid")))
            }
            return owners
        }
    }

    /// The seqs of the regions that must be in the monitor: not expired, not pending, not refused for
    /// their owner's permission; of those up to `taken` (what the monitor has followed so far: later ones
    /// come through its own following of changes).
    package func activeSeqs(upTo taken: Int64 = .max) throws -> Set<Int64> {
        try queue.read { db in
            var seqs = Set<Int64>()
            try db.forEachRow(
                """
                SELECT seq FROM regions WHERE status NOT IN ('expired', 'pending')
                  AND NOT (status = 'failed' AND status_reason = 'permission-denied') AND seq <= ?
                """, [taken]
            ) { seqs.insert(try $0.int64("seq")) }
            return seqs
        }
    }
}
