import Foundation
import GeofenceStore
import GeofenceTestSupport
import Glibc
import Synchronization
import Testing

// Every test opens a real SQLite file in a fresh temporary directory; nothing is mocked.

private func withTemporaryDirectory(_ body: (String) throws -> Void) throws {
    try GeofenceTestSupport.withTemporaryDirectory("geofence-sqlite-tests") { directory in try body(directory.path) }
}

private func withDatabase(_ body: (DatabaseConnection, String) throws -> Void) throws {
    try withTemporaryDirectory { directory in
        let path = directory + "/geofence.sqlite"
        try body(try DatabaseConnection(path: path), path)
    }
}

private func count(_ db: DatabaseConnection, _ table: String) throws -> Int {
    try db.scalar("SELECT count(*) FROM \(table)", as: Int.self) ?? -1
}

private func permissions(of path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
}

/// Polls `condition` (set by another thread) until it holds or `timeout` passes.
private func wait(timeout: Duration = .seconds(10), until condition: () -> Bool) -> Bool {
    let (seconds, attoseconds) = timeout.components
    return Wait.blocking(timeout: Double(seconds) + Double(attoseconds) / 1e18, condition)
}

private struct Boom: Error, Equatable {}

/// Counts calls from `@Sendable` closures.
private final class Counter: Sendable {
    private let value = Mutex(0)
    func increment() { value.withLock { $0 += 1 } }
    var current: Int { value.withLock { $0 } }
}

/// What a writer on another thread has got to.
private final class Progress: Sendable {
    struct State {
        var started = false
        var finished = false
        var error: String?
    }
    private let mutex = Mutex(State())
    func update(_ change: (inout State) -> Void) { mutex.withLock { change(&$0) } }
    var state: State { mutex.withLock { $0 } }
}

