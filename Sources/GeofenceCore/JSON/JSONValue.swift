/// A parsed or hand-built JSON value: what `JSON.parse` returns and what the writer serializes.
///
/// Numbers are `Double`, as in JavaScript; every gpsd and regions field fits one exactly or is meant
/// as a measurement. Objects are `JSONObject`, which keeps document order and has unique keys.
package enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
}

// Typed accessors: each returns nil when the value is of another kind, so a decoder reads
// `value.doubleValue` and reports "expected a number" itself, with the key it was looking at.
extension JSONValue {
    /// True for `null`.
    package var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The boolean, or nil if this is not `true`/`false`.
    package var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The number, or nil if this is not a number.
    package var doubleValue: Double? {
        if case .number(let value) = self { return value }
        return nil
    }

    /// The number as an `Int` when it is one exactly (`3` or `3.0`, not `3.5` or `1e300`), else nil.
    package var intValue: Int? {
        if case .number(let value) = self { return Int(exactly: value) }
        return nil
    }

    /// The string, or nil if this is not a string.
    package var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The elements, or nil if this is not an array.
    package var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The object, or nil if this is not an object.
    package var objectValue: JSONObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The member named `key` when this is an object that has it; nil otherwise.
    package subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }
}

extension JSONValue: CustomStringConvertible {
    /// The compact serialization, so values read well in test failures and logs.
    package var description: String { serialized() }
}

extension JSONValue: ExpressibleByNilLiteral {
    package init(nilLiteral: ()) { self = .null }
}

extension JSONValue: ExpressibleByBooleanLiteral {
    package init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension JSONValue: ExpressibleByIntegerLiteral {
    package init(integerLiteral value: Int) { self = .number(Double(value)) }
}

extension JSONValue: ExpressibleByFloatLiteral {
    package init(floatLiteral value: Double) { self = .number(value) }
}

extension JSONValue: ExpressibleByStringLiteral {
    package init(stringLiteral value: String) { self = .string(value) }
}

extension JSONValue: ExpressibleByArrayLiteral {
    package init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
}

extension JSONValue: ExpressibleByDictionaryLiteral {
    /// Builds an object in the order written; a repeated key traps, as it does for `Dictionary`.
    package init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(uniqueKeysWithValues: elements))
    }
}
