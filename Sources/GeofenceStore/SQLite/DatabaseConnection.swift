import CSQLite
import Glibc

/// Owns one `sqlite3*`. Statements keep it alive, so a statement never outlives the handle it was prepared on.
final class ConnectionHandle {
    var pointer: OpaquePointer?
    let path: String
    /// Inside `DatabaseConnection.read`: a statement that would write is refused when it is stepped (`Statement.step`).
    /// Not `PRAGMA query_only`: setting that pragma (on and off again for each read) expires every prepared
    /// statement of the connection, so each read made SQLite prepare the hot writes of the next commit again.
    @exclusivity(unchecked) var refusesWrites = false

    init(pointer: OpaquePointer?, path: String) {
        self.pointer = pointer
        self.path = path
    }

    deinit {
        // Every statement holds this handle, so none is left unfinalized by now.
        if let pointer { sqlite3_close_v2(pointer) }
    }
}

/// A connection to one SQLite database file, set up for an engine that must not lose an event: WAL journal, full
/// fsync on commit, foreign keys enforced, and a busy timeout so the CLI and the daemon can share the file.
///
/// Not `Sendable`: it has one serial owner at a time. Share a `DatabaseQueue` across threads instead.
///
/// A new database file is created with mode 0600 (`Options.fileMode`) before SQLite opens it: it is created with
/// `open(O_CREAT | O_EXCL)` and then `fchmod`, so the result is exact whatever the umask, and the process-wide
/// umask is never changed (other threads may be creating files). SQLite creates the `-wal` and `-shm` files with
/// the mode (and, as root, the owner) of the database file, so they are 0600 too. An existing file keeps its mode.
package final class DatabaseConnection {
    /// How a connection is opened and configured.
    package struct Options: Sendable {
        /// Open with `SQLITE_OPEN_READONLY`: every write fails with `isReadOnly`; the file must exist.
        package var readOnly: Bool
        /// How long to wait for another connection's lock before failing with `isBusy`.
        package var busyTimeout: Duration
        /// `PRAGMA synchronous`. `.full` (the default) makes a committed transaction survive power loss in WAL mode;
        /// `.normal` may lose the last transactions on power loss, though never corrupts the file.
        package var synchronous: SynchronousMode
        /// `PRAGMA foreign_keys`.
        package var foreignKeys: Bool
        /// Permission bits of a database file this connection creates.
        package var fileMode: mode_t
        /// The number of prepared statements kept by SQL text; 0 disables the cache.
        package var statementCacheCapacity: Int

        package init(
            readOnly: Bool = false,
            busyTimeout: Duration = .seconds(5),
            synchronous: SynchronousMode = .full,
            foreignKeys: Bool = true,
            fileMode: mode_t = 0o600,
            statementCacheCapacity: Int = 64
        ) {
            self.readOnly = readOnly
            self.busyTimeout = busyTimeout
            self.synchronous = synchronous
            self.foreignKeys = foreignKeys
            self.fileMode = fileMode
            self.statementCacheCapacity = statementCacheCapacity
        }
    }

    /// `PRAGMA synchronous` levels.
    package enum SynchronousMode: String, Sendable {
        case off = "OFF"
        case normal = "NORMAL"
        case full = "FULL"
        case extra = "EXTRA"
    }

    package let path: String
    package let options: Options
    let handle: ConnectionHandle
    private var statementCache: [String: Statement] = [:]
    var savepointDepth = 0
    var readDepth = 0
    /// The checkpointer this connection hands its WAL's growth to (`WALCheckpointer`), kept alive with it.
    var attachedCheckpointer: WALCheckpointer?

    /// Opens (creating if needed, unless read-only) the database at `path` and configures it.
    ///
    /// Throws a `DatabaseError` naming `path`: `isCantOpen` (missing directory, no permission, missing file when
    /// read-only), `isReadOnly` (read-only file system, or a file that cannot be written), `isCorrupt` (not a
    /// database), `isBusy` (another process kept the lock while switching to WAL).
    package init(path: String, options: Options = Options()) throws {
        self.path = path
        self.options = options
        let isFile = !path.isEmpty && path != ":memory:"
        if isFile && !options.readOnly {
            try Self.createFileIfNeeded(path: path, mode: options.fileMode)
        }
        var pointer: OpaquePointer?
        let access = options.readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        let resultCode = sqlite3_open_v2(path, &pointer, access | SQLITE_OPEN_NOMUTEX, nil)
        // Owns the pointer from here, so it is closed on every error below.
        handle = ConnectionHandle(pointer: pointer, path: path)
        guard resultCode == SQLITE_OK, let pointer else {
            throw DatabaseError(resultCode: resultCode, connection: pointer, sql: nil, path: path)
        }
        sqlite3_extended_result_codes(pointer, 1)
        sqlite3_busy_timeout(pointer, Self.milliseconds(options.busyTimeout))
        // SQLite silently falls back to read-only when the file or file system cannot be written; say so now
        // rather than at the first write.
        if !options.readOnly && sqlite3_db_readonly(pointer, "main") == 1 {
            throw DatabaseError(
                code: .readOnly,
                message: "cannot open the database for writing (read-only file system or no write permission)",
                path: path)
        }
        if isFile && !options.readOnly {
            let mode = try scalar("PRAGMA journal_mode = WAL", as: String.self)
            guard mode?.lowercased() == "wal" else {
                throw DatabaseError(
                    code: .error, message: "cannot switch to WAL journal mode (it stays '\(mode ?? "unknown")')",
                    sql: "PRAGMA journal_mode = WAL", path: path)
            }
        }
        try execute("PRAGMA synchronous = \(options.synchronous.rawValue)")
        try execute("PRAGMA foreign_keys = \(options.foreignKeys ? "ON" : "OFF")")
        if isFile && !options.readOnly, let checkpointer = WALCheckpointer.installed(for: path) { attach(checkpointer) }
    }

    private static func createFileIfNeeded(path: String, mode: mode_t) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        if descriptor < 0 {
            let error = errno
            if error == EEXIST { return }
            throw DatabaseError(
                code: error == EROFS ? .readOnly : .cantOpen, message: "cannot create the database file", path: path,
                systemErrno: error)
        }
        defer { Glibc.close(descriptor) }
        // The umask may have removed bits from `mode`; fchmod makes the mode exact without touching the umask.
        if fchmod(descriptor, mode) != 0 {
            throw DatabaseError(
                code: .cantOpen, message: "cannot set the database file's mode", path: path, systemErrno: errno)
        }
    }

    private static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        let milliseconds = seconds.multipliedReportingOverflow(by: 1000)
        guard !milliseconds.overflow else { return seconds < 0 ? 0 : Int32.max }
        return Int32(clamping: max(0, milliseconds.partialValue + attoseconds / 1_000_000_000_000_000))
    }

    /// Closes the connection. Later calls throw (`SQLITE_MISUSE`); closing twice is harmless. Fails with `isBusy`
    /// (and stays open) while a `Statement` obtained from it is still referenced.
    package func close() throws {
        guard let pointer = handle.pointer else { return }
        statementCache.removeAll()
        let resultCode = sqlite3_close(pointer)
        guard resultCode == SQLITE_OK else {
            throw DatabaseError(resultCode: resultCode, connection: pointer, sql: nil, path: path)
        }
        handle.pointer = nil
    }

    package var isClosed: Bool { handle.pointer == nil }

    func openPointer() throws -> OpaquePointer {
        guard let pointer = handle.pointer else {
            throw DatabaseError(code: .misuse, message: "the database connection is closed", path: path)
        }
        return pointer
    }

    // MARK: State

    /// The rowid of the last successful INSERT on this connection.
    package var lastInsertRowID: Int64 { handle.pointer.map { sqlite3_last_insert_rowid($0) } ?? 0 }

    /// The rows changed by the last INSERT, UPDATE or DELETE.
    package var changes: Int { handle.pointer.map { Int(sqlite3_changes64($0)) } ?? 0 }

    /// The rows changed since the connection was opened.
    package var totalChanges: Int { handle.pointer.map { Int(sqlite3_total_changes64($0)) } ?? 0 }

    /// True between BEGIN and COMMIT/ROLLBACK.
    package var isInTransaction: Bool { handle.pointer.map { sqlite3_get_autocommit($0) == 0 } ?? false }

    /// True when the connection cannot write (opened read-only, or the file is not writable).
    package var isReadOnly: Bool { handle.pointer.map { sqlite3_db_readonly($0, "main") == 1 } ?? true }

    // MARK: Statements

    /// Prepares one statement, not cached.
    package func makeStatement(_ sql: String) throws -> Statement {
        let connection = try openPointer()
        return try sql.withCString { text in
            var pointer: OpaquePointer?
            var tail: UnsafePointer<CChar>?
            let resultCode = sqlite3_prepare_v2(connection, text, -1, &pointer, &tail)
            guard resultCode == SQLITE_OK else {
                throw DatabaseError(resultCode: resultCode, connection: connection, sql: sql, path: path)
            }
            guard let pointer else {
                throw DatabaseError(code: .misuse, message: "no SQL statement to prepare", sql: sql, path: path)
            }
            let statement = Statement(connection: handle, pointer: pointer)
            guard Self.isBlank(tail) else {
                throw DatabaseError(
                    code: .misuse, message: "expected one SQL statement, found several (use execute for a script)",
                    sql: sql, path: path)
            }
            return statement
        }
    }

    /// A prepared statement for `sql` from the connection's cache, prepared on first use.
    ///
    /// If the cached statement is in the middle of a run further up the stack, a fresh uncached one is returned, so
    /// nesting the same query is safe.
    package func cachedStatement(_ sql: String) throws -> Statement {
        if let cached = statementCache[sql] {
            return cached.isBusy ? try makeStatement(sql) : cached
        }
        let statement = try makeStatement(sql)
        cache(statement, for: sql)
        return statement
    }

    private func cache(_ statement: Statement, for sql: String) {
        guard options.statementCacheCapacity > 0 else { return }
        // Bounded so that SQL built at run time cannot grow it without end; hot statements come back at once.
        if statementCache.count >= options.statementCacheCapacity {
            statementCache.removeAll(keepingCapacity: true)
        }
        statementCache[sql] = statement
    }

    private func withStatement<Result>(
        _ sql: String, _ arguments: StatementArguments, _ body: (Statement) throws -> Result
    ) throws -> Result {
        try run(try cachedStatement(sql), arguments, body)
    }

    private func run<Result>(
        _ statement: Statement, _ arguments: StatementArguments, _ body: (Statement) throws -> Result
    ) throws -> Result {
        try statement.bind(arguments)
        defer {
            // Releases the statement's read lock at once and drops copies of bound blobs.
            statement.reset()
            statement.clearBindings()
        }
        return try body(statement)
    }

    // MARK: Executing

    /// Runs SQL that returns no rows: one statement or a script of several (separated by `;`).
    ///
    /// Positional arguments are consumed in order by the statements of a script; named arguments are offered to
    /// every statement.
    package func execute(_ sql: String, _ arguments: StatementArguments = []) throws {
        // One look-up of the cache (the hot writes run once per fix): what `cachedStatement` would find.
        if let cached = statementCache[sql] {
            try run(cached.isBusy ? try makeStatement(sql) : cached, arguments) { statement in
                while try statement.step() {}
            }
        } else {
            try executeScript(sql, arguments)
        }
    }

    private func executeScript(_ sql: String, _ arguments: StatementArguments) throws {
        let connection = try openPointer()
        guard arguments.named.isEmpty || arguments.positional.isEmpty else {
            throw DatabaseError(
                code: .misuse, message: "arguments must be all positional or all named", sql: sql, path: path)
        }
        var positional = arguments.positional[...]
        try sql.withCString { text in
            var cursor = text
            var isFirst = true
            while !Self.isBlank(cursor) {
                var pointer: OpaquePointer?
                var tail: UnsafePointer<CChar>?
                let resultCode = sqlite3_prepare_v2(connection, cursor, -1, &pointer, &tail)
                guard resultCode == SQLITE_OK else {
                    throw DatabaseError(
                        resultCode: resultCode, connection: connection, sql: String(cString: cursor), path: path)
                }
                guard let pointer, let tail else { break }
                let statement = Statement(connection: handle, pointer: pointer)
                let isLast = Self.isBlank(tail)
                let isSingle = isFirst && isLast
                if isSingle {
                    cache(statement, for: sql)
                }
                isFirst = false
                var statementArguments = StatementArguments(named: [:])
                if arguments.named.isEmpty {
                    // The last statement takes all that is left, so a wrong count fails before it runs.
                    let count = isLast ? positional.count : min(statement.parameterCount, positional.count)
                    statementArguments.positional = Array(positional.prefix(count))
                    positional = positional.dropFirst(count)
                } else {
                    statementArguments.named = arguments.named
                }
                try statement.bind(statementArguments, allowingUnusedNames: !isSingle)
                defer {
                    statement.reset()
                    statement.clearBindings()
                }
                while try statement.step() {}
                cursor = tail
            }
        }
        guard positional.isEmpty else {
            throw DatabaseError(
                code: .range, message: "\(positional.count) arguments left over after the last statement", sql: sql,
                path: path)
        }
    }

    /// Runs one query and returns all its rows.
    package func query(_ sql: String, _ arguments: StatementArguments = []) throws -> [Row] {
        try withStatement(sql, arguments) { statement in
            var rows: [Row] = []
            while try statement.step() {
                rows.append(statement.row())
            }
            return rows
        }
    }

    /// Runs one query and returns its first row, if any.
    package func queryFirst(_ sql: String, _ arguments: StatementArguments = []) throws -> Row? {
        try withStatement(sql, arguments) { statement in
            try statement.step() ? statement.row() : nil
        }
    }

    /// The first column of the first row as `T`: nil when there is no row or the value is NULL; throws
    /// `SQLITE_MISMATCH` when the value does not convert to `T`.
    package func scalar<T: DatabaseValueConvertible>(
        _ sql: String, _ arguments: StatementArguments = [], as type: T.Type = T.self
    ) throws -> T? {
        try withStatement(sql, arguments) { statement in
            guard try statement.step(), statement.columnCount > 0, !statement.isNull(at: 0) else { return nil }
            let value = statement.value(at: 0)
            guard let converted = T.fromDatabaseValue(value) else {
                throw DatabaseError(
                    code: .mismatch, message: "cannot read \(value.storageClass) as \(T.self)", sql: sql, path: path)
            }
            return converted
        }
    }

    /// Runs one query and calls `body` on each row, with the statement positioned on it: the allocation-free way
    /// to read many rows with the typed getters. The statement must not escape `body`.
    package func forEachRow(
        _ sql: String, _ arguments: StatementArguments = [], _ body: (Statement) throws -> Void
    ) throws {
        try withStatement(sql, arguments) { statement in
            while try statement.step() {
                try body(statement)
            }
        }
    }

    // MARK: Checks

    /// `PRAGMA integrity_check`: the problems found (at most `maxProblems`), empty when the database is sound.
    package func integrityCheck(maxProblems: Int = 100) throws -> [String] {
        try check("integrity_check", maxProblems: maxProblems)
    }

    /// `PRAGMA quick_check`: like `integrityCheck`, faster, skipping the index-content checks.
    package func quickCheck(maxProblems: Int = 100) throws -> [String] {
        try check("quick_check", maxProblems: maxProblems)
    }

    private func check(_ pragma: String, maxProblems: Int) throws -> [String] {
        let problems = try query("PRAGMA \(pragma)(\(max(1, maxProblems)))").map { row in
            row.values.first.flatMap(String.fromDatabaseValue) ?? "\(row)"
        }
        return problems == ["ok"] ? [] : problems
    }

    // MARK: Lexing

    /// True when `text` holds nothing but whitespace, semicolons and comments.
    static func isBlank(_ text: UnsafePointer<CChar>?) -> Bool {
        guard let text else { return true }
        let bytes = UnsafeRawBufferPointer(start: text, count: strlen(text))
        func byte(_ index: Int) -> UInt8 { index < bytes.count ? bytes[index] : 0 }
        var index = 0
        while index < bytes.count {
            switch (bytes[index], byte(index + 1)) {
            case (UInt8(ascii: "-"), UInt8(ascii: "-")):
                while index < bytes.count && bytes[index] != UInt8(ascii: "\n") { index += 1 }
            case (UInt8(ascii: "/"), UInt8(ascii: "*")):
                index += 2
                while index < bytes.count
                    && !(bytes[index] == UInt8(ascii: "*") && byte(index + 1) == UInt8(ascii: "/"))
                {
                    index += 1
                }
                index += 2
            case (let current, _) where current == UInt8(ascii: ";") || isspace(Int32(current)) != 0:
                index += 1
            default:
                return false
            }
        }
        return true
    }
}