@Suite struct SQLiteConnectionTests {
    @Test func createsTheDatabaseAndItsWALFilesWithMode0600() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/geofence.sqlite"
            let db = try DatabaseConnection(path: path)
            try db.execute("CREATE TABLE t(x)")
            try db.execute("INSERT INTO t VALUES (1)")
            for file in [path, path + "-wal", path + "-shm"] {
                #expect(try permissions(of: file) == 0o600, "\(file)")
            }
        }
    }

    @Test func configuresWALSynchronousForeignKeysAndBusyTimeout() throws {
        try withDatabase { db, path in
            #expect(try db.scalar("PRAGMA journal_mode", as: String.self) == "wal")
            #expect(try db.scalar("PRAGMA synchronous", as: Int.self) == 2)  // FULL
            #expect(try db.scalar("PRAGMA foreign_keys", as: Bool.self) == true)
            #expect(try db.scalar("PRAGMA busy_timeout", as: Int.self) == 5000)

            let options = DatabaseConnection.Options(busyTimeout: .milliseconds(250), synchronous: .normal)
            let other = try DatabaseConnection(path: path, options: options)
            #expect(try other.scalar("PRAGMA synchronous", as: Int.self) == 1)  // NORMAL
            #expect(try other.scalar("PRAGMA busy_timeout", as: Int.self) == 250)
        }
    }

    @Test func aSecondConnectionSeesOnlyCommittedWrites() throws {
        try withDatabase { db, path in
            try db.execute("CREATE TABLE t(x)")
            let other = try DatabaseConnection(path: path)
            try db.inTransaction { db in
                try db.execute("INSERT INTO t VALUES (1)")
                #expect(try count(other, "t") == 0)
                return .commit
            }
            #expect(try count(other, "t") == 1)
        }
    }

    @Test func aWriterWaitsForAnotherWriterWithinTheBusyTimeout() throws {
        try withDatabase { db, path in
            try db.execute("CREATE TABLE t(x)")
            try db.execute("BEGIN IMMEDIATE")
            try db.execute("INSERT INTO t VALUES (1)")

            let progress = Progress()
            Thread.detachNewThread {
                do {
                    let other = try DatabaseConnection(path: path, options: .init(busyTimeout: .seconds(20)))
                    progress.update { $0.started = true }
                    try other.execute("INSERT INTO t VALUES (2)")
                    progress.update { $0.finished = true }
                } catch {
                    progress.update { $0.error = "\(error)" }
                }
            }
            #expect(wait { progress.state.started || progress.state.error != nil })
            // Shows that something does not happen (the other connection never gets the lock while this
            // transaction holds it): no signal to wait for, only time.
            usleep(300_000)
            // The other connection cannot get the write lock while this transaction holds it.
            #expect(progress.state.finished == false)
            try db.execute("COMMIT")
            #expect(wait { progress.state.finished || progress.state.error != nil })
            #expect(progress.state.error == nil)
            #expect(try count(db, "t") == 2)
        }
    }

    @Test func aWriterGivesUpAfterTheBusyTimeoutWithIsBusy() throws {
        try withDatabase { db, path in
            try db.execute("CREATE TABLE t(x)")
            try db.execute("BEGIN IMMEDIATE")
            let other = try DatabaseConnection(path: path, options: .init(busyTimeout: .milliseconds(100)))
            let error = #expect(throws: DatabaseError.self) {
                try other.execute("INSERT INTO t VALUES (2)")
            }
            #expect(error?.isBusy == true)
            #expect(error?.description.contains(path) == true)
            #expect(error?.description.contains("[SQLITE_BUSY") == true)
            try db.execute("ROLLBACK")
        }
    }

    @Test func uniqueAndNotNullViolationsAreConstraintViolations() throws {
        try withDatabase { db, _ in
            try db.execute("CREATE TABLE region(id TEXT PRIMARY KEY NOT NULL, name TEXT UNIQUE, radius REAL NOT NULL)")
            try db.execute("INSERT INTO region VALUES ('a', 'North', 1)")

            let duplicate = #expect(throws: DatabaseError.self) {
                try db.execute("INSERT INTO region VALUES ('b', 'North', 2)")
            }
            #expect(duplicate?.isConstraintViolation == true)
            #expect(duplicate?.isUniqueConstraintViolation == true)
            #expect(duplicate?.code == .constraintUnique)
            #expect(duplicate?.description.contains("UNIQUE constraint failed: region.name") == true)
            #expect(duplicate?.description.contains("[SQLITE_CONSTRAINT_UNIQUE]") == true)

            let samePrimaryKey = #expect(throws: DatabaseError.self) {
                try db.execute("INSERT INTO region VALUES ('a', 'South', 2)")
            }
            #expect(samePrimaryKey?.isUniqueConstraintViolation == true)

            let missing = #expect(throws: DatabaseError.self) {
                try db.execute("INSERT INTO region VALUES (?, ?, ?)", ["c", "East", nil])
            }
            #expect(missing?.isConstraintViolation == true)
            #expect(missing?.isUniqueConstraintViolation == false)
            #expect(missing?.code.name == "SQLITE_CONSTRAINT_NOTNULL")
        }
    }

    @Test func integrityAndQuickChecksPassOnAFreshDatabase() throws {
        try withDatabase { db, _ in
            #expect(try db.integrityCheck() == [])
            try db.execute("CREATE TABLE t(x INTEGER PRIMARY KEY, y TEXT UNIQUE)")
            for index in 0..<100 {
                try db.execute("INSERT INTO t(y) VALUES (?)", ["row \(index)"])
            }
            #expect(try db.integrityCheck() == [])
            #expect(try db.quickCheck() == [])
        }
    }

    @Test func aReadOnlyConnectionRefusesWritesWithIsReadOnly() throws {
        try withDatabase { db, path in
            try db.execute("CREATE TABLE t(x)")
            try db.execute("INSERT INTO t VALUES (1)")
            let reader = try DatabaseConnection(path: path, options: .init(readOnly: true))
            #expect(reader.isReadOnly)
            #expect(try count(reader, "t") == 1)
            let error = #expect(throws: DatabaseError.self) {
                try reader.execute("INSERT INTO t VALUES (2)")
            }
            #expect(error?.isReadOnly == true)
            #expect(error?.description.contains(path) == true)
        }
    }

    @Test func openingAMissingFileReadOnlyFailsWithCantOpenAndCreatesNothing() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/missing.sqlite"
            let error = #expect(throws: DatabaseError.self) {
                _ = try DatabaseConnection(path: path, options: .init(readOnly: true))
            }
            #expect(error?.isCantOpen == true)
            #expect(error?.description.contains(path) == true)
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }

    @Test func openingInAMissingDirectoryNamesThePathAndTheCause() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/no/such/dir/geofence.sqlite"
            let error = #expect(throws: DatabaseError.self) {
                _ = try DatabaseConnection(path: path)
            }
            #expect(error?.isCantOpen == true)
            #expect(error?.systemErrno == ENOENT)
            #expect(error?.description.hasPrefix(path + ": ") == true)
            #expect(error?.description.contains("No such file or directory") == true)
            #expect(error?.description.contains("\n") == false)
        }
    }

    @Test(.enabled(if: geteuid() != 0, "root ignores file permissions"))
    func aFileThatCannotBeWrittenIsReportedWhenOpening() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/geofence.sqlite"
            try DatabaseConnection(path: path).execute("CREATE TABLE t(x)")
            chmod(path, 0o400)
            let error = #expect(throws: DatabaseError.self) {
                _ = try DatabaseConnection(path: path)
            }
            #expect(error?.isReadOnly == true)
            #expect(error?.description.contains(path) == true)
        }
    }

    @Test func aFileThatIsNotADatabaseIsCorrupt() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/geofence.sqlite"
            try Data(repeating: UInt8(ascii: "x"), count: 4096).write(to: URL(fileURLWithPath: path))
            let error = #expect(throws: DatabaseError.self) {
                _ = try DatabaseConnection(path: path)
            }
            #expect(error?.isCorrupt == true)
            #expect(error?.description.contains(path) == true)
        }
    }

    @Test func aFullDatabaseFailsWithIsFullAndRollsBack() throws {
        try withDatabase { db, _ in
            try db.execute("CREATE TABLE t(x BLOB)")
            // A page limit stands in for a full disk: SQLite reports both as SQLITE_FULL.
            let pages = try db.scalar("PRAGMA page_count", as: Int.self) ?? 0
            try db.execute("PRAGMA max_page_count = \(pages + 2)")
            let error = #expect(throws: DatabaseError.self) {
                try db.write { db in
                    try db.execute("INSERT INTO t VALUES (zeroblob(16384))")
                    try db.execute("INSERT INTO t VALUES (zeroblob(1000000))")
                }
            }
            #expect(error?.isFull == true)
            #expect(error?.description.contains("[SQLITE_FULL]") == true)
            #expect(!db.isInTransaction)
            #expect(try count(db, "t") == 0)
        }
    }

    @Test func closingTwiceIsHarmlessAndLaterUseThrows() throws {
        try withDatabase { db, _ in
            try db.execute("CREATE TABLE t(x)")
            var statement: Statement? = try db.makeStatement("SELECT x FROM t")
            let busy = #expect(throws: DatabaseError.self) { try db.close() }
            #expect(busy?.isBusy == true)
            #expect(!db.isClosed)
            statement = nil
            _ = statement
            try db.close()
            try db.close()
            #expect(db.isClosed)
            let error = #expect(throws: DatabaseError.self) { try db.execute("SELECT 1") }
            #expect(error?.code == .misuse)
        }
    }
}

