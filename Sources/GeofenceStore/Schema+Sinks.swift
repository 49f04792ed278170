extension Schema {
    /// Event sinks (`geofence sink add`) and their cursors.
    ///
    /// A sink reads the outbox itself, in seq order, and keeps one durable cursor: the highest event seq
    /// it has delivered and had acknowledged (or skipped, by its filter). Nothing per event is written, so a
    /// sink costs one row update per acknowledged batch, however many events the batch holds.
    static func registerSinks(_ m: inout DatabaseMigrator) {
        m.registerMigration("030-sinks") { db in
            // `url` never holds a password: a sink names where its password is (`password_file`,
            // `password_env`), and the engine reads it when it connects.
            try db.execute(
                """
                CREATE TABLE sinks (
                    id            TEXT PRIMARY KEY,
                    kind          TEXT NOT NULL,
                    url           TEXT NOT NULL,
                    topic         TEXT NOT NULL,
                    state_topic   TEXT,
                    status_topic  TEXT,
                    format        TEXT NOT NULL,
                    events        TEXT NOT NULL,
                    password_file TEXT,
                    password_env  TEXT,
                    ca_file       TEXT,
                    created_by    INTEGER,
                    created_at    REAL NOT NULL
                ) WITHOUT ROWID
                """)
            try db.execute(
                """
                CREATE TABLE sink_cursors (
                    sink       TEXT PRIMARY KEY REFERENCES sinks(id) ON DELETE CASCADE,
                    seq        INTEGER NOT NULL,
                    updated_at REAL NOT NULL
                ) WITHOUT ROWID
                """)
        }
        // A client certificate and its key, for a broker that asks for one (`sink add --cert --key`).
        m.registerMigration("031-sink-client-certificates") { db in
            try db.execute("ALTER TABLE sinks ADD COLUMN cert_file TEXT")
            try db.execute("ALTER TABLE sinks ADD COLUMN key_file TEXT")
        }
        // The webhook sink (`sink add --http`): where its signing secret is (never the secret), its extra
        // request headers (a JSON array of `Name: value`), its request timeout in seconds, and the events it
        // sends per request (NULL: one, as the event's JSON; more: a JSON array).
        m.registerMigration("032-sink-http") { db in
            try db.execute("ALTER TABLE sinks ADD COLUMN secret_file TEXT")
            try db.execute("ALTER TABLE sinks ADD COLUMN headers TEXT")
            try db.execute("ALTER TABLE sinks ADD COLUMN timeout REAL")
            try db.execute("ALTER TABLE sinks ADD COLUMN batch INTEGER")
        }
        // Home Assistant discovery (`sink add --format homeassistant`): the discovery prefix of the sink (NULL for
        // the other formats), and the vehicles whose retained discovery config it has published and not yet
        // cleared, so that one pruned while the engine was stopped is cleared at the next start.
        m.registerMigration("035-sink-homeassistant") { db in
            try db.execute("ALTER TABLE sinks ADD COLUMN discovery_prefix TEXT")
            try db.execute(
                """
                CREATE TABLE sink_trackers (
                    sink    TEXT NOT NULL REFERENCES sinks(id) ON DELETE CASCADE,
                    subject TEXT NOT NULL,
                    PRIMARY KEY (sink, subject)
                ) WITHOUT ROWID
                """)
        }
    }
}
