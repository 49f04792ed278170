/// A JSON object: members in document (or insertion) order, each key at most once.
///
/// Order is kept so that files we write come out as the user wrote them and tests can compare
/// serialized text. Keys are unique because a regions file with two `"radius"` members is a
/// mistake to report, not something to resolve silently; the parser rejects duplicates.
///
/// Equality ignores order: `{"a":1,"b":2}` equals `{"b":2,"a":1}`, as JSON objects are unordered.
/// Keys compare as Swift strings (canonical equivalence), like `Dictionary` keys.
package struct JSONObject: Sendable {
    /// One member: a key and its value.
    package typealias Member = (key: String, value: JSONValue)

    /// Up to this many members, lookups scan the array: cheaper than hashing for the small
    /// objects that dominate (a gpsd TPV has about 20 keys, a region a handful).
    private static let linearSearchLimit = 24

    private var members: [Member]
    /// Key to position in `members`; built only once the object outgrows `linearSearchLimit`,
    /// so that large objects (hostile or not) stay O(1) per lookup and O(n) to parse.
    private var index: [String: Int]?

    /// An empty object.
    package init() {
        members = []
        index = nil
    }

    /// An object with the given members in order; a repeated key traps, as for `Dictionary`,
    /// since it is a programming error here (input is checked by the parser, which throws).
    package init(uniqueKeysWithValues members: some Sequence<(String, JSONValue)>) {
        self.init()
        for (key, value) in members {
            precondition(position(of: key) == nil, "duplicate key \"\(key)\" in JSONObject")
            appendNew(key: key, value: value)
        }
    }

    /// The keys in order.
    package var keys: [String] { members.map(\.key) }

    /// The values in key order.
    package var values: [JSONValue] { members.map(\.value) }

    /// The value for `key`, or nil. Setting a value replaces it in place (keeping its position)
    /// or appends a new member; setting nil removes the member.
    package subscript(key: String) -> JSONValue? {
        get {
            guard let position = position(of: key) else { return nil }
            return members[position].value
        }
        set {
            if let newValue {
                if let position = position(of: key) {
                    members[position].value = newValue
                } else {
                    appendNew(key: key, value: newValue)
                }
            } else {
                removeValue(forKey: key)
            }
        }
    }

    /// Removes the member named `key` and returns its value, or returns nil if there is none.
    @discardableResult
    package mutating func removeValue(forKey key: String) -> JSONValue? {
        guard let position = position(of: key) else { return nil }
        let removed = members.remove(at: position).value
        rebuildIndex()
        return removed
    }

    /// Whether a member named `key` exists.
    package func contains(key: String) -> Bool {
        position(of: key) != nil
    }

    /// Appends a member whose key the caller has checked is absent (the parser checks before
    /// parsing the value, so that the error points at the key).
    mutating func appendNew(key: String, value: JSONValue) {
        members.append((key: key, value: value))
        if index != nil {
            index?[key] = members.count - 1
        } else if members.count > Self.linearSearchLimit {
            rebuildIndex()
        }
    }

    private func position(of key: String) -> Int? {
        if let index { return index[key] }
        for position in members.indices where members[position].key == key {
            return position
        }
        return nil
    }

    private mutating func rebuildIndex() {
        guard members.count > Self.linearSearchLimit else {
            index = nil
            return
        }
        var index: [String: Int] = [:]
        index.reserveCapacity(members.count)
        for (position, member) in members.enumerated() {
            index[member.key] = position
        }
        self.index = index
    }
}

extension JSONObject: RandomAccessCollection {
    package var startIndex: Int { members.startIndex }
    package var endIndex: Int { members.endIndex }
    package subscript(position: Int) -> Member { members[position] }
}

extension JSONObject: Equatable {
    package static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        // Keys are unique on both sides, so equal counts plus every lhs member found in rhs
        // with an equal value means the same set of members.
        guard lhs.count == rhs.count else { return false }
        for member in lhs.members {
            guard let other = rhs[member.key], other == member.value else { return false }
        }
        return true
    }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    /// Builds an object in the order written; a repeated key traps, as it does for `Dictionary`.
    package init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(uniqueKeysWithValues: elements)
    }
}

extension JSONObject: CustomStringConvertible {
    /// The compact serialization, so objects read well in test failures and logs.
    package var description: String { JSONValue.object(self).serialized() }
}