@Suite struct SQLiteTransactionTests {
    @Test func aThrowRollsBackAndIsRethrown() throws {
        try withDatabase { db, _ in
            try db.execute("CREATE TABLE t(x)")
            #expect(throws: Boom.self) {
                try db.inTransaction { db in
                    try db.execute("INSERT INTO t VALUES (1)")
                    throw Boom()
                }
            }
            #expect(!db.isInTransaction)
            #expect(try count(db, "t") == 0)
        }
    }

    @Test func theFirstErrorWinsOverAFailingRollback() throws {
        try withDatabase { db, _ in
            try db.execute("CREATE TABLE t(x)")
            #expect(throws: Boom.self) {
                try db.inTransaction { db in
                    try db.execute("INSERT INTO t VALUES (1)")
                    // Ends the transaction behind inTransaction's back, so its own ROLLBACK fails.
                    try db.execute("ROLLBACK")
                    throw Boom()
                }
            }
            #expect(!db.isInTransaction)
            #expect(try count(db, "t") == 0)
        }
    }

    @Test func aFailingCommitRollsBackAndIsRethrown() throws {
        try withDatabase { db, _ in
            try db.execute(
                """
                CREATE TABLE parent(id INTEGER PRIMARY KEY);
                CREATE TABLE child(parent_id INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);
                """)
            let error = #expect(throws: DatabaseError.self) {
                try db.inTransaction { db in
                    try db.execute("INSERT INTO child VALUES (42)")
                    return .commit
                }
            }
            #expect(error?.isForeignKeyViolation == true)
            #expect(!db.isInTransaction)
            #expect(try count(db, "child") == 0)
        }
    }

    @Test func rollbackCompletionDiscardsTheChanges() throws {
        try withDatabase { db, _ in
            try db.execute("CREATE TABLE t(x)")
            try db.inTransaction(.deferred) { db in
                try db.execute("INSERT INTO t VALUES (1)")
                return .rollback
            }
            #expect(try count(db, "t") == 0)
        }
    }

    @Test func nestedTransactionsAreSavepoints() throws {
        try withDatabase { db, _ in
            try db.execute("CREATE TABLE t(x)")
            try db.inTransaction { db in
                try db.execute("INSERT INTO t VALUES (1)")
                try db.inTransaction { db in
                    try db.execute("INSERT INTO t VALUES (2)")
                    return .rollback
                }
                #expect(throws: Boom.self) {
                    try db.write { db in
                        try db.execute("INSERT INTO t VALUES (3)")
                        throw Boom()
                    }
                }
                try db.write { db in try db.execute("INSERT INTO t VALUES (4)") }
                #expect(db.isInTransaction)
                return .commit
            }
            let values = try db.query("SELECT x FROM t ORDER BY x").map { try $0.decode(at: 0, as: Int.self) }
            #expect(values == [1, 4])
        }
    }

    @Test func writeReturnsTheBodysResultAndReadRefusesWrites() throws {
        try withDatabase { db, _ in
            try db.execute("CREATE TABLE t(x)")
            let id = try db.write { db in
                try db.execute("INSERT INTO t VALUES ('a')")
                return db.lastInsertRowID
            }
            #expect(id == 1)
            #expect(db.changes == 1)
            let error = #expect(throws: DatabaseError.self) {
                try db.read { db in try db.execute("INSERT INTO t VALUES ('b')") }
            }
            #expect(error?.isReadOnly == true)
            #expect(try db.read { db in try count(db, "t") } == 1)
            try db.execute("INSERT INTO t VALUES ('c')")  // writable again after read
            #expect(try count(db, "t") == 2)
        }
    }

    /// A read leaves the connection's prepared statements as they were. With `PRAGMA query_only` set on and off
    /// around each read, SQLite expired them all, and the next run of each (the pipeline's writes, once a fix)
    /// prepared it again.
    @Test func aReadDoesNotExpireThePreparedStatements() throws {
        try withDatabase { db, _ in
            try db.execute("CREATE TABLE t(x)")
            let insert = try db.cachedStatement("INSERT INTO t VALUES (?1)")
            try insert.execute([1])
            for value in 2...4 {
                _ = try db.read { db in try count(db, "t") }
                try insert.execute([value])
            }
            #expect(insert.repreparations == 0)
            #expect(try count(db, "t") == 4)
            // Still refused inside a read, nested or not, through a cached statement too.
            let error = #expect(throws: DatabaseError.self) {
                try db.read { db in try db.read { _ in try insert.execute([5]) } }
            }
            #expect(error?.isReadOnly == true)
            #expect(try count(db, "t") == 4)
        }
    }
}

