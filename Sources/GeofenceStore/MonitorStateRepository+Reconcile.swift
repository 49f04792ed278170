import Foundation
import GeofenceCore

extension MonitorStateRepository {
    /// Sets every requested region's status from the inputs, in one statement, and returns the regions
    /// whose status changed: what `ReconcilePolicy.changes` says, in SQL (a test holds the two to each other).
    /// Precedence: services off (`suspended: services-off`), then the owner's
    /// permission (`failed: permission-denied`), then the active-region limit (`pending: limit`), then the
    /// location source (`failed: location-unavailable`), else `monitoring` (an `accuracyLimited` region
    /// stays so). Expired regions are left alone; no region is ever deleted.
    ///
    /// `events` turns the changes into the `region-status` events that report them; they are written in the
    /// same transaction, so a status never changes without its event, whatever stops the engine.
    package func reconcile(
        _ inputs: ReconcileInputs, retryAt: Date, now: Date = Date(),
        events: @Sendable ([RegionStatusChange]) -> [StateEvent] = { _ in [] }
    ) throws -> [RegionStatusChange] {
        let denied = JSONValue.array(inputs.deniedOwners.sorted().map { .number(Double($0)) }).serialized()
        let allClear = inputs.allClear
        return try queue.write { db in
            var changes: [RegionStatusChange] = []
            func collect(_ s: Statement) throws {
                let kind = RegionStatus.Kind(rawValue: try s.string("status")) ?? .failed
                changes.append(
                    RegionStatusChange(
                        seq: try s.int64("seq"), id: try s.string("id"),
                        status: RegionStatus(kind, reason: try s.optionalString("status_reason"))))
            }
            if allClear {
                // Nothing holds any region back: only those that were held change (through `regions_held`, a
                // look at the held regions only, which the general statement below is not).
                try db.forEachRow(Self.releaseHeldSQL, [now.timeIntervalSince1970], collect)
                try OutboxRepository.insert(events(changes), into: db, now: now)
                return changes
            }
            try db.forEachRow(
                """
                WITH eligible AS (
                    SELECT seq, row_number() OVER (ORDER BY seq) AS rank FROM regions
                    WHERE status != 'expired'
                      AND (created_by IS NULL OR created_by NOT IN (SELECT value FROM json_each(?1)))
                ),
                desired AS (
                    SELECT r.seq AS seq,
                      CASE WHEN ?2 = 0 THEN 'suspended'
                           WHEN e.seq IS NULL THEN 'failed'
                           WHEN ?3 > 0 AND e.rank > ?3 THEN 'pending'
                           WHEN ?4 = 0 THEN 'failed'
                           WHEN r.status = 'accuracyLimited' THEN 'accuracyLimited'
                           ELSE 'monitoring' END AS status,
                      CASE WHEN ?2 = 0 THEN 'services-off'
                           WHEN e.seq IS NULL THEN 'permission-denied'
                           WHEN ?3 > 0 AND e.rank > ?3 THEN 'limit'
                           WHEN ?4 = 0 THEN 'location-unavailable'
                           ELSE NULL END AS reason
                    FROM regions r LEFT JOIN eligible e ON e.seq = r.seq
                    WHERE r.status != 'expired'
                )
                UPDATE regions SET status = desired.status, status_reason = desired.reason, updated_at = ?5,
                    attempts = CASE WHEN desired.status = 'failed' THEN regions.attempts ELSE 0 END,
                    next_retry = CASE WHEN desired.status = 'failed' THEN ?6 ELSE NULL END
                FROM desired
                WHERE desired.seq = regions.seq
                  AND (regions.status IS NOT desired.status OR regions.status_reason IS NOT desired.reason)
                RETURNING regions.seq, regions.id, regions.status, regions.status_reason
                """,
                [
                    denied, inputs.servicesOn, Int64(inputs.maxRegions ?? 0), inputs.locationAvailable,
                    now.timeIntervalSince1970, retryAt.timeIntervalSince1970,
                ], collect)
            try OutboxRepository.insert(events(changes), into: db, now: now)
            return changes
        }
    }

    // Statements the engine runs often. Only the owners' (`RegionRepository.ownersSQL`) has an index
    // (`regions_by_owner`; a test checks the plan): these two scan the regions, so the engine runs them only
    // when they can find something (MonitorService keeps track of whether a region may be held, and when a
    // retry is due).

    static let releaseHeldSQL = """
        UPDATE regions SET status = 'monitoring', status_reason = NULL, attempts = 0, next_retry = NULL, updated_at = ?
        WHERE status IN ('pending', 'failed', 'suspended')
        RETURNING seq, id, status, status_reason
        """

    static let countRetriesSQL = """
        UPDATE regions SET attempts = attempts + 1, next_retry = ?, updated_at = ?
        WHERE status = 'failed' AND next_retry IS NOT NULL AND next_retry <= ?
        """

    /// The failed regions whose retry is due: counts the attempt and sets the next one. Returns how many,
    /// and when the next retry of any failed region is due (nil: none is failed).
    package func countRetries(dueBy now: Date, next: Date) throws -> (counted: Int, nextDue: Date?) {
        try queue.write { db in
            try db.execute(
                Self.countRetriesSQL,
                [next.timeIntervalSince1970, now.timeIntervalSince1970, now.timeIntervalSince1970])
            let counted = db.changes
            let nextDue = try db.scalar(
                "SELECT min(next_retry) FROM regions WHERE status = 'failed' AND next_retry IS NOT NULL",
                as: Double.self)
            return (counted, nextDue.map { Date(timeIntervalSince1970: $0) })
        }
    }

    /// Every subject's state in one region, for bringing it back into the monitor.
    package func pairs(regionSeq: Int64) throws -> [(subject: String, record: PairRecord)] {
        try queue.read { db in
            var pairs: [(subject: String, record: PairRecord)] = []
            try db.forEachRow(
                "SELECT subject, state, since, dwell_fired FROM region_states WHERE region_seq = ?", [regionSeq]
            ) { s in
                guard let state = RegionState(rawValue: try s.string("state")) else { return }
                pairs.append(
                    (
                        try s.string("subject"),
                        PairRecord(
                            state: state, since: try s.optionalDate("since"), dwellFired: try s.bool("dwell_fired"))
                    ))
            }
            return pairs
        }
    }
}
