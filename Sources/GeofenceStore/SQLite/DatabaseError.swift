import CSQLite
import Glibc

/// A SQLite result code, primary or extended, named rather than passed around as a raw number.
package struct ResultCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    package let rawValue: Int32

    package init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// The primary code: the low byte of an extended code (`SQLITE_CONSTRAINT_UNIQUE` → `SQLITE_CONSTRAINT`).
    package var primary: ResultCode { ResultCode(rawValue: rawValue & 0xFF) }

    /// The C name of the code, e.g. `SQLITE_CONSTRAINT_UNIQUE`.
    package var name: String {
        if let name = Self.names[rawValue] { return name }
        let primaryName = Self.names[rawValue & 0xFF] ?? "SQLITE_UNKNOWN"
        return rawValue > 0xFF ? "\(primaryName) (extended \(rawValue))" : "\(primaryName) (\(rawValue))"
    }

    package var description: String { name }

    package static let error = ResultCode(rawValue: SQLITE_ERROR)
    package static let abort = ResultCode(rawValue: SQLITE_ABORT)
    package static let busy = ResultCode(rawValue: SQLITE_BUSY)
    package static let locked = ResultCode(rawValue: SQLITE_LOCKED)
    package static let readOnly = ResultCode(rawValue: SQLITE_READONLY)
    package static let interrupt = ResultCode(rawValue: SQLITE_INTERRUPT)
    package static let ioError = ResultCode(rawValue: SQLITE_IOERR)
    package static let corrupt = ResultCode(rawValue: SQLITE_CORRUPT)
    package static let full = ResultCode(rawValue: SQLITE_FULL)
    package static let cantOpen = ResultCode(rawValue: SQLITE_CANTOPEN)
    package static let constraint = ResultCode(rawValue: SQLITE_CONSTRAINT)
    package static let mismatch = ResultCode(rawValue: SQLITE_MISMATCH)
    package static let misuse = ResultCode(rawValue: SQLITE_MISUSE)
    package static let range = ResultCode(rawValue: SQLITE_RANGE)
    package static let notADatabase = ResultCode(rawValue: SQLITE_NOTADB)
    package static let permission = ResultCode(rawValue: SQLITE_PERM)

    package static let constraintUnique = ResultCode(rawValue: SQLITE_CONSTRAINT | (8 << 8))
    package static let constraintPrimaryKey = ResultCode(rawValue: SQLITE_CONSTRAINT | (6 << 8))
    package static let constraintForeignKey = ResultCode(rawValue: SQLITE_CONSTRAINT | (3 << 8))
    package static let constraintNotNull = ResultCode(rawValue: SQLITE_CONSTRAINT | (5 << 8))
    package static let constraintCheck = ResultCode(rawValue: SQLITE_CONSTRAINT | (1 << 8))

    // Extended codes are macros built with `|` and `<<`, which Swift does not import, hence the table.
    private static let names: [Int32: String] = {
        var names: [Int32: String] = [
            SQLITE_OK: "SQLITE_OK", SQLITE_ERROR: "SQLITE_ERROR", SQLITE_INTERNAL: "SQLITE_INTERNAL",
            SQLITE_PERM: "SQLITE_PERM", SQLITE_ABORT: "SQLITE_ABORT", SQLITE_BUSY: "SQLITE_BUSY",
            SQLITE_LOCKED: "SQLITE_LOCKED", SQLITE_NOMEM: "SQLITE_NOMEM", SQLITE_READONLY: "SQLITE_READONLY",
            SQLITE_INTERRUPT: "SQLITE_INTERRUPT", SQLITE_IOERR: "SQLITE_IOERR", SQLITE_CORRUPT: "SQLITE_CORRUPT",
            SQLITE_NOTFOUND: "SQLITE_NOTFOUND", SQLITE_FULL: "SQLITE_FULL", SQLITE_CANTOPEN: "SQLITE_CANTOPEN",
            SQLITE_PROTOCOL: "SQLITE_PROTOCOL", SQLITE_EMPTY: "SQLITE_EMPTY", SQLITE_SCHEMA: "SQLITE_SCHEMA",
            SQLITE_TOOBIG: "SQLITE_TOOBIG", SQLITE_CONSTRAINT: "SQLITE_CONSTRAINT", SQLITE_MISMATCH: "SQLITE_MISMATCH",
            SQLITE_MISUSE: "SQLITE_MISUSE", SQLITE_NOLFS: "SQLITE_NOLFS", SQLITE_AUTH: "SQLITE_AUTH",
            SQLITE_FORMAT: "SQLITE_FORMAT", SQLITE_RANGE: "SQLITE_RANGE", SQLITE_NOTADB: "SQLITE_NOTADB",
            SQLITE_NOTICE: "SQLITE_NOTICE", SQLITE_WARNING: "SQLITE_WARNING", SQLITE_ROW: "SQLITE_ROW",
            SQLITE_DONE: "SQLITE_DONE",
        ]
        let extended: [(Int32, [String])] = [
            (
                SQLITE_IOERR,
                [
                    "READ", "SHORT_READ", "WRITE", "FSYNC", "DIR_FSYNC", "TRUNCATE", "FSTAT", "UNLOCK", "RDLOCK",
                    "DELETE", "BLOCKED", "NOMEM", "ACCESS", "CHECKRESERVEDLOCK", "LOCK", "CLOSE", "DIR_CLOSE",
                    "SHMOPEN", "SHMSIZE", "SHMLOCK", "SHMMAP", "SEEK", "DELETE_NOENT", "MMAP", "GETTEMPPATH",
                    "CONVPATH", "VNODE", "AUTH", "BEGIN_ATOMIC", "COMMIT_ATOMIC", "ROLLBACK_ATOMIC", "DATA",
                    "CORRUPTFS",
                ]
            ),
            (SQLITE_LOCKED, ["SHAREDCACHE", "VTAB"]),
            (SQLITE_BUSY, ["RECOVERY", "SNAPSHOT", "TIMEOUT"]),
            (SQLITE_CANTOPEN, ["NOTEMPDIR", "ISDIR", "FULLPATH", "CONVPATH", "DIRTYWAL", "SYMLINK"]),
            (SQLITE_CORRUPT, ["VTAB", "SEQUENCE", "INDEX"]),
            (SQLITE_READONLY, ["RECOVERY", "CANTLOCK", "ROLLBACK", "DBMOVED", "CANTINIT", "DIRECTORY"]),
            (SQLITE_ABORT, ["", "ROLLBACK"]),
            (
                SQLITE_CONSTRAINT,
                [
                    "CHECK", "COMMITHOOK", "FOREIGNKEY", "FUNCTION", "NOTNULL", "PRIMARYKEY", "TRIGGER", "UNIQUE",
                    "VTAB", "ROWID", "PINNED", "DATATYPE",
                ]
            ),
        ]
        for (primary, suffixes) in extended {
            let primaryName = names[primary]!
            for (offset, suffix) in suffixes.enumerated() where !suffix.isEmpty {
                names[primary | Int32(offset + 1) << 8] = "\(primaryName)_\(suffix)"
            }
        }
        return names
    }()
}

