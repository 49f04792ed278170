import Synchronization

/// One database connection shared across threads and tasks: every access runs on the connection in turn.
///
/// `Sendable` without `@unchecked`: the connection lives in a `Mutex`, and the closures are `@Sendable` and return
/// `Sendable` values, so region-based isolation checking proves that a closure cannot smuggle the connection (or a
/// statement made from it) out of the lock. The price: a closure cannot capture mutable or non-`Sendable` state;
/// return what you need instead.
///
/// Calls block the calling thread while another holds the lock (and then up to the busy timeout on another process's
/// lock); SQLite calls are short, so this is cheaper than an actor hop for every query.
package final class DatabaseQueue: Sendable {
    package let path: String
    private let connection: Mutex<DatabaseConnection>

    /// Opens the database at `path`; see `DatabaseConnection.init(path:options:)`.
    package init(path: String, options: DatabaseConnection.Options = .init()) throws {
        let connection = try DatabaseConnection(path: path, options: options)
        self.path = path
        self.connection = Mutex(connection)
    }

    /// Takes over a connection already opened (and, say, migrated).
    package init(connection: sending DatabaseConnection) {
        path = connection.path
        self.connection = Mutex(connection)
    }

    /// Runs `body` in a deferred transaction with writes refused (`isReadOnly`), on one consistent snapshot.
    package func read<Result: Sendable>(_ body: @Sendable (DatabaseConnection) throws -> Result) throws -> Result {
        try connection.withLock { db in try db.read(body) }
    }

    /// Runs `body` in an immediate transaction that commits unless `body` throws.
    package func write<Result: Sendable>(_ body: @Sendable (DatabaseConnection) throws -> Result) throws -> Result {
        try connection.withLock { db in try db.write(.immediate, body) }
    }

    /// Runs `body` in a transaction that it ends with `.commit` or `.rollback`.
    package func inTransaction(
        _ kind: TransactionKind = .immediate, _ body: @Sendable (DatabaseConnection) throws -> TransactionCompletion
    ) throws {
        try connection.withLock { db in try db.inTransaction(kind, body) }
    }

    /// Runs `body` with the connection and no transaction: for migrations, `VACUUM`, checks.
    ///
    /// A transaction that `body` leaves open is rolled back (and reported as `SQLITE_MISUSE` if `body` returned),
    /// so that it cannot swallow every later write of the process as a savepoint that is never committed.
    package func writeWithoutTransaction<Result: Sendable>(
        _ body: @Sendable (DatabaseConnection) throws -> Result
    ) throws -> Result {
        try connection.withLock { db in
            let result: Result
            do {
                result = try body(db)
            } catch {
                if db.isInTransaction { db.rollbackIgnoringErrors() }
                throw error
            }
            guard !db.isInTransaction else {
                db.rollbackIgnoringErrors()
                throw DatabaseError(
                    code: .misuse, message: "a transaction was left open by writeWithoutTransaction and rolled back",
                    path: path)
            }
            return result
        }
    }

    /// Closes the connection; later calls throw (`SQLITE_MISUSE`).
    package func close() throws {
        try connection.withLock { db in try db.close() }
    }
}
