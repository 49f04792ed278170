import Foundation
import GeofenceCore

/// A subject's persisted monitor state.
package struct StoredSubject: Sendable, Equatable {
    package var subject: String
    package var record: SubjectRecord
    package var pairs: [(regionSeq: Int64, record: PairRecord)]
    package var updatedAt: Date

    package static func == (a: StoredSubject, b: StoredSubject) -> Bool {
        a.subject == b.subject && a.record == b.record && a.updatedAt == b.updatedAt
            && a.pairs.elementsEqual(b.pairs) { $0.regionSeq == $1.regionSeq && $0.record == $1.record }
    }

    /// The vehicle's state as the monitor takes it back (`RegionMonitor.restore`): the motion check's track
    /// starts again from the last fix, which is all the store keeps of it.
    package func vehicleState(motion: MotionConsistency) -> VehicleState {
        VehicleState(subject: subject, record: record, pairs: pairs, motion: motion)
    }
}

/// One vehicle (subject) as `geofence vehicles` shows it: its last fix and the regions it is inside.
package struct VehicleSummary: Sendable, Equatable {
    package var subject: String
    package var lastFixTime: Date?
    package var lastFix: EventFix?
    /// Ids of the regions it is inside, in id order.
    package var inside: [String]
}

/// Where monitoring stands: each subject's state (`subjects`), its state in each region (`region_states`),
/// and the regions' monitoring status (the `status` columns of `regions`), with the reconciler that sets it.
package struct MonitorStateRepository: Sendable {
    let queue: DatabaseQueue

    /// Every subject's persisted state; with `heardSince`, only the subjects whose last fix is that recent
    /// (what an engine keeps in memory: the others come back with their next fix, `subject(named:)`).
    package func subjects(heardSince cutoff: Date? = nil) throws -> [StoredSubject] {
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
    package func latestSubject() throws -> StoredSubject? {
        try queue.read { db in
            var found: StoredSubject?
            try db.forEachRow(Self.subjectColumns + " WHERE last_fix IS NOT NULL ORDER BY updated_at DESC LIMIT 1") {
                found = try Self.storedSubject($0)
            }
            return found
        }
    }

    /// One subject's persisted state, or nil for a subject the store has never seen.
    package func subject(named name: String) throws -> StoredSubject? {
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
    /// (see `RegionRepository.markTaken(upTo:)`).
    package func apply(_ outputs: [MonitorOutput], taken: Int64? = nil, now: Date = Date()) throws {
        guard taken != nil || outputs.contains(where: { !$0.isEmpty }) else { return }
        try queue.write { db in
            // Most outputs write their subject's row (one a fix): its statement is looked up once a commit.
            var subjectWrite: Statement?
            for out in outputs { try Self.apply(out, now: now, db: db, subjectWrite: &subjectWrite) }
            if let taken { try RegionRepository.markTaken(upTo: taken, now: now, db: db) }
        }
    }

    /// The statement that writes a subject's row (`subjectUpdate`).
    private static let subjectWriteSQL = """
        INSERT OR REPLACE INTO subjects (subject, last_fix_time, baseline_seq, last_fix, updated_at)
        VALUES (?, ?, ?, ?, ?)
        """

    /// `subjectWrite`: the prepared `subjectWriteSQL`, taken from the connection's cache on first use.
    static func apply(
        _ out: MonitorOutput, now: Date, db: DatabaseConnection, subjectWrite: inout Statement?
    ) throws {
        let t = now.timeIntervalSince1970
        try OutboxRepository.insert(out.events, into: db, now: now)
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
            let statement = try subjectWrite ?? db.cachedStatement(subjectWriteSQL)
            subjectWrite = statement
            try statement.execute(
                StatementArguments(values: [
                    .text(update.subject), update.record.lastFixTime.map { .real($0.timeIntervalSince1970) } ?? .null,
                    .integer(update.record.baselineSeq),
                    update.record.lastFix.map { .text($0.serializedJSON) } ?? .null, .real(t),
                ]))
        }
        for change in out.statusChanges {
            try setStatus(seq: change.regionSeq, change.status, attempts: nil, nextRetry: nil, now: now, db: db)
        }
    }

    /// Every subject's state in one region: recorded pairs, and `outside` for subjects whose baseline covers
    /// the region without a record. Subjects that never evaluated the region are absent (unknown).
    package func states(regionSeq: Int64) throws -> [(subject: String, record: PairRecord)] {
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

    package func setStatus(
        seq: Int64, _ status: RegionStatus, attempts: Int? = nil, nextRetry: Date? = nil, now: Date = Date()
    ) throws {
        try queue.write { db in
            try Self.setStatus(seq: seq, status, attempts: attempts, nextRetry: nextRetry, now: now, db: db)
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

    /// Every vehicle the store knows, by name, with its last fix and the regions it is inside.
    package func vehicles() throws -> [VehicleSummary] {
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
    package func pruneVehicles(lastFixBefore cutoff: Date) throws -> [String] {
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