@Suite struct SQLiteMigratorTests {
    private static func migrator(_ calls: Counter, upTo last: Int = 2) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-regions") { db in
            calls.increment()
            try db.execute("CREATE TABLE region(id TEXT PRIMARY KEY NOT NULL)")
        }
        if last >= 2 {
            migrator.registerMigration("v2-events") { db in
                calls.increment()
                try db.execute(
                    """
                    CREATE TABLE event(id TEXT PRIMARY KEY NOT NULL, region TEXT NOT NULL REFERENCES region(id));
                    CREATE INDEX event_region ON event(region);
                    """)
            }
        }
        return migrator
    }

    @Test func migrationsAreAppliedOnceInOrder() throws {
        try withDatabase { db, _ in
            let calls = Counter()
            let migrator = Self.migrator(calls)
            #expect(try migrator.hasCompletedMigrations(db) == false)
            try migrator.migrate(db)
            #expect(calls.current == 2)
            #expect(try migrator.appliedIdentifiers(db) == ["v1-regions", "v2-events"])
            #expect(try migrator.hasCompletedMigrations(db))
            try db.execute("INSERT INTO region VALUES ('a')")
            try db.execute("INSERT INTO event VALUES ('e', 'a')")

            let appliedAt = try db.query("SELECT applied_at FROM schema_migrations ORDER BY identifier")
            try migrator.migrate(db)
            #expect(calls.current == 2)
            #expect(try db.query("SELECT applied_at FROM schema_migrations ORDER BY identifier") == appliedAt)
            let seconds = try appliedAt[0].decode(at: 0, as: Double.self)
            #expect(abs(seconds - Date().timeIntervalSince1970) < 3600)
        }
    }

    @Test func aNewMigrationIsAppliedToAnOlderDatabase() throws {
        try withDatabase { db, _ in
            let calls = Counter()
            try Self.migrator(calls, upTo: 1).migrate(db)
            try Self.migrator(calls).migrate(db)
            #expect(calls.current == 2)
            #expect(try count(db, "event") == 0)
        }
    }

    @Test func aDatabaseFromANewerVersionIsRefused() throws {
        try withDatabase { db, path in
            let calls = Counter()
            try Self.migrator(calls).migrate(db)
            let error = #expect(throws: MigrationError.self) {
                try Self.migrator(calls, upTo: 1).migrate(db)
            }
            guard case .unknownMigrations(let identifiers, let errorPath) = error else { return }
            #expect(identifiers == ["v2-events"])
            #expect(errorPath == path)
            #expect(error?.description.contains("newer version") == true)
        }
    }

    @Test func aFailingMigrationIsRolledBackAndNotRecorded() throws {
        try withDatabase { db, _ in
            var migrator = DatabaseMigrator()
            migrator.registerMigration("v1") { db in try db.execute("CREATE TABLE a(x)") }
            migrator.registerMigration("v2") { db in
                try db.execute("CREATE TABLE b(x)")
                throw Boom()
            }
            #expect(throws: Boom.self) { try migrator.migrate(db) }
            let applied = try migrator.appliedIdentifiers(db)
            #expect(applied == ["v1"])
            #expect(try db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'b'", as: Int.self) == 0)
        }
    }

    @Test func anUpToDateDatabaseIsMigratedWithoutWriting() throws {
        try withDatabase { db, path in
            let calls = Counter()
            try Self.migrator(calls).migrate(db)
            let reader = try DatabaseConnection(path: path, options: .init(readOnly: true))
            try Self.migrator(calls).migrate(reader)
            #expect(calls.current == 2)
        }
    }
}

