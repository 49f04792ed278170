/// Entry points of the strict JSON reader: whole documents into `JSONValue`, and a streaming walk
/// over one object's members for the gpsd hot path.
///
/// Input must be RFC 8259 JSON in UTF-8: no comments, trailing commas, `NaN`/`Infinity`, leading
/// zeros, lone surrogates, unescaped control characters or invalid UTF-8; whitespace may surround
/// the value but nothing else may follow it. A byte order mark is rejected. Numbers must fit a
/// Double (`1e999` is an error, `1e-999` reads as 0). Nesting is limited to `maximumDepth`. Every
/// failure is a `JSONParseError` with its position; nothing traps, whatever the input.
package enum JSON {
    /// How deeply arrays and objects may nest; deeper input is an error. Parsing does not
    /// recurse, but freeing, comparing and writing a value do, so a bound keeps every value
    /// cheap on any thread's stack. Real documents (gpsd reports, regions files) nest 3 or 4.
    package static let maximumDepth = 512

    /// Parses a complete JSON document.
    package static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(text.utf8)
    }

    /// Parses a complete JSON document from UTF-8 bytes (`[UInt8]`, `ArraySlice`, `Data`,
    /// `Substring.UTF8View`...). Contiguous collections are read in place; others are copied once.
    package static func parse(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> JSONValue {
        var value = JSONValue.null
        try withContiguousBytes(bytes) { buffer throws(JSONParseError) in
            var parser = JSONParser(bytes: buffer)
            value = try parser.parseDocument()
        }
        return value
    }

    /// Calls `body` with each member of the top-level object in `text`, in document order.
    ///
    /// For hot paths such as decoding gpsd TPV lines: no dictionary or member array is built, and
    /// a line of short keys and numbers allocates nothing but its long strings. The input is
    /// checked exactly as `parse` checks it (duplicate keys included); nested arrays and objects
    /// arrive parsed. If the input is invalid, `body` may already have seen the members before
    /// the error, so collect into locals and use them only once this returns.
    package static func forEachMember(
        in text: String,
        _ body: (_ key: String, _ value: JSONValue) -> Void
    ) throws(JSONParseError) {
        try forEachMember(in: text.utf8, body)
    }

    /// `forEachMember(in:_:)` for UTF-8 bytes, e.g. a line sliced from a read buffer.
    package static func forEachMember(
        in bytes: some Collection<UInt8>,
        _ body: (_ key: String, _ value: JSONValue) -> Void
    ) throws(JSONParseError) {
        try withContiguousBytes(bytes) { buffer throws(JSONParseError) in
            var parser = JSONParser(bytes: buffer)
            try parser.parseMembers { key, value in body(key.string, value) }
        }
    }

    /// Calls `body` with each member of the top-level object whose key `keys` lists, in document
    /// order; other members are checked and skipped.
    ///
    /// The fastest way to decode a known record such as a gpsd TPV: keys are matched without
    /// making strings, and `body` can `switch` over an enum. Input is checked exactly as by
    /// `parse` (duplicate keys included, listed or not), and as with `forEachMember(in:_:)`,
    /// `body` may have seen members before an error is thrown.
    @inlinable  // specialized for `Key` in the caller, so the per-member step is not generic
    package static func forEachMember<Key>(
        in bytes: some Collection<UInt8>,
        matching keys: JSONKeyTable<Key>,
        _ body: (_ key: Key, _ value: JSONValue) -> Void
    ) throws(JSONParseError) {
        try forEachMember(in: bytes, matching: keys.index) { position, value in body(keys.keys[position], value) }
    }

    @usableFromInline
    static func forEachMember(
        in bytes: some Collection<UInt8>,
        matching index: JSONKeyIndex,
        _ body: (Int, JSONValue) -> Void
    ) throws(JSONParseError) {
        try withContiguousBytes(bytes) { buffer throws(JSONParseError) in
            var parser = JSONParser(bytes: buffer)
            try parser.parseMembers { rawKey, value in
                if let position = index.position(of: rawKey) { body(position, value) }
            }
        }
    }

    /// `forEachMember(in:matching:_:)` for a string.
    @inlinable
    package static func forEachMember<Key>(
        in text: String,
        matching keys: JSONKeyTable<Key>,
        _ body: (_ key: Key, _ value: JSONValue) -> Void
    ) throws(JSONParseError) {
        try forEachMember(in: text.utf8, matching: keys, body)
    }

    /// Runs `body` on the bytes in place when the collection is contiguous, else on a copy.
    ///
    /// `withContiguousStorageIfAvailable` only rethrows untyped errors, so the typed error is
    /// carried out in a local. Nothing here is generic but the collection: a generic result
    /// type (or a `Result`) made every call look up type metadata at run time, a measurable
    /// cost per gpsd line.
    private static func withContiguousBytes(
        _ bytes: some Collection<UInt8>,
        _ body: (UnsafeBufferPointer<UInt8>) throws(JSONParseError) -> Void
    ) throws(JSONParseError) {
        var failure: JSONParseError?
        let done: Void? = bytes.withContiguousStorageIfAvailable { buffer in
            do throws(JSONParseError) {
                try body(buffer)
            } catch {
                failure = error
            }
        }
        if done == nil {
            Array(bytes).withUnsafeBufferPointer { buffer in
                do throws(JSONParseError) {
                    try body(buffer)
                } catch {
                    failure = error
                }
            }
        }
        if let failure { throw failure }
    }
}
