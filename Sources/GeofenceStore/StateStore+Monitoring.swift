import Foundation
import GeofenceCore

/// A region as the daemon's monitor loads it at start: its basic fields when it has nothing more (read
/// without building a `Region`), else the whole `Region`.
public enum MonitoringDefinition: Sendable, Equatable {
    case compact(CompactRegion)
    case full(Region)
}

/// Where the regions stood at one moment, for a start: the regions up to `lastSeq` are what
/// `monitoringSnapshot(after:upTo:limit:)` loads, and whatever changed later comes through
/// `regionChanges(after: generation)`.
public struct MonitoringMark: Sendable, Equatable {
    public var generation: Int64
    public var lastSeq: Int64
    /// How many regions there were (expired ones included): room to reserve.
    public var count: Int
}

extension StateStore {
    /// The change generation and the last sequence number, read together.
    public func monitoringMark() throws -> MonitoringMark {
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
    public func pruneRegionChanges(before generation: Int64, limit: Int = 50_000) throws -> Int {
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
    public func regionChangeCount() throws -> Int {
        try queue.read { db in try db.scalar("SELECT count(*) FROM region_changes", as: Int.self) ?? 0 }
    }

    /// The regions to monitor with sequence numbers after `first` and up to `lastSeq`, at most `limit` of
    /// them, in insertion order, for a daemon's start: the same regions and definitions `regions()` returns
    /// (without the expired ones), read lean. A million `Region`s would each be validated and built, a
    /// `Set` and all; most regions have no name, dwell, expiry, hooks or subject filter, and for those the
    /// row's fields are enough. Fewer than `limit` means there are no more.
    public func monitoringSnapshot(
        after first: Int64 = 0, upTo lastSeq: Int64, limit: Int = .max
    ) throws -> [(seq: Int64, definition: MonitoringDefinition)] {
        try queue.read { db in
            var regions: [(seq: Int64, definition: MonitoringDefinition)] = []
            if limit < 1 << 20 { regions.reserveCapacity(limit) }
            // Eight notify sets at most: parsed once each and shared.
            var notifySets: [String: Set<NotifyKind>] = [:]
            try db.forEachRow(
                """
                SELECT \(StateStore.regionColumns),
                       name IS NULL AND dwell IS NULL AND expires IS NULL AND hooks IS NULL AND subjects IS NULL
                       AND polygon IS NULL AS compact
                FROM regions WHERE seq > ? AND seq <= ? AND status != 'expired' ORDER BY seq LIMIT ?
                """, [first, lastSeq, Int64(clamping: limit)]
            ) { s in
                let seq = try s.int64("seq")
                if try s.bool("compact") {
                    let notifyText = try s.string("notify")
                    let notify =
                        notifySets[notifyText]
                        ?? {
                            let set = Set(
                                notifyText.split(separator: ",").compactMap { NotifyKind(rawValue: String($0)) })
                            notifySets[notifyText] = set
                            return set
                        }()
                    let id = try s.string("id")
                    let radius = try s.double("radius")
                    // `decodeRegion` applies the stored limits: a row beyond them goes that way, to fail as it would.
                    if radius <= StateStore.storedLimits.maxRadius
                        && id.utf8.count <= StateStore.storedLimits.maxIDBytes,
                        let region = CompactRegion(
                            id: id, center: Coordinate(latitude: try s.double("lat"), longitude: try s.double("lon")),
                            radius: radius, notify: notify,
                            createdBy: try s.optionalInt64("created_by").map { UInt32(truncatingIfNeeded: $0) },
                            createdAt: try s.date("created_at"))
                    {
                        regions.append((seq, .compact(region)))
                        return
                    }
                }
                regions.append((seq, .full(try StateStore.decodeRegion(s).region)))
            }
            return regions
        }
    }

    /// Records that an engine has taken every region up to `seq` into its monitor: those stop being
    /// `pending: waiting-for-engine`. One row, however many regions that is (the mark only rises).
    public func markTaken(upTo seq: Int64, now: Date = Date()) throws {
        try queue.write { db in try StateStore.markTaken(upTo: seq, now: now, db: db) }
    }

    /// The engine's mark (0 when no engine ever took a region).
    public func takenSeq() throws -> Int64 {
        try queue.read { db in try db.scalar("SELECT \(StateStore.takenSeqSQL)", as: Int64.self) ?? 0 }
    }

    static func markTaken(upTo seq: Int64, now: Date, db: DatabaseConnection) throws {
        try db.execute(
            """
            INSERT INTO settings (key, value, updated_at) VALUES (?1, ?2, ?3)
            ON CONFLICT (key) DO UPDATE SET value = ?2, updated_at = ?3 WHERE CAST(value AS INTEGER) < ?2
            """, [StateStore.takenSeqKey, seq, now.timeIntervalSince1970])
    }
}