@Suite struct SQLiteStatementTests {
    static let values: [DatabaseValue] = [
        .null, .integer(0), .integer(Int64.max), .integer(Int64.min), .real(3.5), .real(-0.25), .real(.infinity),
        .real(1e-300), .text(""), .text("Zürich 🚚 ∑ e\u{301}"), .text("a\u{0}b"), .blob([]), .blob([0, 1, 255]),
    ]

    @Test(arguments: values)
    func everyValueRoundTrips(value: DatabaseValue) throws {
        try withDatabase { db, _ in
            try db.execute("CREATE TABLE v(x)")  // no affinity: values are stored as given
            try db.execute("INSERT INTO v VALUES (?)", [value])
            let row = try #require(try db.queryFirst("SELECT x, typeof(x) AS type FROM v"))
            #expect(row[0] == value)
            #expect(row["type"] == .text(value.storageClass.lowercased()))
            try db.forEachRow("SELECT x FROM v") { statement in
                #expect(statement.value(at: 0) == value)
            }
        }
    }

    @Test func embeddedNULsAreStoredAndReadBackIntact() throws {
        try withDatabase { db, _ in
            try db.execute("CREATE TABLE v(x TEXT)")
            try db.execute("INSERT INTO v VALUES (?)", ["a\u{0}b"])
            #expect(try db.scalar("SELECT hex(x) FROM v", as: String.self) == "610062")
            #expect(try db.scalar("SELECT x FROM v", as: String.self) == "a\u{0}b")
        }
    }

