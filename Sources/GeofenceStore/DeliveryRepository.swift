import CSQLite
import Foundation
import GeofenceCore

#if canImport(Glibc)
    import Glibc
#endif

/// Global hooks (`hooks`, in DeliveryRepository+Hooks.swift), and the deliveries of events to hooks
/// (`deliveries`) with the dispatch cursor (`hook_dispatch`) that makes them exactly once an event and hook.
package struct DeliveryRepository: Sendable {
    let queue: DatabaseQueue

    /// Attempts kept in a delivery's history: enough to see the backoff, bounded however long it retries.
    package static let historyLimit = 20

    /// The order key in column `order_key` of a row of `deliveries` (written by binding the key itself).
    static func orderKey(_ s: Statement) throws -> DeliveryOrderKey {
        let text = try s.string("order_key")
        guard let key = DeliveryOrderKey(storeValue: text) else { throw DeliveryOrderKey.Unreadable(text: text) }
        return key
    }

    // MARK: Dispatch

    /// Creates the deliveries of `events` (committed events, in seq order) and moves the dispatch cursor to
    /// the last of them, in one transaction: each event gets one delivery per matching hook, and
    /// `UNIQUE (event_seq, hook)` makes a second dispatch of the same event (a crash between the two, two
    /// runners) create nothing. Returns the deliveries created, in id order.
    ///
    /// The hooks' sink (`HookDispatchSink`) calls it with what it reads after the cursor. The region's own
    /// hook for the event's type comes from the region as it is now; a region removed since the event leaves
    /// only the global hooks.
    ///
    /// With `runAsCreators` (a daemon running as root), each delivery runs as the user who registered its
    /// hook: the region's creator for a region hook, the hook's creator for a global one (root's run as the
    /// daemon itself).
    package func dispatchDeliveries(of events: [StoredEvent], now: Date = Date(), runAsCreators: Bool = false)
        throws -> [DeliveryHead]
    {
        guard let last = events.last else { return [] }
        return try queue.write { db in
            let routing = HookRouting(globals: try DeliveryRepository.hooks(db: db), runAsCreators: runAsCreators)
            let t = now.timeIntervalSince1970
            var created: [DeliveryHead] = []
            // Each region of the batch read (and its hooks decoded) once, for all its events.
            var regions: [String: HookRouting.RegionHooks?] = [:]
            for event in events {
                var regionHooks: HookRouting.RegionHooks?
                if let region = event.region {
                    if let known = regions[region] {
                        regionHooks = known
                    } else {
                        try db.forEachRow("SELECT name, hooks, created_by FROM regions WHERE id = ?", [region]) { s in
                            regionHooks = HookRouting.RegionHooks(
                                name: try s.optionalString("name"), hooks: try s.optionalString("hooks"),
                                createdBy: try s.optionalInt64("created_by").map { UInt32(truncatingIfNeeded: $0) })
                        }
                        regions[region] = .some(regionHooks)
                    }
                }
                for route in routing.routes(eventType: event.type, region: event.region, regionHooks: regionHooks) {
                    try db.execute(
                        """
                        INSERT OR IGNORE INTO deliveries (event_seq, hook, command, region_name, run_as, order_key,
                                                          status, next_attempt_at, created_at, queued_at, change_seq)
                        VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, \(DeliveryRepository.nextChangeSeq))
                        """,
                        [
                            event.seq, route.hook, route.command, route.regionName, route.runAs.map { Int64($0) },
                            route.orderKey, t, t, t,
                        ])
                    if db.changes > 0 {
                        created.append(
                            DeliveryHead(id: db.lastInsertRowID, orderKey: route.orderKey, nextAttemptAt: now))
                    }
                }
            }
            try db.execute("UPDATE hook_dispatch SET cursor = ? WHERE id = 1 AND cursor < ?", [last.seq, last.seq])
            return created
        }
    }

    /// Moves the dispatch cursor forward over events that need no delivery (never back).
    ///
    /// The hooks' sink runner calls it after every batch, which `dispatchDeliveries` has already moved the
    /// cursor over: then it only reads. A write transaction would wait for the store's write lock, which the
    /// engine holds through each commit's fsync, while holding this connection, on which the hook runner
    /// claims the batch's deliveries: on the path from an event's commit to its hook's start.
    package func advanceHookDispatchCursor(to seq: Int64) throws {
        let cursor = try queue.read { db in
            try db.scalar("SELECT cursor FROM hook_dispatch WHERE id = 1", as: Int64.self) ?? 0
        }
        guard cursor < seq else { return }
        try queue.write { db in
            try db.execute("UPDATE hook_dispatch SET cursor = ? WHERE id = 1 AND cursor < ?", [seq, seq])
        }
    }

    /// The dispatch cursor, the latest event seq, and the generation of changes made outside the runner.
    package func hookDispatchState() throws -> (cursor: Int64, latestEvent: Int64, generation: Int64) {
        try queue.read { db in
            var state: (cursor: Int64, latestEvent: Int64, generation: Int64) = (0, 0, 0)
            try db.forEachRow(
                """
                SELECT cursor, generation, (SELECT coalesce(max(seq), 0) FROM events) AS latest_event
                FROM hook_dispatch WHERE id = 1
                """
            ) { state = (try $0.int64("cursor"), try $0.int64("latest_event"), try $0.int64("generation")) }
            return state
        }
    }

    // MARK: The runner's queue

    /// Deliveries left `running` by a runner that died: they go back to `pending`, due now. Their hook may
    /// have run, so the event may reach the receiver twice (at-least-once).
    @discardableResult
    package func recoverInterrupted(now: Date = Date()) throws -> Int {
        try queue.write { db in
            try db.execute(
                """
                UPDATE deliveries SET status = 'pending', next_attempt_at = ?,
                                      last_error = 'interrupted: geofence stopped while the hook ran',
                                      change_seq = \(DeliveryRepository.nextChangeSeq)
                WHERE status = 'running'
                """, [now.timeIntervalSince1970])
            return db.changes
        }
    }

    /// The head of every order key that has a pending or running delivery.
    package func heads() throws -> [DeliveryHead] {
        try queue.read { db in
            var heads: [DeliveryHead] = []
            try db.forEachRow(
                """
                SELECT d.id, d.order_key, d.next_attempt_at, d.status FROM deliveries d
                WHERE d.id IN (SELECT min(id) FROM deliveries WHERE status IN ('pending', 'running') GROUP BY order_key)
                """
            ) {
                heads.append(
                    DeliveryHead(
                        id: try $0.int64("id"), orderKey: try DeliveryRepository.orderKey($0),
                        nextAttemptAt: try $0.date("next_attempt_at"), running: try $0.string("status") == "running"))
            }
            return heads
        }
    }

    /// The head of one order key, if it has a pending or running delivery.
    package func head(orderKey: DeliveryOrderKey) throws -> DeliveryHead? {
        try queue.read { db in try Self.head(orderKey: orderKey, db: db) }
    }

    static func head(orderKey: DeliveryOrderKey, db: DatabaseConnection) throws -> DeliveryHead? {
        var head: DeliveryHead?
        try db.forEachRow(
            """
            SELECT id, next_attempt_at, status FROM deliveries
            WHERE order_key = ? AND status IN ('pending', 'running') ORDER BY id LIMIT 1
            """, [orderKey]
        ) {
            head = DeliveryHead(
                id: try $0.int64("id"), orderKey: orderKey, nextAttemptAt: try $0.date("next_attempt_at"),
                running: try $0.string("status") == "running")
        }
        return head
    }

    /// Marks these deliveries `running` (counting an attempt) and returns what their hooks need. A delivery
    /// that is no longer pending (retried, or stopped, by the CLI meanwhile) is skipped.
    package func claim(ids: [Int64], now: Date = Date()) throws -> [ClaimedDelivery] {
        guard !ids.isEmpty else { return [] }
        return try queue.write { db in
            var claimed: [ClaimedDelivery] = []
            for id in ids {
                try db.execute(
                    """
                    UPDATE deliveries SET status = 'running', attempts = attempts + 1, started_at = ?,
                                          change_seq = \(DeliveryRepository.nextChangeSeq)
                    WHERE id = ? AND status = 'pending'
                    """, [now.timeIntervalSince1970, id])
                guard db.changes > 0 else { continue }
                try db.forEachRow(
                    """
                    SELECT d.id, d.event_seq, e.id AS event_id, e.type, e.region, d.region_name, e.subject, e.body,
                           d.hook, d.command, d.run_as, d.order_key, d.attempts, d.queued_at
                    FROM deliveries d JOIN events e ON e.seq = d.event_seq WHERE d.id = ?
                    """, [id]
                ) { s in
                    let body = try s.string("body")
                    claimed.append(
                        ClaimedDelivery(
                            id: try s.int64("id"), eventSeq: try s.int64("event_seq"),
                            eventID: try s.string("event_id"), eventType: try s.string("type"),
                            region: try s.optionalString("region"), regionName: try s.optionalString("region_name"),
                            subject: try s.optionalString("subject"), body: body, fields: EventFields(body: body),
                            hook: try s.string("hook"), command: try s.string("command"),
                            runAs: try s.optionalInt64("run_as").map { UInt32(truncatingIfNeeded: $0) },
                            orderKey: try DeliveryRepository.orderKey(s), attempt: try s.int("attempts"),
                            queuedAt: try s.date("queued_at")))
                }
            }
            return claimed
        }
    }

    /// Records how attempts ended, in one transaction. Only running deliveries are updated.
    ///
    /// Returns, for each order key whose delivery finished (done or dead), its next head, if it has one: the
    /// delivery that may start now, read in the same transaction.
    @discardableResult
    package func recordOutcomes(_ outcomes: [DeliveryOutcome]) throws -> [DeliveryOrderKey: DeliveryHead] {
        guard !outcomes.isEmpty else { return [:] }
        return try queue.write { db in
            var finishedKeys: [DeliveryOrderKey] = []
            for o in outcomes {
                let a = o.attempt
                let attempt = JSONValue.object(a.json).serialized()
                // The history is appended to, and trimmed, by SQLite's JSON functions: no read and re-encode here.
                try db.execute(
                    """
                    UPDATE deliveries SET status = ?, next_attempt_at = coalesce(?, next_attempt_at), started_at = ?,
                        finished_at = ?,
                        last_exit = ?, last_signal = ?, timed_out = ?, last_error = ?, last_duration = ?,
                        stdout = ?, stderr = ?, stdout_bytes = ?, stderr_bytes = ?,
                        history = CASE WHEN json_array_length(coalesce(history, '[]')) >= ?
                            THEN json_remove(json_insert(history, '$[#]', json(?)), '$[0]')
                            ELSE json_insert(coalesce(history, '[]'), '$[#]', json(?)) END,
                        change_seq = \(DeliveryRepository.nextChangeSeq)
                    WHERE id = ? AND status = 'running'
                    """,
                    [
                        o.status.rawValue, o.nextAttemptAt?.timeIntervalSince1970, a.startedAt.timeIntervalSince1970,
                        o.finishedAt.timeIntervalSince1970,
                        a.exitCode.map { Int64($0) }, a.signal.map { Int64($0) }, a.timedOut, a.error, a.duration,
                        o.stdout, o.stderr, o.stdoutBytes, o.stderrBytes, DeliveryRepository.historyLimit, attempt,
                        attempt,
                        o.id,
                    ])
                if o.status == .done || o.status == .dead {
                    try db.forEachRow("SELECT order_key FROM deliveries WHERE id = ?", [o.id]) {
                        finishedKeys.append(try DeliveryRepository.orderKey($0))
                    }
                }
            }
            var heads: [DeliveryOrderKey: DeliveryHead] = [:]
            for key in finishedKeys where heads[key] == nil {
                if let head = try Self.head(orderKey: key, db: db) { heads[key] = head }
            }
            return heads
        }
    }

    // MARK: Reading, for people

    static let deliveryColumns = """
        id, event_seq, hook, command, region_name, run_as, order_key, status, attempts, next_attempt_at, created_at,
        queued_at, started_at, finished_at, last_exit, last_signal, timed_out, last_error, last_duration, stdout,
        stderr, stdout_bytes, stderr_bytes, history, change_seq
        """

    static func decodeDelivery(_ s: Statement) throws -> StoredDelivery {
        var history: [DeliveryAttempt] = []
        if let text = try s.optionalString("history"), case .array(let items)? = try? JSON.parse(text) {
            history = items.compactMap { $0.objectValue.flatMap(DeliveryAttempt.init(json:)) }
        }
        return StoredDelivery(
            id: try s.int64("id"), eventSeq: try s.int64("event_seq"), hook: try s.string("hook"),
            command: try s.string("command"), regionName: try s.optionalString("region_name"),
            runAs: try s.optionalInt64("run_as").map { UInt32(truncatingIfNeeded: $0) },
            orderKey: try orderKey(s), status: DeliveryStatus(rawValue: try s.string("status")) ?? .dead,
            attempts: try s.int("attempts"), nextAttemptAt: try s.date("next_attempt_at"),
            createdAt: try s.date("created_at"), queuedAt: try s.date("queued_at"),
            startedAt: try s.optionalDate("started_at"), finishedAt: try s.optionalDate("finished_at"),
            lastExit: try s.optionalInt64("last_exit").map { Int32(truncatingIfNeeded: $0) },
            lastSignal: try s.optionalInt64("last_signal").map { Int32(truncatingIfNeeded: $0) },
            timedOut: try s.bool("timed_out"), lastError: try s.optionalString("last_error"),
            lastDuration: try s.optionalDouble("last_duration"), stdout: try s.bytes("stdout"),
            stderr: try s.bytes("stderr"), stdoutBytes: try s.int("stdout_bytes"),
            stderrBytes: try s.int("stderr_bytes"), history: history, changeSeq: try s.int64("change_seq"))
    }

    /// The latest `limit` events that have deliveries matching `filter` (with `.all`: the latest events,
    /// dispatched or not), oldest first, each with its matching deliveries. With `.pending`, events not yet
    /// dispatched count too while any hook exists: their deliveries are still to be made, so they are owed.
    /// Only events that `query` matches are counted and returned.
    package func eventDeliveries(
        filter: DeliveryFilter = .all, matching query: EventQuery = EventQuery(), limit: Int = 50
    ) throws -> [EventDeliveries] {
        try queue.read { db in
            let cursor = try db.scalar("SELECT cursor FROM hook_dispatch WHERE id = 1", as: Int64.self) ?? 0
            var seqs: [Int64] = []
            var sql: String
            switch filter {
            case .all:
                sql = "SELECT seq FROM events ORDER BY seq DESC LIMIT ?"
            case .pending:
                sql = """
                    SELECT event_seq AS seq FROM deliveries WHERE \(filter.condition)
                    UNION
                    SELECT seq FROM events
                    WHERE seq > \(cursor)
                      AND (EXISTS (SELECT 1 FROM hooks) OR EXISTS (SELECT 1 FROM regions WHERE hooks IS NOT NULL))
                    ORDER BY 1 DESC LIMIT ?
                    """
            case .failed, .dead:
                sql =
                    "SELECT DISTINCT event_seq AS seq FROM deliveries WHERE \(filter.condition) ORDER BY seq DESC LIMIT ?"
            }
            var arguments: [(any DatabaseValueConvertible)?] = []
            if !query.isEmpty {
                // The events the query picks, then the filter's choice among them.
                let condition = query.condition
                let chosen =
                    filter == .all
                    ? "" : "seq IN (\(sql.replacingOccurrences(of: " LIMIT ?", with: ""))) AND "
                sql = "SELECT seq FROM events WHERE \(chosen)\(condition.sql) ORDER BY seq DESC LIMIT ?"
                arguments = condition.arguments
            }
            try db.forEachRow(sql, StatementArguments(arguments + [max(0, limit)])) { seqs.append(try $0.int64("seq")) }
            var result: [EventDeliveries] = []
            for seq in seqs.reversed() {
                var event: StoredEvent?
                try db.forEachRow("SELECT \(OutboxRepository.eventColumns) FROM events WHERE seq = ?", [seq]) {
                    event = try OutboxRepository.decodeEvent($0)
                }
                guard let event else { continue }
                var deliveries: [StoredDelivery] = []
                try db.forEachRow(
                    "SELECT \(DeliveryRepository.deliveryColumns) FROM deliveries WHERE event_seq = ? AND \(filter.condition) ORDER BY id",
                    [seq]
                ) { deliveries.append(try DeliveryRepository.decodeDelivery($0)) }
                result.append(EventDeliveries(event: event, dispatched: seq <= cursor, deliveries: deliveries))
            }
            return result
        }
    }

    /// One delivery by id.
    package func find(id: Int64) throws -> StoredDelivery? {
        try queue.read { db in
            var found: StoredDelivery?
            try db.forEachRow("SELECT \(DeliveryRepository.deliveryColumns) FROM deliveries WHERE id = ?", [id]) {
                found = try DeliveryRepository.decodeDelivery($0)
            }
            return found
        }
    }

    /// Deliveries changed after `changeSeq` (at most `limit`), in change order: what `events --follow` prints.
    package func changes(after changeSeq: Int64, limit: Int = 1000) throws -> [StoredDelivery] {
        try queue.read { db in
            var changed: [StoredDelivery] = []
            try db.forEachRow(
                "SELECT \(DeliveryRepository.deliveryColumns) FROM deliveries WHERE change_seq > ? ORDER BY change_seq, id LIMIT ?",
                [changeSeq, limit]
            ) { changed.append(try DeliveryRepository.decodeDelivery($0)) }
            return changed
        }
    }

    /// The latest delivery change number (0 before any).
    package func latestChange() throws -> Int64 {
        try queue.read { db in
            try db.scalar("SELECT coalesce(max(change_seq), 0) FROM deliveries", as: Int64.self) ?? 0
        }
    }

    /// Counts of deliveries by status.
    package func countsByStatus() throws -> [DeliveryStatus: Int] {
        try queue.read { db in
            var counts: [DeliveryStatus: Int] = [:]
            try db.forEachRow("SELECT status, count(*) AS count FROM deliveries GROUP BY status") {
                if let status = DeliveryStatus(rawValue: try $0.string("status")) {
                    counts[status] = try $0.int("count")
                }
            }
            return counts
        }
    }

    // MARK: Changes by hand

    /// Retries by hand: `reference` is a delivery id (a number) or an event id. Dead and waiting deliveries
    /// become due now with a fresh budget of attempts and age; running and done ones are left alone.
    /// Returns the ids of the deliveries retried.
    package func retry(_ reference: String, now: Date = Date()) throws -> [Int64] {
        try queue.write { db in
            var matched: [(id: Int64, status: DeliveryStatus)] = []
            // A sink's dead letters (`sink:<id>`) are not a hook's to run: never revived here.
            let sql = "SELECT id, status FROM deliveries WHERE hook NOT LIKE 'sink:%' AND "
            if let id = Int64(reference) {
                try db.forEachRow(sql + "id = ?", [id]) {
                    matched.append((try $0.int64("id"), DeliveryStatus(rawValue: try $0.string("status")) ?? .dead))
                }
            }
            if matched.isEmpty {
                try db.forEachRow(sql + "event_seq = (SELECT seq FROM events WHERE id = ?) ORDER BY id", [reference]) {
                    matched.append((try $0.int64("id"), DeliveryStatus(rawValue: try $0.string("status")) ?? .dead))
                }
            }
            if matched.isEmpty {
                let letters =
                    try db.scalar(
                        """
                        SELECT count(*) FROM deliveries WHERE hook LIKE 'sink:%'
                          AND (id = ? OR event_seq = (SELECT seq FROM events WHERE id = ?))
                        """, [Int64(reference) ?? -1, reference], as: Int.self) ?? 0
                if letters > 0 {
                    throw HookStoreError.nothingToRetry(
                        "a sink's dead letter is not retried (the sink has moved on); send the event again "
                            + "from `geofence events --dead --json`")
                }
                throw HookStoreError.deliveryNotFound(reference)
            }
            let retryable = matched.filter { $0.status == .dead || $0.status == .pending }.map(\.id)
            guard !retryable.isEmpty else {
                let states = Set(matched.map(\.status.rawValue)).sorted().joined(separator: " or ")
                throw HookStoreError.nothingToRetry(
                    matched.count == 1 ? "delivery \(matched[0].id) is \(states)" : "its deliveries are \(states)")
            }
            for id in retryable { try DeliveryRepository.revive(id: id, now: now, db: db) }
            try DeliveryRepository.bumpHookGeneration(db: db)
            return retryable
        }
    }

    /// Retries every dead delivery by hand. Returns how many.
    package func retryDead(now: Date = Date()) throws -> Int {
        try queue.write { db in
            var ids: [Int64] = []
            try db.forEachRow("SELECT id FROM deliveries WHERE status = 'dead' AND hook NOT LIKE 'sink:%' ORDER BY id")
            {
                ids.append(try $0.int64("id"))
            }
            for id in ids { try DeliveryRepository.revive(id: id, now: now, db: db) }
            if !ids.isEmpty { try DeliveryRepository.bumpHookGeneration(db: db) }
            return ids.count
        }
    }

    private static func revive(id: Int64, now: Date, db: DatabaseConnection) throws {
        try db.execute(
            """
            UPDATE deliveries SET status = 'pending', attempts = 0, next_attempt_at = ?, queued_at = ?,
                                  change_seq = \(DeliveryRepository.nextChangeSeq)
            WHERE id = ? AND status IN ('pending', 'dead')
            """, [now.timeIntervalSince1970, now.timeIntervalSince1970, id])
    }
}
