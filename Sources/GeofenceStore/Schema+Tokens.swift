extension Schema {
    /// Bearer tokens of the HTTP API (`geofence token add`): a name, a scope, and the SHA-256 of the token,
    /// never the token itself (it is shown once, when it is made).
    static func registerTokens(_ m: inout DatabaseMigrator) {
        m.registerMigration("033-http-tokens") { db in
            try db.execute(
                """
                CREATE TABLE http_tokens (
                    id          TEXT PRIMARY KEY,
                    scope       TEXT NOT NULL,
                    hash        TEXT NOT NULL UNIQUE,
                    created_at  REAL NOT NULL
                ) WITHOUT ROWID
                """)
        }
    }
}