    @Test func nanIsStoredAsNull() throws {
        try withDatabase { db, _ in
            try db.execute("CREATE TABLE v(x REAL)")
            try db.execute("INSERT INTO v VALUES (?)", [Double.nan])
            #expect(try db.queryFirst("SELECT x FROM v")?[0] == .null)
        }
    }

    @Test func swiftTypesBindAndReadWithTypedGetters() throws {
        try withDatabase { db, _ in
            try db.execute(
                "CREATE TABLE v(i INTEGER, i32 INTEGER, d REAL, s TEXT, b INTEGER, data BLOB, bytes BLOB, n)")
            let missing: String? = nil
            let present: Int? = 7
            try db.execute(
                "INSERT INTO v VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [Int64(-5), Int32(32), 2.5, "héllo", true, Data([1, 2]), [UInt8]([3]), missing])
            try db.execute("INSERT INTO v VALUES (?, NULL, NULL, NULL, NULL, NULL, NULL, ?)", [present, 1])
            var rows = 0
            try db.forEachRow("SELECT i, i32, d, s, b, data, bytes, n FROM v ORDER BY rowid") { row in
                rows += 1
                if rows == 1 {
                    #expect(row.columnNames == ["i", "i32", "d", "s", "b", "data", "bytes", "n"])
                    #expect(row.int64(at: 0) == -5)
                    #expect(row.int(at: 1) == 32)
                    #expect(row.double(at: 2) == 2.5)
                    #expect(row.string(at: 3) == "héllo")
                    #expect(row.bool(at: 4))
                    #expect(row.data(at: 5) == Data([1, 2]))
                    #expect(row.bytes(at: 6) == [3])
                    #expect(row.isNull(at: 7))
                    #expect(row.optionalString(at: 7) == nil)
                    #expect(row.optionalInt64(at: 0) == -5)
                } else {
                    #expect(row.int(at: 0) == 7)
                    #expect(row.optionalInt(at: 1) == nil)
                    #expect(row.optionalDouble(at: 2) == nil)
                    #expect(row.optionalString(at: 3) == nil)
                    #expect(row.optionalBool(at: 4) == nil)
                    #expect(row.optionalData(at: 5) == nil)
                    #expect(row.optionalBytes(at: 6) == nil)
                    #expect(row.int64(at: 7) == 1)
                }
            }
            #expect(rows == 2)

            let row = try #require(try db.queryFirst("SELECT * FROM v ORDER BY rowid"))
            #expect(try row.decode("i", as: Int64.self) == -5)
            #expect(try row.decode("I32", as: Int32.self) == 32)  // column names match case-insensitively
            #expect(try row.decode("d", as: Double.self) == 2.5)
            #expect(try row.decode("s", as: String.self) == "héllo")
            #expect(try row.decode("b", as: Bool.self) == true)
            #expect(try row.decode("data", as: Data.self) == Data([1, 2]))
            #expect(try row.decode("bytes", as: [UInt8].self) == [3])
            let nothing: String? = try row.decode("n")
            #expect(nothing == nil)
            let something: Int64? = try row.decode(at: 0)
            #expect(something == -5)
        }
    }

    @Test func typedGettersReadByColumnName() throws {
        try withDatabase { db, _ in
            try db.execute("CREATE TABLE v(seq INTEGER, id TEXT, r REAL, n)")
            try db.execute("INSERT INTO v VALUES (1, 'a', 0.5, NULL), (2, 'b', 1.5, 7)")
            var read: [String] = []
            try db.forEachRow("SELECT seq, id, r, n FROM v ORDER BY seq") { s in
                // In the SELECT's order, out of it, twice, and in another case: each finds its own column.
                let seq = try s.int64("seq")
                let n = try s.optionalInt64("n")
                let id = try s.string("id")
                #expect(try s.double("r") == Double(seq) - 0.5)
                #expect(try s.int("SEQ") == Int(seq))
                #expect(try s.string("id") == id)
                #expect(try s.isNull("n") == (n == nil))
                read.append("\(seq) \(id) \(n.map(String.init) ?? "-")")
            }
            #expect(read == ["1 a -", "2 b 7"])
            // Rows read in different orders (a branch on the row): each read still finds its own column.
            var mixed: [String] = []
            try db.forEachRow("SELECT seq, id, r, n FROM v ORDER BY seq") { s in
                if try s.int64("seq") == 1 {
                    mixed.append("\(try s.string("id")) \(try s.double("r"))")
                } else {
                    mixed.append("\(try s.double("r")) \(try s.optionalInt64("n") ?? 0) \(try s.string("id"))")
                }
            }
            #expect(mixed == ["a 0.5", "1.5 7 b"])
            let missing = #expect(throws: DatabaseError.self) {
                try db.forEachRow("SELECT seq FROM v") { _ = try $0.int64("sequence") }
            }
            #expect(missing?.code == .range)
            #expect(missing?.description.contains("'sequence'") == true)
        }
    }

