/// The schema's history: named migrations, applied once each, in registration order, and recorded in the
/// `schema_migrations` table of the database they changed.
///
/// Every schema change is a new migration; an applied migration is never edited. A database holding migrations
/// this binary does not know was written by a newer version and is refused, since this version cannot know what
/// the newer schema means.
///
/// ```swift
/// var migrator = DatabaseMigrator()
/// migrator.registerMigration("v1-regions") { db in
///     try db.execute("CREATE TABLE region(id TEXT PRIMARY KEY NOT NULL, radius REAL NOT NULL)")
/// }
/// try migrator.migrate(db)
/// ```
package struct DatabaseMigrator: Sendable {
    /// Changes the schema; runs inside its own immediate transaction.
    package typealias Migration = @Sendable (DatabaseConnection) throws -> Void

    private var migrations: [(identifier: String, migrate: Migration)] = []

    package init() {}

    /// Adds a migration after those already registered. Identifiers must be unique.
    ///
    /// The closure is `@Sendable` so that a migrator can be handed to a `DatabaseQueue`'s `write` closures.
    package mutating func registerMigration(_ identifier: String, _ migrate: @escaping Migration) {
        precondition(
            !migrations.contains { $0.identifier == identifier }, "migration '\(identifier)' is registered twice")
        migrations.append((identifier, migrate))
    }

    /// The registered identifiers, in order.
    package var identifiers: [String] { migrations.map(\.identifier) }

    /// The identifiers recorded in `db`, in the order they were applied (empty for a new database).
    package func appliedIdentifiers(_ db: DatabaseConnection) throws -> [String] {
        let hasTable = try db.scalar(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'", as: Int.self)
        guard hasTable != nil else { return [] }
        return try db.query("SELECT identifier FROM schema_migrations ORDER BY applied_at, rowid").map {
            try $0.decode("identifier", as: String.self)
        }
    }

    /// True when every registered migration has been applied to `db`.
    package func hasCompletedMigrations(_ db: DatabaseConnection) throws -> Bool {
        Set(try appliedIdentifiers(db)).isSuperset(of: identifiers)
    }

    /// Applies the registered migrations that `db` lacks, each in its own immediate transaction.
    ///
    /// Writes nothing when the database is up to date. Throws `MigrationError.unknownMigrations` before changing
    /// anything when the database holds migrations this binary does not know. A migration that throws is rolled
    /// back, is not recorded, and its error is rethrown; the migrations before it stay applied.
    package func migrate(_ db: DatabaseConnection) throws {
        let applied = Set(try appliedIdentifiers(db))
        let unknown = applied.subtracting(identifiers)
        guard unknown.isEmpty else {
            throw MigrationError.unknownMigrations(unknown.sorted(), path: db.path)
        }
        let pending = migrations.filter { !applied.contains($0.identifier) }
        guard !pending.isEmpty else { return }
        try db.inTransaction(.immediate) { db in
            try db.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations(identifier TEXT PRIMARY KEY NOT NULL, applied_at REAL NOT NULL)"
            )
            return .commit
        }
        for migration in pending {
            try db.inTransaction(.immediate) { db in
                // Checked again under the write lock: the CLI and the daemon may both be migrating the same file.
                let done = try db.scalar(
                    "SELECT 1 FROM schema_migrations WHERE identifier = ?", [migration.identifier], as: Int.self)
                guard done == nil else { return .commit }
                try migration.migrate(db)
                try db.execute(
                    "INSERT INTO schema_migrations(identifier, applied_at) VALUES (?, (julianday('now') - 2440587.5) * 86400.0)",
                    [migration.identifier])
                return .commit
            }
        }
    }
}

/// Why `DatabaseMigrator.migrate` refused a database.
package enum MigrationError: Error, CustomStringConvertible, Sendable {
    /// The database was migrated by a newer version of this program: it holds these unknown migrations.
    case unknownMigrations([String], path: String)

    package var description: String {
        switch self {
        case .unknownMigrations(let identifiers, let path):
            "\(path): the database was written by a newer version of geofence (unknown migrations: "
                + identifiers.joined(separator: ", ") + "); upgrade geofence to use it"
        }
    }
}
