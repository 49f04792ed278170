/// The schema, as a list of migrations. Every change is a new migration; applied ones are never edited.
/// Each area registers its own migrations from its own file, in this order.
enum Schema {
    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        registerCore(&m)
        registerHooks(&m)
        registerControl(&m)
        registerRequests(&m)
        registerSinks(&m)
        registerTokens(&m)
        return m
    }

    static func registerCore(_ m: inout DatabaseMigrator) {
        m.registerMigration("001-regions-state-outbox") { db in
            try db.execute(
                """
                CREATE TABLE regions (
                    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
                    id            TEXT NOT NULL UNIQUE,
                    name          TEXT,
                    lat           REAL NOT NULL,
                    lon           REAL NOT NULL,
                    radius        REAL NOT NULL,
                    notify        TEXT NOT NULL,
                    dwell         REAL,
                    expires       REAL,
                    hooks         TEXT,
                    subjects      TEXT,
                    created_by    INTEGER,
                    created_at    REAL NOT NULL,
                    updated_at    REAL NOT NULL,
                    status        TEXT NOT NULL DEFAULT 'monitoring',
                    status_reason TEXT,
                    attempts      INTEGER NOT NULL DEFAULT 0,
                    next_retry    REAL
                )
                """)
            // Every insertion and deletion of a region, in order, so a running daemon can follow the CLI's
            // changes without reloading a million regions.
            try db.execute(
                """
                CREATE TABLE region_changes (
                    generation INTEGER PRIMARY KEY AUTOINCREMENT,
                    seq        INTEGER NOT NULL,
                    op         TEXT NOT NULL CHECK (op IN ('insert', 'delete'))
                )
                """)
            try db.execute(
                """
                CREATE TRIGGER regions_inserted AFTER INSERT ON regions BEGIN
                    INSERT INTO region_changes (seq, op) VALUES (NEW.seq, 'insert');
                END
                """)
            try db.execute(
                """
                CREATE TRIGGER regions_deleted AFTER DELETE ON regions BEGIN
                    INSERT INTO region_changes (seq, op) VALUES (OLD.seq, 'delete');
                END
                """)
            try db.execute(
                """
                CREATE TABLE subjects (
                    subject       TEXT PRIMARY KEY,
                    last_fix_time REAL,
                    baseline_seq  INTEGER NOT NULL DEFAULT 0,
                    last_fix      TEXT,
                    updated_at    REAL NOT NULL
                ) WITHOUT ROWID
                """)
            try db.execute(
                """
                CREATE TABLE region_states (
                    subject     TEXT NOT NULL,
                    region_seq  INTEGER NOT NULL REFERENCES regions(seq) ON DELETE CASCADE,
                    state       TEXT NOT NULL CHECK (state IN ('unknown', 'inside', 'outside')),
                    since       REAL,
                    dwell_fired INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (subject, region_seq)
                ) WITHOUT ROWID
                """)
            try db.execute("CREATE INDEX region_states_by_region ON region_states(region_seq)")
            // The transactional outbox: written in the same transaction as the state change that caused it.
            try db.execute(
                """
                CREATE TABLE events (
                    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
                    id         TEXT NOT NULL UNIQUE,
                    type       TEXT NOT NULL,
                    region     TEXT,
                    subject    TEXT,
                    time       REAL NOT NULL,
                    created_at REAL NOT NULL,
                    body       TEXT NOT NULL
                )
                """)
            try db.execute("CREATE INDEX events_by_region ON events(region, seq)")
            try db.execute(
                """
                CREATE TABLE settings (
                    key        TEXT PRIMARY KEY,
                    value      TEXT NOT NULL,
                    updated_at REAL NOT NULL
                ) WITHOUT ROWID
                """)
        }
        // "Waiting for the engine" stops being a stored status: a region is waiting while its seq is above the
        // engine's mark (`RegionRepository.takenSeqKey`), so that an engine's start writes one row, not a million.
        m.registerMigration("002-engine-taken-seq") { db in
            try db.execute(
                """
                INSERT OR REPLACE INTO settings (key, value, updated_at)
                SELECT 'engine.taken-seq',
                       coalesce((SELECT min(seq) - 1 FROM regions
                                 WHERE status = 'pending' AND status_reason = 'waiting-for-engine'),
                                (SELECT max(seq) FROM regions), 0),
                       (julianday('now') - 2440587.5) * 86400.0
                """)
            try db.execute(
                """
                UPDATE regions SET status = 'monitoring', status_reason = NULL
                WHERE status = 'pending' AND status_reason = 'waiting-for-engine'
                """)
        }
        // An import logs its insertions as one range (`seq`...`last_seq`) instead of a row per region: the
        // per-row trigger cost more than a third of a million-region import (it ran even when a WHEN clause
        // made it do nothing). Insertions are logged by the store's own code; deletions keep their trigger.
        m.registerMigration("003-region-change-ranges") { db in
            try db.execute("ALTER TABLE region_changes ADD COLUMN last_seq INTEGER")
            try db.execute("DROP TRIGGER regions_inserted")
        }
        // The reconciler asks for the regions' owners at every change: one index probe per owner (a skip
        // scan), not a scan of a million regions. (Partial indexes for the held and the failed regions were
        // tried too: empty, they still cost 3 s of a million-region import, so the engine keeps track of
        // those itself; see MonitorService.)
        m.registerMigration("004-regions-by-owner") { db in
            try db.execute("CREATE INDEX regions_by_owner ON regions(created_by)")
        }
        // Polygon regions (issue 17): their positions (`RegionPolygon.encoded`); NULL for a circle, so every
        // older row is the circle it was. lat, lon and radius hold a polygon's bounding cap.
        m.registerMigration("005-region-polygons") { db in
            try db.execute("ALTER TABLE regions ADD COLUMN polygon BLOB")
        }
    }
}
