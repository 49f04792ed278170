import Foundation

/// One SQLite value, in one of SQLite's five storage classes.
package enum DatabaseValue: Sendable, Hashable, CustomStringConvertible {
    case null
    case integer(Int64)
    /// NaN cannot be stored: SQLite binds it as NULL.
    case real(Double)
    /// UTF-8 text; embedded NUL characters are stored and read back intact.
    case text(String)
    case blob([UInt8])

    package var isNull: Bool { self == .null }

    /// The storage class as SQLite names it, for error messages.
    package var storageClass: String {
        switch self {
        case .null: "NULL"
        case .integer: "INTEGER"
        case .real: "REAL"
        case .text: "TEXT"
        case .blob: "BLOB"
        }
    }

    package var description: String {
        switch self {
        case .null: "NULL"
        case .integer(let value): String(value)
        case .real(let value): String(value)
        case .text(let value): "'\(value.replacingOccurrences(of: "'", with: "''"))'"
        case .blob(let bytes): "X'\(bytes.map { String(format: "%02X", $0) }.joined())'"
        }
    }
}

/// A Swift type that is stored as one SQLite value and read back from one.
///
/// Reading is strict: `fromDatabaseValue` returns nil instead of guessing (a TEXT column is not an Int64, NULL is
/// not 0); the only conversions are the lossless ones between INTEGER and REAL.
package protocol DatabaseValueConvertible {
    var databaseValue: DatabaseValue { get }
    static func fromDatabaseValue(_ value: DatabaseValue) -> Self?
}

extension DatabaseValue: DatabaseValueConvertible {
    package var databaseValue: DatabaseValue { self }
    package static func fromDatabaseValue(_ value: DatabaseValue) -> DatabaseValue? { value }
}

extension Int64: DatabaseValueConvertible {
    package var databaseValue: DatabaseValue { .integer(self) }
    package static func fromDatabaseValue(_ value: DatabaseValue) -> Int64? {
        switch value {
        case .integer(let integer): integer
        case .real(let real): Int64(exactly: real)
        default: nil
        }
    }
}

extension Int: DatabaseValueConvertible {
    package var databaseValue: DatabaseValue { .integer(Int64(self)) }
    package static func fromDatabaseValue(_ value: DatabaseValue) -> Int? {
        Int64.fromDatabaseValue(value).flatMap { Int(exactly: $0) }
    }
}

extension Int32: DatabaseValueConvertible {
    package var databaseValue: DatabaseValue { .integer(Int64(self)) }
    package static func fromDatabaseValue(_ value: DatabaseValue) -> Int32? {
        Int64.fromDatabaseValue(value).flatMap { Int32(exactly: $0) }
    }
}

extension Double: DatabaseValueConvertible {
    package var databaseValue: DatabaseValue { .real(self) }
    package static func fromDatabaseValue(_ value: DatabaseValue) -> Double? {
        switch value {
        case .real(let real): real
        case .integer(let integer): Double(integer)
        default: nil
        }
    }
}

/// Stored as INTEGER 0 or 1, SQLite's own booleans.
extension Bool: DatabaseValueConvertible {
    package var databaseValue: DatabaseValue { .integer(self ? 1 : 0) }
    package static func fromDatabaseValue(_ value: DatabaseValue) -> Bool? {
        Int64.fromDatabaseValue(value).map { $0 != 0 }
    }
}

extension String: DatabaseValueConvertible {
    package var databaseValue: DatabaseValue { .text(self) }
    package static func fromDatabaseValue(_ value: DatabaseValue) -> String? {
        if case .text(let text) = value { text } else { nil }
    }
}

extension [UInt8]: DatabaseValueConvertible {
    package var databaseValue: DatabaseValue { .blob(self) }
    package static func fromDatabaseValue(_ value: DatabaseValue) -> [UInt8]? {
        if case .blob(let bytes) = value { bytes } else { nil }
    }
}

extension Data: DatabaseValueConvertible {
    package var databaseValue: DatabaseValue { .blob([UInt8](self)) }
    package static func fromDatabaseValue(_ value: DatabaseValue) -> Data? {
        if case .blob(let bytes) = value { Data(bytes) } else { nil }
    }
}

/// nil is NULL, and NULL reads back as nil: the way to read a nullable column.
extension Optional: DatabaseValueConvertible where Wrapped: DatabaseValueConvertible {
    package var databaseValue: DatabaseValue { self?.databaseValue ?? .null }
    package static func fromDatabaseValue(_ value: DatabaseValue) -> Wrapped?? {
        if case .null = value { return .some(nil) }
        return Wrapped.fromDatabaseValue(value).map { .some($0) }
    }
}

/// The values bound to a statement's parameters: positional (`?`, `?NNN`) from an array literal, or named
/// (`:name`, `@name`, `$name`) from a dictionary literal whose keys may omit the prefix.
///
/// ```swift
/// try db.execute("INSERT INTO region(id, radius) VALUES (?, ?)", ["depot", 200.0])
/// try db.execute("UPDATE region SET radius = :radius WHERE id = :id", ["id": "depot", "radius": 250.0])
/// ```
package struct StatementArguments: Sendable, Hashable, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    package var positional: [DatabaseValue]
    package var named: [String: DatabaseValue]

    package init(_ values: [(any DatabaseValueConvertible)?]) {
        positional = values.map { $0?.databaseValue ?? .null }
        named = [:]
    }

    /// Positional values as they are bound, without going through `DatabaseValueConvertible` (for writes made
    /// once per fix).
    package init(values: [DatabaseValue]) {
        positional = values
        named = [:]
    }

    package init(named values: [String: (any DatabaseValueConvertible)?]) {
        positional = []
        named = values.mapValues { $0?.databaseValue ?? .null }
    }

    package init(arrayLiteral elements: (any DatabaseValueConvertible)?...) {
        self.init(elements)
    }

    package init(dictionaryLiteral elements: (String, (any DatabaseValueConvertible)?)...) {
        positional = []
        named = Dictionary(elements.map { ($0.0, $0.1?.databaseValue ?? .null) }, uniquingKeysWith: { _, last in last })
    }

    package var isEmpty: Bool { positional.isEmpty && named.isEmpty }
}