    @Test func decodingIsStrict() throws {
        try withDatabase { db, _ in
            let row = try #require(try db.queryFirst("SELECT NULL AS n, 'abc' AS t, 2.0 AS r, 2.5 AS f, 3 AS i"))
            let null = #expect(throws: DatabaseError.self) { try row.decode("n", as: Int64.self) }
            #expect(null?.code == .mismatch)
            #expect(null?.description.contains("column 'n'") == true)
            #expect(throws: DatabaseError.self) { try row.decode("t", as: Int.self) }
            #expect(throws: DatabaseError.self) { try row.decode("f", as: Int.self) }
            #expect(throws: DatabaseError.self) { try row.decode("i", as: String.self) }
            #expect(try row.decode("r", as: Int.self) == 2)
            #expect(try row.decode("i", as: Double.self) == 3)
            let missing = #expect(throws: DatabaseError.self) { try row.decode("nope", as: Int.self) }
            #expect(missing?.code == .range)
            #expect(try db.scalar("SELECT NULL", as: Int.self) == nil)
            #expect(try db.scalar("SELECT 1 WHERE 0", as: Int.self) == nil)
            #expect(throws: DatabaseError.self) { try db.scalar("SELECT 'x'", as: Int.self) }
        }
    }

    @Test func namedParametersTakeAnyPrefix() throws {
        try withDatabase { db, _ in
            try db.execute("CREATE TABLE v(a, b, c)")
            try db.execute("INSERT INTO v VALUES (:a, @b, $c)", ["a": 1, "@b": "two", "c": nil])
            let row = try #require(try db.queryFirst("SELECT a, b, c FROM v WHERE a = :a", ["a": 1]))
            #expect(row.values == [.integer(1), .text("two"), .null])

            let statement = try db.makeStatement("SELECT :x + ?2")
            try statement.bind(40, named: "x")
            try statement.bind(2, at: 2)
            #expect(try statement.step())
            #expect(statement.int(at: 0) == 42)
        }
    }

