extension Schema {
    /// Hooks and their deliveries.
    ///
    /// Deliveries are derived from the outbox, never written by the code that writes events: the hook runner
    /// reads the events after `hook_dispatch.cursor`, creates one delivery per (event, matching hook) and
    /// advances the cursor, all in one transaction. So an event committed just before a crash still gets its
    /// deliveries after the restart, and `UNIQUE (event_seq, hook)` makes a second dispatch of the same event
    /// (two runners, a cursor rolled back by hand) harmless.
    static func registerHooks(_ m: inout DatabaseMigrator) {
        m.registerMigration("100-hooks-deliveries") { db in
            // Global hooks (`geofence hook add`). Per-region hooks live in `regions.hooks`.
            try db.execute(
                """
                CREATE TABLE hooks (
                    id         TEXT PRIMARY KEY,
                    events     TEXT NOT NULL,
                    command    TEXT NOT NULL,
                    created_by INTEGER,
                    created_at REAL NOT NULL
                ) WITHOUT ROWID
                """)
            // One row per (event, hook). `hook` names the hook: `region` for the region's own hook for the
            // event's type, `hook:<id>` for a global one; `command` is a copy taken at dispatch, so a delivery
            // runs what was configured when its event happened, even after the region or hook is gone.
            try db.execute(
                """
                CREATE TABLE deliveries (
                    id               INTEGER PRIMARY KEY AUTOINCREMENT,
                    event_seq        INTEGER NOT NULL REFERENCES events(seq) ON DELETE CASCADE,
                    hook             TEXT NOT NULL,
                    command          TEXT NOT NULL,
                    region_name      TEXT,
                    run_as           INTEGER,
                    order_key        TEXT NOT NULL,
                    status           TEXT NOT NULL CHECK (status IN ('pending', 'running', 'done', 'dead')),
                    attempts         INTEGER NOT NULL DEFAULT 0,
                    next_attempt_at  REAL NOT NULL,
                    created_at       REAL NOT NULL,
                    queued_at        REAL NOT NULL,
                    started_at       REAL,
                    finished_at      REAL,
                    last_exit        INTEGER,
                    last_signal      INTEGER,
                    timed_out        INTEGER NOT NULL DEFAULT 0,
                    last_error       TEXT,
                    last_duration    REAL,
                    stdout           BLOB,
                    stderr           BLOB,
                    stdout_bytes     INTEGER NOT NULL DEFAULT 0,
                    stderr_bytes     INTEGER NOT NULL DEFAULT 0,
                    history          TEXT,
                    change_seq       INTEGER NOT NULL DEFAULT 0,
                    UNIQUE (event_seq, hook)
                )
                """)
            // The runner's two hot lookups: the next waiting delivery of an order key, and all heads at start.
            try db.execute(
                """
                CREATE INDEX deliveries_open_by_key ON deliveries(order_key, id)
                WHERE status IN ('pending', 'running')
                """)
            try db.execute("CREATE INDEX deliveries_by_status ON deliveries(status, id)")
            try db.execute("CREATE INDEX deliveries_by_change ON deliveries(change_seq)")
            // `cursor`: the highest event seq whose deliveries exist. `generation`: bumped by every change made
            // outside the runner (retry by hand, hook removed), so a running runner reloads its queue heads.
            try db.execute(
                """
                CREATE TABLE hook_dispatch (
                    id         INTEGER PRIMARY KEY CHECK (id = 1),
                    cursor     INTEGER NOT NULL,
                    generation INTEGER NOT NULL
                )
                """)
            // Events older than hook delivery itself are history, not a backlog: start after them.
            try db.execute(
                "INSERT INTO hook_dispatch (id, cursor, generation) SELECT 1, coalesce(max(seq), 0), 0 FROM events")
        }
    }
}
