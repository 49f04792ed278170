import CSQLite
import Foundation

/// A prepared SQL statement: bind parameters, step through rows, read columns.
///
/// Not `Sendable`: it belongs to its connection's serial owner. It is finalized when released. Parameter indices
/// are 1-based (SQLite's `?1`), column indices 0-based (SQLite's `sqlite3_column_*`).
///
/// The typed column getters (`int64("seq")`, `string("id")`, …, or by index: `int64(at:)`) are the fast path and
/// read with SQLite's own conversions (NULL reads as 0 or ""); use the `optional…` getters or `isNull(at:)` for
/// nullable columns, or `row()` and `Row.decode` for strict checking. Read by name: a name survives a change of
/// the SELECT's column list, an index reads the wrong column without a word.
package final class Statement {
    /// Keeps the connection's `sqlite3*` open for as long as this statement exists.
    let connection: ConnectionHandle
    let pointer: OpaquePointer
    /// The SQL of this one statement.
    package let sql: String
    private var cachedColumnNames: [String]
    /// The names `columnIndex(_:)` was asked for since the last step, in the order asked, with what they
    /// resolved to. Every row of a query is read the same way, so from the second row on a name costs one
    /// comparison with the one asked for at the same point of the row before, and allocates nothing.
    /// Kept behind pointers, not in stored `var`s: a read then costs no exclusivity check (a stored property
    /// of a class is checked at run time on every access), which by index it never did either.
    private let readState = UnsafeMutablePointer<ReadState>.allocate(capacity: 1)
    private let readNames = UnsafeMutablePointer<String>.allocate(capacity: Statement.readOrderLimit)
    private let readIndices = UnsafeMutablePointer<Int>.allocate(capacity: Statement.readOrderLimit)

    private struct ReadState {
        /// How many names have been asked for since the last step.
        var position = 0
        /// How many of `readNames` are initialized.
        var count = 0
    }

    init(connection: ConnectionHandle, pointer: OpaquePointer) {
        readState.initialize(to: ReadState())
        self.connection = connection
        self.pointer = pointer
        sql = sqlite3_sql(pointer).map { String(cString: $0) } ?? ""
        cachedColumnNames = Self.columnNames(of: pointer)
    }

    deinit {
        sqlite3_finalize(pointer)
        readNames.deinitialize(count: readState.pointee.count)
        readNames.deallocate()
        readIndices.deallocate()
        readState.deallocate()
    }

    /// The number of parameters (`?`, `:name`, …) to bind.
    package var parameterCount: Int { Int(sqlite3_bind_parameter_count(pointer)) }

    /// True when the statement does not write the database by itself.
    package var isReadOnly: Bool { sqlite3_stmt_readonly(pointer) != 0 }

    /// How many times SQLite has prepared this statement again since it was made (after a schema change, or when
    /// the connection expired its statements).
    package var repreparations: Int { Int(sqlite3_stmt_status(pointer, SQLITE_STMTSTATUS_REPREPARE, 0)) }

    /// True between the first `step()` and the last row (or a `reset()`).
    var isBusy: Bool { sqlite3_stmt_busy(pointer) != 0 }

    func error(_ resultCode: Int32) -> DatabaseError {
        DatabaseError(resultCode: resultCode, connection: sqlite3_db_handle(pointer), sql: sql, path: connection.path)
    }

    private func misuse(_ code: ResultCode, _ message: String) -> DatabaseError {
        DatabaseError(code: code, message: message, sql: sql, path: connection.path)
    }

    // MARK: Binding

    /// Binds one value to the 1-based parameter `index`.
    package func bind(_ value: (any DatabaseValueConvertible)?, at index: Int) throws {
        try bind(databaseValue: value?.databaseValue ?? .null, at: index)
    }

    /// Binds one value to the parameter `name`, given with its prefix (`:id`) or without (`id`).
    package func bind(_ value: (any DatabaseValueConvertible)?, named name: String) throws {
        guard let index = parameterIndex(named: name) else {
            throw misuse(.range, "no parameter named '\(name)'")
        }
        try bind(databaseValue: value?.databaseValue ?? .null, at: index)
    }

    /// Resets the statement and binds all its parameters: positional arguments must match the parameter count,
    /// named ones must cover every parameter and name no other.
    package func bind(_ arguments: StatementArguments) throws {
        reset()
        clearBindings()
        try bind(arguments, allowingUnusedNames: false)
    }

    func bind(_ arguments: StatementArguments, allowingUnusedNames: Bool) throws {
        let count = parameterCount
        if !arguments.named.isEmpty && !arguments.positional.isEmpty {
            throw misuse(.misuse, "arguments must be all positional or all named")
        }
        if arguments.named.isEmpty {
            guard arguments.positional.count == count else {
                throw misuse(.range, "the statement has \(count) parameters, \(arguments.positional.count) given")
            }
            for (offset, value) in arguments.positional.enumerated() {
                try bind(databaseValue: value, at: offset + 1)
            }
            return
        }
        var used = Set<String>()
        for index in stride(from: 1, through: count, by: 1) {
            guard let cName = sqlite3_bind_parameter_name(pointer, Int32(index)) else {
                throw misuse(.misuse, "parameter \(index) is positional; use positional arguments")
            }
            let name = String(cString: cName)
            let bare = String(name.dropFirst())
            guard let key = [bare, name].first(where: { arguments.named[$0] != nil }) else {
                throw misuse(.range, "no argument for parameter \(name)")
            }
            used.insert(key)
            try bind(databaseValue: arguments.named[key]!, at: index)
        }
        if !allowingUnusedNames, let unused = arguments.named.keys.filter({ !used.contains($0) }).sorted().first {
            throw misuse(.range, "argument '\(unused)' matches no parameter")
        }
    }

    private func parameterIndex(named name: String) -> Int? {
        let candidates = name.first.map { ":@$".contains($0) } == true ? [name] : [":" + name, "@" + name, "$" + name]
        for candidate in candidates {
            let index = sqlite3_bind_parameter_index(pointer, candidate)
            if index > 0 { return Int(index) }
        }
        return nil
    }

    private func bind(databaseValue value: DatabaseValue, at index: Int) throws {
        let position = Int32(index)
        let resultCode: Int32
        switch value {
        case .null:
            resultCode = sqlite3_bind_null(pointer, position)
        case .integer(let integer):
            resultCode = sqlite3_bind_int64(pointer, position, integer)
        case .real(let real):
            resultCode = sqlite3_bind_double(pointer, position, real)
        case .text(var text):
            // Explicit byte length, so embedded NULs are kept; an empty string needs a non-null pointer.
            resultCode = text.withUTF8 { bytes in
                guard let base = bytes.baseAddress, !bytes.isEmpty else {
                    return sqlite3_bind_text(pointer, position, "", 0, CSQLite_transient())
                }
                return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                    sqlite3_bind_text64(
                        pointer, position, $0, UInt64(bytes.count), CSQLite_transient(), UInt8(SQLITE_UTF8))
                }
            }
        case .blob(let bytes):
            resultCode = bytes.withUnsafeBytes { buffer in
                guard let base = buffer.baseAddress, !buffer.isEmpty else {
                    return sqlite3_bind_zeroblob(pointer, position, 0)
                }
                return sqlite3_bind_blob64(pointer, position, base, UInt64(buffer.count), CSQLite_transient())
            }
        }
        guard resultCode == SQLITE_OK else { throw error(resultCode) }
    }

    /// Sets every parameter back to NULL.
    package func clearBindings() {
        sqlite3_clear_bindings(pointer)
    }

    // MARK: Stepping

    /// Advances to the next row: true when a row is available, false when the statement is done.
    package func step() throws -> Bool {
        readState.pointee.position = 0
        if connection.refusesWrites, sqlite3_stmt_readonly(pointer) == 0 {
            throw DatabaseError(
                code: .readOnly, message: "attempt to write in a read-only transaction", sql: sql,
                path: connection.path)
        }
        let resultCode = sqlite3_step(pointer)
        switch resultCode {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw error(resultCode)
        }
    }

    /// Rewinds the statement so it can run again (bindings are kept) and releases the locks it holds.
    package func reset() {
        // The result repeats the last step's error, which that step already threw.
        sqlite3_reset(pointer)
    }

    /// Binds `arguments` and runs the statement to completion.
    package func execute(_ arguments: StatementArguments = []) throws {
        try bind(arguments)
        defer { reset() }
        while try step() {}
    }

    /// Binds `arguments` and returns every row.
    package func rows(_ arguments: StatementArguments = []) throws -> [Row] {
        try bind(arguments)
        defer { reset() }
        var rows: [Row] = []
        while try step() {
            rows.append(row())
        }
        return rows
    }

    // MARK: Reading the current row

    package var columnCount: Int { Int(sqlite3_column_count(pointer)) }

    /// The result column names (empty for statements that return no rows).
    package var columnNames: [String] {
        // SQLite re-prepares a statement after a schema change, so `SELECT *` may gain or lose columns.
        if cachedColumnNames.count != columnCount {
            cachedColumnNames = Self.columnNames(of: pointer)
            readNames.deinitialize(count: readState.pointee.count)
            readState.pointee = ReadState()
        }
        return cachedColumnNames
    }

    private static func columnNames(of pointer: OpaquePointer) -> [String] {
        (0..<sqlite3_column_count(pointer)).map { String(cString: sqlite3_column_name(pointer, $0)) }
    }

    package func columnName(at index: Int) -> String { columnNames[index] }

    /// The 0-based index of the result column named `name`: like SQLite, an exact match first, then a
    /// case-insensitive one. Throws `SQLITE_RANGE` when there is none (a name the SELECT does not have).
    package func columnIndex(_ name: String) throws -> Int {
        let position = readState.pointee.position
        if position < readState.pointee.count, readNames[position] == name {
            readState.pointee.position = position + 1
            return readIndices[position]
        }
        return try lookUp(name, at: position)
    }

    /// `columnIndex(_:)` for a name not asked for at this point of the row before: found among the columns,
    /// and remembered there.
    @inline(never)
    private func lookUp(_ name: String, at position: Int) throws -> Int {
        let names = columnNames
        guard let index = names.firstIndex(of: name) ?? Self.caseInsensitiveIndex(of: name, in: names) else {
            throw misuse(
                .range, "no column '\(name)' among \(names.map { "'\($0)'" }.joined(separator: ", "))")
        }
        // Read after `columnNames`, which forgets the read order when the column list changed.
        let count = readState.pointee.count
        if position < count {
            readNames[position] = name
        } else if position == count, position < Self.readOrderLimit {
            (readNames + position).initialize(to: name)
            readState.pointee.count = position + 1
        } else {
            return index
        }
        readIndices[position] = index
        readState.pointee.position = position + 1
        return index
    }

    /// Reads of one row beyond this many are looked up each time (a row read over and over without a step).
    private static let readOrderLimit = 128

    private static func caseInsensitiveIndex(of name: String, in names: [String]) -> Int? {
        let lowered = name.lowercased()
        return names.firstIndex { $0.lowercased() == lowered }
    }

    // MARK: Reading the current row by column name (see `columnIndex(_:)`)

    package func isNull(_ column: String) throws -> Bool { isNull(at: try columnIndex(column)) }

    package func int64(_ column: String) throws -> Int64 { int64(at: try columnIndex(column)) }

    package func int(_ column: String) throws -> Int { int(at: try columnIndex(column)) }

    package func double(_ column: String) throws -> Double { double(at: try columnIndex(column)) }

    package func bool(_ column: String) throws -> Bool { bool(at: try columnIndex(column)) }

    package func string(_ column: String) throws -> String { string(at: try columnIndex(column)) }

    package func bytes(_ column: String) throws -> [UInt8] { bytes(at: try columnIndex(column)) }

    package func optionalInt64(_ column: String) throws -> Int64? { optionalInt64(at: try columnIndex(column)) }

    package func optionalInt(_ column: String) throws -> Int? { optionalInt(at: try columnIndex(column)) }

    package func optionalDouble(_ column: String) throws -> Double? { optionalDouble(at: try columnIndex(column)) }

    package func optionalString(_ column: String) throws -> String? { optionalString(at: try columnIndex(column)) }

    package func optionalBytes(_ column: String) throws -> [UInt8]? { optionalBytes(at: try columnIndex(column)) }

    /// The column's date, stored as seconds since 1970.
    package func date(_ column: String) throws -> Date { Date(timeIntervalSince1970: try double(column)) }

    /// The column's date (seconds since 1970), nil when NULL.
    package func optionalDate(_ column: String) throws -> Date? {
        try optionalDouble(column).map { Date(timeIntervalSince1970: $0) }
    }

    // MARK: Reading the current row by index

    package func isNull(at index: Int) -> Bool { sqlite3_column_type(pointer, Int32(index)) == SQLITE_NULL }

    package func int64(at index: Int) -> Int64 { sqlite3_column_int64(pointer, Int32(index)) }

    package func int(at index: Int) -> Int { Int(int64(at: index)) }

    package func double(at index: Int) -> Double { sqlite3_column_double(pointer, Int32(index)) }

    package func bool(at index: Int) -> Bool { int64(at: index) != 0 }

    package func string(at index: Int) -> String {
        let column = Int32(index)
        guard let text = sqlite3_column_text(pointer, column) else { return "" }
        // Length-aware, so embedded NULs survive; invalid UTF-8 (written by another tool) is repaired with U+FFFD.
        let count = Int(sqlite3_column_bytes(pointer, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    package func bytes(at index: Int) -> [UInt8] {
        let column = Int32(index)
        guard let blob = sqlite3_column_blob(pointer, column) else { return [] }
        let count = Int(sqlite3_column_bytes(pointer, column))
        return [UInt8](UnsafeRawBufferPointer(start: blob, count: count))
    }

    package func data(at index: Int) -> Data { Data(bytes(at: index)) }

    package func optionalInt64(at index: Int) -> Int64? { isNull(at: index) ? nil : int64(at: index) }

    package func optionalInt(at index: Int) -> Int? { isNull(at: index) ? nil : int(at: index) }

    package func optionalDouble(at index: Int) -> Double? { isNull(at: index) ? nil : double(at: index) }

    package func optionalBool(at index: Int) -> Bool? { isNull(at: index) ? nil : bool(at: index) }

    package func optionalString(at index: Int) -> String? { isNull(at: index) ? nil : string(at: index) }

    package func optionalBytes(at index: Int) -> [UInt8]? { isNull(at: index) ? nil : bytes(at: index) }

    package func optionalData(at index: Int) -> Data? { isNull(at: index) ? nil : data(at: index) }

    /// The column's value in its own storage class.
    package func value(at index: Int) -> DatabaseValue {
        switch sqlite3_column_type(pointer, Int32(index)) {
        case SQLITE_INTEGER: .integer(int64(at: index))
        case SQLITE_FLOAT: .real(double(at: index))
        case SQLITE_TEXT: .text(string(at: index))
        case SQLITE_BLOB: .blob(bytes(at: index))
        default: .null
        }
    }

    /// A copy of the current row.
    package func row() -> Row {
        let names = columnNames
        return Row(columnNames: names, values: names.indices.map { value(at: $0) })
    }
}
