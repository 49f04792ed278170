extension Schema {
    /// Client permissions (the switch lives in `settings`).
    static func registerControl(_ m: inout DatabaseMigrator) {
        m.registerMigration("010-permissions") { db in
            try db.execute(
                """
                CREATE TABLE permissions (
                    uid          INTEGER PRIMARY KEY,
                    status       TEXT NOT NULL CHECK (status IN ('notDetermined', 'authorized', 'denied')),
                    reason       TEXT,
                    requested_at REAL,
                    updated_at   REAL NOT NULL,
                    updated_by   INTEGER
                )
                """)
        }
    }
}