/// An error reported by SQLite (or by this wrapper in SQLite's terms): what failed, on which file, running which SQL.
///
/// Callers ask questions (`isBusy`, `isFull`, …) instead of comparing codes; `description` is one line, fit to be
/// printed as is by the daemon or the CLI.
package struct DatabaseError: Error, CustomStringConvertible, Sendable {
    /// The extended result code (its `primary` is the broad category).
    package let code: ResultCode
    /// SQLite's message (`sqlite3_errmsg`) or this wrapper's explanation.
    package let message: String
    /// The SQL that failed, if any.
    package let sql: String?
    /// The database file, if known.
    package let path: String?
    /// The operating system's `errno` behind an I/O-level failure (`sqlite3_system_errno`), if any.
    package let systemErrno: Int32?

    package init(
        code: ResultCode, message: String, sql: String? = nil, path: String? = nil, systemErrno: Int32? = nil
    ) {
        self.code = code
        self.message = message
        self.sql = sql
        self.path = path
        self.systemErrno = systemErrno
    }

    /// Reads the error state of `connection` right after a call returned `resultCode`.
    init(resultCode: Int32, connection: OpaquePointer?, sql: String?, path: String?) {
        let code = ResultCode(rawValue: resultCode)
        var message = String(cString: sqlite3_errstr(resultCode))
        var systemErrno: Int32?
        if let connection {
            // errmsg describes the most recent failure on this connection; trust it only if it is this one.
            if sqlite3_extended_errcode(connection) & 0xFF == code.primary.rawValue {
                message = String(cString: sqlite3_errmsg(connection))
            }
            if Self.ioRelatedCodes.contains(code.primary) {
                let errno = sqlite3_system_errno(connection)
                systemErrno = errno != 0 ? errno : nil
            }
        }
        self.init(code: code, message: message, sql: sql, path: path, systemErrno: systemErrno)
    }

    private static let ioRelatedCodes: Set<ResultCode> = [.cantOpen, .ioError, .full, .readOnly, .permission]

    /// The lock stayed taken by another connection for longer than the busy timeout.
    package var isBusy: Bool { code.primary == .busy }
    /// Any constraint failed: UNIQUE, PRIMARY KEY, NOT NULL, CHECK, FOREIGN KEY.
    package var isConstraintViolation: Bool { code.primary == .constraint }
    /// A UNIQUE or PRIMARY KEY constraint failed: the row already exists.
    package var isUniqueConstraintViolation: Bool { code == .constraintUnique || code == .constraintPrimaryKey }
    /// A FOREIGN KEY constraint failed.
    package var isForeignKeyViolation: Bool { code == .constraintForeignKey }
    /// The disk (or the database's page limit) is full.
    package var isFull: Bool { code.primary == .full }
    /// A write was refused: read-only file system, file permissions, or a read-only connection or `read` block.
    package var isReadOnly: Bool { code.primary == .readOnly }
    /// The file could not be opened or created.
    package var isCantOpen: Bool { code.primary == .cantOpen }
    /// The file is damaged or is not a SQLite database at all.
    package var isCorrupt: Bool { code.primary == .corrupt || code.primary == .notADatabase }
    /// The operating system reported an I/O error.
    package var isIOError: Bool { code.primary == .ioError }
    /// The operating system refused access to the file (`EACCES`/`EPERM`).
    package var isPermissionDenied: Bool {
        code.primary == .permission || systemErrno == EACCES || systemErrno == EPERM
    }

    /// One line: `PATH: MESSAGE (OS ERROR); HINT [CODE] while executing: SQL`.
    package var description: String {
        var text = path.map { "\($0): " } ?? ""
        text += message
        if let systemErrno {
            text += " (\(String(cString: strerror(systemErrno))))"
        }
        if let hint {
            text += "; \(hint)"
        }
        text += " [\(code.name)]"
        if let sql {
            text += " while executing: \(Self.oneLine(sql))"
        }
        return text
    }

    private var hint: String? {
        switch code.primary {
        case .busy: "another connection held the lock for longer than the busy timeout"
        case .full: "free space on the file system holding the database"
        case .corrupt, .notADatabase: "the file is damaged or is not a SQLite database"
        default: nil
        }
    }

    private static func oneLine(_ sql: String, limit: Int = 200) -> String {
        let collapsed = sql.split(whereSeparator: { $0.isWhitespace }).joined(separator: " ")
        return collapsed.count > limit ? String(collapsed.prefix(limit)) + "..." : collapsed
    }
}
