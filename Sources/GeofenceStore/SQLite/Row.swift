/// One result row, copied out of SQLite: a value that outlives its statement and may cross threads.
///
/// ```swift
/// for row in try db.query("SELECT id, radius, expires FROM region") {
///     let id: String = try row.decode("id")
///     let expires: Double? = try row.decode("expires")  // nil when NULL
/// }
/// ```
package struct Row: Sendable, Hashable, CustomStringConvertible {
    package let columnNames: [String]
    package let values: [DatabaseValue]

    package init(columnNames: [String], values: [DatabaseValue]) {
        precondition(columnNames.count == values.count, "a row needs one name per value")
        self.columnNames = columnNames
        self.values = values
    }

    package var count: Int { values.count }

    /// The value at a 0-based column index.
    package subscript(index: Int) -> DatabaseValue { values[index] }

    /// The value of the named column, or nil when the row has no such column.
    package subscript(column: String) -> DatabaseValue? {
        index(ofColumn: column).map { values[$0] }
    }

    /// The index of a column; like SQLite, an exact match first, then a case-insensitive one.
    package func index(ofColumn name: String) -> Int? {
        if let exact = columnNames.firstIndex(of: name) { return exact }
        let lowered = name.lowercased()
        return columnNames.firstIndex { $0.lowercased() == lowered }
    }

    /// The value at a 0-based column index as `T`; throws `SQLITE_MISMATCH` when it does not convert (NULL into a
    /// non-optional type, TEXT into a number, …) and `SQLITE_RANGE` when there is no such column.
    package func decode<T: DatabaseValueConvertible>(at index: Int, as type: T.Type = T.self) throws -> T {
        guard values.indices.contains(index) else {
            throw DatabaseError(code: .range, message: "no column at index \(index) in a row of \(count) columns")
        }
        return try Self.convert(values[index], column: "column '\(columnNames[index])' (index \(index))", to: type)
    }

    /// The value of the named column as `T`; see `decode(at:as:)`.
    package func decode<T: DatabaseValueConvertible>(_ column: String, as type: T.Type = T.self) throws -> T {
        guard let index = index(ofColumn: column) else {
            throw DatabaseError(
                code: .range,
                message: "no column '\(column)' in a row of \(columnNames.map { "'\($0)'" }.joined(separator: ", "))"
            )
        }
        return try Self.convert(values[index], column: "column '\(column)'", to: type)
    }

    private static func convert<T: DatabaseValueConvertible>(
        _ value: DatabaseValue, column: String, to type: T.Type
    ) throws -> T {
        guard let converted = T.fromDatabaseValue(value) else {
            throw DatabaseError(
                code: .mismatch, message: "\(column): cannot read \(value.storageClass) as \(T.self)")
        }
        return converted
    }

    package var description: String {
        "[" + zip(columnNames, values).map { "\($0.0):\($0.1)" }.joined(separator: " ") + "]"
    }
}