    @Test func argumentsMustMatchTheParameters() throws {
        try withDatabase { db, _ in
            try db.execute("CREATE TABLE v(a, b)")
            let tooFew = #expect(throws: DatabaseError.self) { try db.execute("INSERT INTO v VALUES (?, ?)", [1]) }
            #expect(tooFew?.code == .range)
            // Checked before the statement runs, also on its first, uncached run.
            #expect(throws: DatabaseError.self) { try db.execute("INSERT INTO v(a, b) VALUES (?, ?)", [1, 2, 3]) }
            #expect(throws: DatabaseError.self) { try db.execute("INSERT INTO v VALUES (?, ?)", [1, 2, 3]) }
            #expect(throws: DatabaseError.self) { try db.execute("INSERT INTO v VALUES (:a, :b)", ["a": 1]) }
            #expect(throws: DatabaseError.self) {
                try db.execute("INSERT INTO v VALUES (:a, :b)", ["a": 1, "b": 2, "typo": 3])
            }
            #expect(try count(db, "v") == 0)
        }
    }

    @Test func scriptsRunEveryStatementAndConsumePositionalArgumentsInOrder() throws {
        try withDatabase { db, _ in
            try db.execute(
                """
                -- a comment
                CREATE TABLE v(x);
                /* another */ INSERT INTO v VALUES (?);
                INSERT INTO v VALUES (?), (?); -- trailing
                """, [1, 2, 3])
            #expect(
                try db.query("SELECT x FROM v ORDER BY x").map { $0[0] } == [.integer(1), .integer(2), .integer(3)])
            let error = #expect(throws: DatabaseError.self) { try db.query("SELECT 1; SELECT 2") }
            #expect(error?.code == .misuse)
        }
    }

    @Test func cachedStatementsAreReusedAndNestingTheSameQueryIsSafe() throws {
        try withDatabase { db, _ in
            try db.execute("CREATE TABLE v(x); INSERT INTO v VALUES (1), (2);")
            #expect(try db.cachedStatement("SELECT x FROM v") === db.cachedStatement("SELECT x FROM v"))
            var pairs: [[Int64]] = []
            try db.forEachRow("SELECT x FROM v ORDER BY x") { outer in
                let x = outer.int64(at: 0)
                try db.forEachRow("SELECT x FROM v ORDER BY x") { inner in
                    pairs.append([x, inner.int64(at: 0)])
                }
            }
            #expect(pairs == [[1, 1], [1, 2], [2, 1], [2, 2]])
        }
    }

    @Test func errorDescriptionsAreOneLine() throws {
        try withDatabase { db, path in
            let error = #expect(throws: DatabaseError.self) {
                try db.execute("SELECT *\n  FROM\n  no_such_table")
            }
            #expect(
                error?.description
                    == "\(path): no such table: no_such_table [SQLITE_ERROR] while executing: SELECT * FROM no_such_table"
            )
        }
    }
}

@Suite struct SQLiteQueueTests {
    @Test func concurrentWritersAreSerialized() async throws {
        let temporary = try TemporaryDirectory("geofence-sqlite-tests")
        defer { temporary.remove() }
        let directory = temporary.path
        let queue = try DatabaseQueue(path: directory + "/geofence.sqlite")
        try queue.writeWithoutTransaction { db in try db.execute("CREATE TABLE t(task, n)") }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<4 {
                group.addTask {
                    for n in 0..<25 {
                        try queue.write { db in try db.execute("INSERT INTO t VALUES (?, ?)", [task, n]) }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try queue.read { db in try count(db, "t") } == 100)
        let error = #expect(throws: DatabaseError.self) {
            try queue.read { db in try db.execute("DELETE FROM t") }
        }
        #expect(error?.isReadOnly == true)
        try queue.inTransaction { db in
            try db.execute("DELETE FROM t")
            return .rollback
        }
        #expect(try queue.read { db in try count(db, "t") } == 100)
    }

    @Test func aTransactionLeftOpenIsRolledBack() throws {
        try withTemporaryDirectory { directory in
            let queue = try DatabaseQueue(path: directory + "/geofence.sqlite")
            try queue.writeWithoutTransaction { db in try db.execute("CREATE TABLE t(x)") }
            let error = #expect(throws: DatabaseError.self) {
                try queue.writeWithoutTransaction { db in try db.execute("BEGIN; INSERT INTO t VALUES (1);") }
            }
            #expect(error?.code == .misuse)
            #expect(try queue.read { db in try count(db, "t") } == 0)
            try queue.write { db in try db.execute("INSERT INTO t VALUES (2)") }
            let reader = try DatabaseConnection(path: directory + "/geofence.sqlite")
            #expect(try count(reader, "t") == 1)
        }
    }

    @Test func aMigratorRunsThroughTheQueue() throws {
        try withTemporaryDirectory { directory in
            let queue = try DatabaseQueue(path: directory + "/geofence.sqlite")
            var migrator = DatabaseMigrator()
            migrator.registerMigration("v1") { db in try db.execute("CREATE TABLE t(x)") }
            let ready = migrator
            try queue.writeWithoutTransaction { db in try ready.migrate(db) }
            #expect(try queue.read { db in try count(db, "t") } == 0)
            try queue.close()
            #expect(throws: DatabaseError.self) { try queue.read { db in try count(db, "t") } }
        }
    }

}
