/// The strict RFC 8259 parser behind `JSON.parse` and `JSON.forEachMember`.
///
/// It reads a byte buffer that the caller keeps alive for the parser's lifetime. Every read
/// checks `position < end` first: the buffer's subscript is unchecked in release builds, and this
/// code is fuzzed with truncated and random input. It does not recurse (see `parseValue`), and
/// nesting is bounded by `JSON.maximumDepth`, so hostile input ends in an error, never a crash.
struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    let end: Int
    var position = 0
    /// Reused for strings with escapes so each does not allocate its own buffer.
    private var scratch: [UInt8] = []

    init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        self.end = bytes.count
    }

    /// Parses one value surrounded by optional whitespace, and nothing else.
    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue(depth: 0)
        try expectEndOfInput()
        return value
    }

    /// Walks the members of a top-level object, handing each to `body` as soon as it is parsed,
    /// without building the object. Duplicate keys are still rejected (see `KeyTracker`).
    mutating func parseMembers(_ body: (RawKey, JSONValue) -> Void) throws(JSONParseError) {
        skipWhitespace()
        guard position < end, bytes[position] == .openBrace else {
            if position < end, isValueStart(bytes[position]) {
                throw error("expected a JSON object", at: position)
            }
            throw unexpectedValueStart()
        }
        position += 1
        skipWhitespace()
        if position < end, bytes[position] == .closeBrace {
            position += 1
            try expectEndOfInput()
            return
        }
        try withUnsafeTemporaryAllocation(of: PackedKey.self, capacity: KeyTracker.inlineCapacity) {
            (storage) throws(JSONParseError) in
            var keys = KeyTracker(storage: storage)
            while true {
                let key = try parseRawKey()
                if !keys.insert(key) {
                    throw error("duplicate key \(quoted(key.string))", at: key.start)
                }
                try expectColon()
                // depth 1: the members of this object are inside one level of nesting.
                body(key, try parseValue(depth: 1))
                if try endOfMembers() { break }
            }
        }
        try expectEndOfInput()
    }

    // MARK: - Values

    /// One value at `position`, inside `depth` enclosing containers.
    ///
    /// Iterative, with the open containers on explicit stacks rather than the call stack: the
    /// deepest accepted document then needs no more stack in a debug or sanitizer build (where
    /// frames are kilobytes) than in release, on any thread. A scalar allocates no stack at all.
    private mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        // Scalars (most gpsd members) skip the container machinery and its arrays.
        if position < end, bytes[position] != .openBracket, bytes[position] != .openBrace {
            return try parseScalar()
        }
        return try parseContainer(depth: depth)
    }

    private mutating func parseContainer(depth: Int) throws(JSONParseError) -> JSONValue {
        var open: [ContainerKind] = []
        var arrays: [[JSONValue]] = []
        var objects: [JSONObject] = []
        var keys: [String] = []  // the key each open object's next value belongs to

        nextValue: while true {
            guard position < end else { throw error("unexpected end of input; expected a value", at: position) }
            var value: JSONValue
            switch bytes[position] {
            case .openBracket:
                guard depth + open.count < JSON.maximumDepth else { throw tooDeep() }
                position += 1
                skipWhitespace()
                if position < end, bytes[position] == .closeBracket {
                    position += 1
                    value = .array([])
                } else {
                    open.append(.array)
                    arrays.append([])
                    continue nextValue
                }
            case .openBrace:
                guard depth + open.count < JSON.maximumDepth else { throw tooDeep() }
                position += 1
                skipWhitespace()
                if position < end, bytes[position] == .closeBrace {
                    position += 1
                    value = .object(JSONObject())
                } else {
                    open.append(.object)
                    objects.append(JSONObject())
                    keys.append(try parseKey())
                    try expectColon()
                    continue nextValue
                }
            default:
                value = try parseScalar()
            }

            // Hand the value to the innermost open container; each container that this closes
            // becomes in turn the value for the one around it.
            while let kind = open.last {
                switch kind {
                case .array:
                    arrays[arrays.count - 1].append(value)
                    skipWhitespace()
                    guard position < end else { throw unexpected("',' or ']' after an array element") }
                    switch bytes[position] {
                    case .comma:
                        position += 1
                        skipWhitespace()
                        if position < end, bytes[position] == .closeBracket {
                            throw error("trailing comma before ']'", at: position)
                        }
                        continue nextValue
                    case .closeBracket:
                        position += 1
                        open.removeLast()
                        value = .array(arrays.removeLast())
                    default:
                        throw unexpected("',' or ']' after an array element")
                    }
                case .object:
                    objects[objects.count - 1].appendNew(key: keys.removeLast(), value: value)
                    if try endOfMembers() {
                        open.removeLast()
                        value = .object(objects.removeLast())
                    } else {
                        let keyStart = position
                        let key = try parseKey()
                        // Checked before the value so the error points at the second key.
                        if objects[objects.count - 1].contains(key: key) {
                            throw error("duplicate key \(quoted(key))", at: keyStart)
                        }
                        keys.append(key)
                        try expectColon()
                        continue nextValue
                    }
                }
            }
            return value
        }
    }

    /// A string, number or literal at `position` (which is before the end).
    private mutating func parseScalar() throws(JSONParseError) -> JSONValue {
        switch bytes[position] {
        case .quote:
            return .string(try parseString())
        case .minus, .digit0...UInt8(ascii: "9"):
            return .number(try parseNumber())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        default:
            throw unexpectedValueStart()
        }
    }

    private enum ContainerKind {
        case array
        case object
    }

    private func tooDeep() -> JSONParseError {
        error("nesting deeper than \(JSON.maximumDepth) levels", at: position)
    }

    /// A member's key, at `position` after optional whitespace has been skipped by the caller.
    private mutating func parseKey() throws(JSONParseError) -> String {
        guard position < end, bytes[position] == .quote else { throw missingKey() }
        return try parseString()
    }

    private func missingKey() -> JSONParseError {
        if position < end, bytes[position] == UInt8(ascii: "'") {
            return error("strings must use double quotes", at: position)
        }
        return unexpected("a string key")
    }

    private mutating func expectColon() throws(JSONParseError) {
        skipWhitespace()
        guard position < end, bytes[position] == .colon else { throw unexpected("':' after an object key") }
        position += 1
        skipWhitespace()
    }

    /// After a member's value: consumes `,` (returning false, more to come) or `}` (returning true).
    private mutating func endOfMembers() throws(JSONParseError) -> Bool {
        skipWhitespace()
        guard position < end else { throw unexpected("',' or '}' after an object member") }
        switch bytes[position] {
        case .comma:
            position += 1
            skipWhitespace()
            if position < end, bytes[position] == .closeBrace {
                throw error("trailing comma before '}'", at: position)
            }
            return false
        case .closeBrace:
            position += 1
            return true
        default:
            throw unexpected("',' or '}' after an object member")
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let start = position
        let count = literal.utf8CodeUnitCount
        let matches =
            end - position >= count
            && literal.withUTF8Buffer { expected in
                expected.elementsEqual(UnsafeBufferPointer(rebasing: bytes[position..<(position + count)]))
            }
        guard matches else {
            throw error("invalid literal \(quotedWord(at: start)); expected '\(literal)'", at: start)
        }
        position += count
    }

    private mutating func expectEndOfInput() throws(JSONParseError) {
        skipWhitespace()
        if position < end {
            if bytes[position] == .slash { throw error("comments are not allowed in JSON", at: position) }
            throw error("unexpected \(describe(bytes[position])) after the JSON value", at: position)
        }
    }

    @inline(__always)
    private mutating func skipWhitespace() {
        while position < end {
            switch bytes[position] {
            case .space, .newline, .carriageReturn, .tab:
                position += 1
            default:
                return
            }
        }
    }

    // MARK: - Strings

    /// A string starting at the opening quote at `position`; leaves `position` after the closing one.
    fileprivate mutating func parseString() throws(JSONParseError) -> String {
        let open = position
        position += 1
        let start = position
        // Fast path: no escapes, so the bytes between the quotes are the string.
        while position < end {
            let byte = bytes[position]
            if byte == .quote {
                let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
                position += 1
                return text
            } else if byte == .backslash {
                return try parseEscapedString(open: open, start: start)
            } else if byte < 0x20 {
                throw controlCharacterError(byte)
            } else if byte >= 0x80 {
                try skipUTF8Sequence()
            } else {
                position += 1
            }
        }
        throw error("unterminated string", at: open)
    }

    /// The rest of a string after its first backslash, decoded through `scratch`.
    private mutating func parseEscapedString(open: Int, start: Int) throws(JSONParseError) -> String {
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<position]))
        while position < end {
            let byte = bytes[position]
            if byte == .quote {
                position += 1
                return String(decoding: scratch, as: UTF8.self)
            } else if byte == .backslash {
                try parseEscape(open: open)
            } else if byte < 0x20 {
                throw controlCharacterError(byte)
            } else if byte >= 0x80 {
                let sequenceStart = position
                try skipUTF8Sequence()
                scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[sequenceStart..<position]))
            } else {
                scratch.append(byte)
                position += 1
            }
        }
        throw error("unterminated string", at: open)
    }

    /// One escape sequence at `position` (on the backslash), appended to `scratch` as UTF-8.
    private mutating func parseEscape(open: Int) throws(JSONParseError) {
        let escapeStart = position
        position += 1
        guard position < end else { throw error("unterminated string", at: open) }
        let letter = bytes[position]
        position += 1
        switch letter {
        case .quote, .backslash, .slash: scratch.append(letter)
        case UInt8(ascii: "b"): scratch.append(0x08)
        case UInt8(ascii: "f"): scratch.append(0x0C)
        case UInt8(ascii: "n"): scratch.append(.newline)
        case UInt8(ascii: "r"): scratch.append(.carriageReturn)
        case UInt8(ascii: "t"): scratch.append(.tab)
        case UInt8(ascii: "u"):
            let unit = try parseHex4(escapeStart: escapeStart)
            switch unit {
            case 0xD800...0xDBFF:
                // A high surrogate is only valid as the first half of a \uXXXX\uXXXX pair.
                let lowStart = position
                guard end - position >= 2, bytes[position] == .backslash, bytes[position + 1] == UInt8(ascii: "u")
                else {
                    throw error(
                        "lone surrogate \(escapeText(unit)) (a high surrogate must be followed by a low one)",
                        at: escapeStart)
                }
                position += 2
                let low = try parseHex4(escapeStart: lowStart)
                guard (0xDC00...0xDFFF).contains(low) else {
                    throw error(
                        "lone surrogate \(escapeText(unit)) (followed by \(escapeText(low)), not a low surrogate)",
                        at: escapeStart)
                }
                appendUTF8(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
            case 0xDC00...0xDFFF:
                throw error("lone surrogate \(escapeText(unit)) (a low surrogate without a high one)", at: escapeStart)
            default:
                appendUTF8(unit)
            }
        default:
            let shown = letter >= 0x20 && letter < 0x7F ? "'\\\(Character(Unicode.Scalar(letter)))'" : describe(letter)
            throw error(
                "invalid escape \(shown); valid ones are \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX", at: escapeStart)
        }
    }

    /// The four hex digits after `\u`, at `position`.
    private mutating func parseHex4(escapeStart: Int) throws(JSONParseError) -> UInt32 {
        guard end - position >= 4 else {
            throw error("invalid \\u escape: expected 4 hex digits", at: escapeStart)
        }
        var value: UInt32 = 0
        for offset in 0..<4 {
            let byte = bytes[position + offset]
            let digit: UInt8
            switch byte {
            case .digit0...UInt8(ascii: "9"): digit = byte - .digit0
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("invalid \\u escape: expected 4 hex digits", at: escapeStart)
            }
            value = value << 4 | UInt32(digit)
        }
        position += 4
        return value
    }

    private mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case ..<0x80:
            scratch.append(UInt8(scalar))
        case ..<0x800:
            scratch.append(UInt8(0xC0 | scalar >> 6))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        case ..<0x10000:
            scratch.append(UInt8(0xE0 | scalar >> 12))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        default:
            scratch.append(UInt8(0xF0 | scalar >> 18))
            scratch.append(UInt8(0x80 | scalar >> 12 & 0x3F))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        }
    }

    /// Steps over one well-formed UTF-8 sequence whose lead byte (>= 0x80) is at `position`.
    ///
    /// Checked here rather than left to `String(decoding:)`, which would silently substitute
    /// U+FFFD: we want an error with the offset of the bad byte. Overlong forms, surrogates
    /// (ED A0..BF) and code points above U+10FFFF are rejected, per the Unicode table 3-7.
    private mutating func skipUTF8Sequence() throws(JSONParseError) {
        let lead = bytes[position]
        let trailing: Int
        var lowest: UInt8 = 0x80
        var highest: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: trailing = 1
        case 0xE0: (trailing, lowest) = (2, 0xA0)
        case 0xE1...0xEC, 0xEE...0xEF: trailing = 2
        case 0xED: (trailing, highest) = (2, 0x9F)
        case 0xF0: (trailing, lowest) = (3, 0x90)
        case 0xF1...0xF3: trailing = 3
        case 0xF4: (trailing, highest) = (3, 0x8F)
        default: throw error("invalid UTF-8 byte \(hex(lead))", at: position)
        }
        guard end - position > trailing else {
            throw error("truncated UTF-8 sequence starting with byte \(hex(lead))", at: position)
        }
        let second = bytes[position + 1]
        guard second >= lowest, second <= highest else {
            throw error("invalid UTF-8 byte \(hex(second)) after \(hex(lead))", at: position + 1)
        }
        for offset in stride(from: 2, through: trailing, by: 1) where bytes[position + offset] & 0xC0 != 0x80 {
            throw error("invalid UTF-8 byte \(hex(bytes[position + offset])) after \(hex(lead))", at: position + offset)
        }
        position += trailing + 1
    }

    /// A member's key for `parseMembers`, without making a string of it when it is short ASCII.
    ///
    /// Accepts and rejects exactly what `parseKey` does, with the same errors: anything but
    /// plain ASCII (escapes, non-ASCII, control characters) is handed to `parseString`.
    private mutating func parseRawKey() throws(JSONParseError) -> RawKey {
        guard position < end, bytes[position] == .quote else { throw missingKey() }
        let open = position
        var index = open + 1
        while index < end {
            let byte = bytes[index]
            // 0x20...0x7F except quote and backslash: an ordinary key byte.
            if byte &- 0x20 < 0x60, byte != .quote, byte != .backslash {
                index += 1
                continue
            }
            guard byte == .quote else { break }
            position = index + 1
            return RawKey(
                start: open, packed: packKey(from: open + 1, count: index - open - 1),
                quoted: UnsafeBufferPointer(rebasing: bytes[open..<position]), escaped: false)
        }
        position = open
        let key = try parseString()
        let quoted = UnsafeBufferPointer(rebasing: bytes[open..<position])
        return RawKey(
            start: open, packed: PackedKey(ascii: key.utf8), quoted: quoted, escaped: quoted.contains(.backslash))
    }

    /// The ASCII key at `start` packed (nil if longer than 15 bytes), read a word at a time when
    /// the buffer extends far enough past it.
    private func packKey(from start: Int, count: Int) -> PackedKey? {
        guard count <= PackedKey.maximumLength else { return nil }
        guard end - start >= 16, let base = bytes.baseAddress else {
            return PackedKey(ascii: UnsafeBufferPointer(rebasing: bytes[start..<(start + count)]))
        }
        let words = UnsafeRawPointer(base + start)
        var low = UInt64(littleEndian: words.loadUnaligned(as: UInt64.self))
        var high = UInt64(littleEndian: words.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        // Keep only the key's bytes: what follows it (the quote, the colon...) is not the key.
        if count < 8 {
            low &= (1 &<< (8 &* UInt64(count))) &- 1
            high = 0
        } else {
            high &= (1 &<< (8 &* UInt64(count &- 8))) &- 1
        }
        return PackedKey(low: low, high: high | UInt64(count) &<< 56)
    }

    // MARK: - Numbers

    /// A number at `position` (on `-` or a digit).
    ///
    /// The grammar is checked byte by byte. The value comes from the exact fast path when the
    /// digits fit in 53 bits and the power of ten is at most 22 (both are then exact doubles, so
    /// one IEEE multiply or divide is correctly rounded: Clinger 1990) — true for all gpsd
    /// output. Anything else goes to the standard library's correctly rounded `Double(_:)`.
    mutating func parseNumber() throws(JSONParseError) -> Double {
        let start = position
        var negative = false
        if bytes[position] == .minus {
            negative = true
            position += 1
            guard position < end, bytes[position] &- .digit0 < 10 else {
                if position < end, bytes[position] == UInt8(ascii: "I") {
                    throw error("-Infinity is not valid JSON; numbers must be finite", at: start)
                }
                throw error("expected a digit after '-'", at: position)
            }
        }
        var mantissa: UInt64 = 0
        // Digits seen; past 19 the mantissa stops accumulating and only the slow path is exact.
        var digitCount = 0
        var exponent = 0
        if bytes[position] == .digit0 {
            position += 1
            if position < end, bytes[position] &- .digit0 < 10 {
                throw error("leading zeros are not allowed in numbers", at: start)
            }
        } else {
            while position < end {
                let digit = bytes[position] &- .digit0
                guard digit < 10 else { break }
                if digitCount < 19 { mantissa = mantissa &* 10 &+ UInt64(digit) }
                digitCount += 1
                position += 1
            }
        }
        if position < end, bytes[position] == .dot {
            position += 1
            guard position < end, bytes[position] &- .digit0 < 10 else {
                throw error("expected a digit after the decimal point", at: position)
            }
            while position < end {
                let digit = bytes[position] &- .digit0
                guard digit < 10 else { break }
                if digitCount < 19 {
                    mantissa = mantissa &* 10 &+ UInt64(digit)
                    exponent -= 1
                }
                digitCount += 1
                position += 1
            }
        }
        if position < end, bytes[position] | 0x20 == UInt8(ascii: "e") {
            position += 1
            var exponentNegative = false
            if position < end, bytes[position] == .minus || bytes[position] == .plus {
                exponentNegative = bytes[position] == .minus
                position += 1
            }
            guard position < end, bytes[position] &- .digit0 < 10 else {
                throw error("expected a digit in the exponent", at: position)
            }
            var written = 0
            while position < end {
                let digit = bytes[position] &- .digit0
                guard digit < 10 else { break }
                // Saturate: any exponent this large is out of range or zero, and the slow path
                // sees the original text anyway.
                if written < 1_000_000 { written = written * 10 + Int(digit) }
                position += 1
            }
            exponent += exponentNegative ? -written : written
        }
        if digitCount <= 19, let value = Self.decimal(mantissa, exponent: exponent) {
            return negative ? -value : value
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            throw error("number out of range", at: start)
        }
        return value
    }

    /// The double nearest to `mantissa` · 10^`exponent` (at most 19 digits), as `parseNumber` reads it when the
    /// fast path or `nearestQuotient` can; nil when only `Double(_:)` can say.
    @inline(__always)
    static func decimal(_ mantissa: UInt64, exponent: Int) -> Double? {
        if mantissa <= 1 << 53, exponent >= -22, exponent <= 22 {
            var value = Double(mantissa)
            if exponent < 0 {
                value /= exactPowersOfTen[-exponent]
            } else if exponent > 0 {
                value *= exactPowersOfTen[exponent]
            }
            return value
        }
        guard exponent < 0, exponent >= -22 else { return nil }
        return nearestQuotient(mantissa, tenTo: -exponent)
    }

    /// The double nearest to `w` / 10^`k` (1 ≤ k ≤ 22), when 128-bit integers prove it; nil when they cannot (a
    /// tie, a result below about 2⁻¹⁰ or at a power of two), for the standard library's `Double(_:)` to decide.
    ///
    /// For the digits the fast path above cannot take: 17 to 19 significant digits, as Swift and JavaScript print
    /// a double's shortest form. `Double(w) / 10^k` rounds twice, so it is within about an ulp of the answer;
    /// of it and its two neighbours, the answer is the one within half an ulp of w / 10^k, which is decided
    /// exactly: x = M·2^E is nearest when |w·2^(1−E) − 2M·10^k| < 10^k (M < 2^53 and 10^k < 2^74, so 2M·10^k <
    /// 2^128; w < 2^64 and 1 − E ≤ 63 are checked).
    static func nearestQuotient(_ w: UInt64, tenTo k: Int) -> Double? {
        guard k >= 1, k <= 22 else { return nil }
        var power: UInt128 = 1
        for _ in 0..<k { power &*= 10 }
        let estimate = Double(w) / exactPowersOfTen[k]
        if isNearest(estimate, w, power) { return estimate }
        if isNearest(estimate.nextDown, w, power) { return estimate.nextDown }
        if isNearest(estimate.nextUp, w, power) { return estimate.nextUp }
        return nil
    }

    /// Whether `x` is within less than half an ulp of `w` / `power` (see `nearestQuotient`).
    @inline(__always)
    private static func isNearest(_ x: Double, _ w: UInt64, _ power: UInt128) -> Bool {
        guard x.isNormal, x > 0 else { return false }
        let m = x.significandBitPattern | 1 &<< 52
        // At a power of two the interval below is half the one above: left to the slow path.
        guard m != 1 &<< 52 else { return false }
        let shift = 1 - (Int(x.exponent) - 52)
        guard shift > 0, shift <= 63 else { return false }
        let scaled = UInt128(w) &<< UInt128(shift)
        let twice = UInt128(2 &* m) &* power
        let difference = scaled > twice ? scaled &- twice : twice &- scaled
        return difference < power
    }

    // MARK: - Errors

    private func error(_ message: String, at offset: Int) -> JSONParseError {
        JSONParseError(message, at: offset, in: bytes)
    }

    /// The error for punctuation or a key missing at `position`; a `/` there is almost always
    /// the start of a comment, so that is what the message says.
    private func unexpected(_ expected: String) -> JSONParseError {
        guard position < end else { return error("unexpected end of input; expected \(expected)", at: position) }
        if bytes[position] == .slash { return error("comments are not allowed in JSON", at: position) }
        return error("expected \(expected), found \(describe(bytes[position]))", at: position)
    }

    private func controlCharacterError(_ byte: UInt8) -> JSONParseError {
        let name = "U+" + hex4(UInt32(byte))
        return error("unescaped control character \(name) in string (write it as an escape)", at: position)
    }

    private func isValueStart(_ byte: UInt8) -> Bool {
        switch byte {
        case .quote, .openBracket, .minus, .digit0...UInt8(ascii: "9"), UInt8(ascii: "t"), UInt8(ascii: "f"),
            UInt8(ascii: "n"):
            return true
        default:
            return false
        }
    }

    /// The error for a byte at `position` that cannot start a value, naming common mistakes.
    private func unexpectedValueStart() -> JSONParseError {
        guard position < end else { return error("unexpected end of input; expected a value", at: position) }
        let byte = bytes[position]
        if position == 0, end >= 3, byte == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF {
            return error("byte order mark (U+FEFF) is not allowed; save the file as UTF-8 without BOM", at: 0)
        }
        switch byte {
        case UInt8(ascii: "N"):
            return error("NaN is not valid JSON; use null for a missing number", at: position)
        case UInt8(ascii: "I"):
            return error("Infinity is not valid JSON; numbers must be finite", at: position)
        case UInt8(ascii: "'"):
            return error("strings must use double quotes", at: position)
        case .slash:
            return error("comments are not allowed in JSON", at: position)
        case .closeBracket, .closeBrace, .comma, .colon:
            return error("unexpected \(describe(byte)); expected a value", at: position)
        default:
            if isLetter(byte) {
                return error("unexpected \(quotedWord(at: position)); expected a value", at: position)
            }
            return error("unexpected \(describe(byte)); expected a value", at: position)
        }
    }

    private func isLetter(_ byte: UInt8) -> Bool {
        (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z")
    }

    /// The run of letters at `start`, quoted and capped so a hostile input cannot bloat the message.
    private func quotedWord(at start: Int) -> String {
        var stop = start
        while stop < end, stop - start < 24, isLetter(bytes[stop]) { stop += 1 }
        if stop == start { return start < end ? describe(bytes[start]) : "end of input" }
        return "'" + String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<stop]), as: UTF8.self) + "'"
    }
}

/// A member key as `JSON.forEachMember` reads it: packed when it is short ASCII, and a string
/// only when someone asks, so that matching against a `JSONKeyTable` never builds one. It is
/// plain data (no references), so passing it around costs no reference counting.
struct RawKey {
    /// Offset of the opening quote, for errors about this key.
    let start: Int
    /// The key packed, when it is ASCII of at most 15 bytes (after decoding escapes).
    let packed: PackedKey?
    /// The key as written, quotes included; valid while the parsed buffer is.
    let quoted: UnsafeBufferPointer<UInt8>
    /// Whether `quoted` holds escapes, so that its bytes are not the key's UTF-8 as they stand.
    let escaped: Bool

    var string: String {
        guard escaped else {
            return String(decoding: UnsafeBufferPointer(rebasing: quoted[1..<(quoted.count - 1)]), as: UTF8.self)
        }
        // Rare: decode again. The text was checked when first read, so this does not fail.
        var parser = JSONParser(bytes: quoted)
        return (try? parser.parseString()) ?? ""
    }
}

/// A byte as a message shows it: `'x'` when printable ASCII, else its hex value.
private func describe(_ byte: UInt8) -> String {
    if byte >= 0x20, byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
    if byte < 0x20 || byte == 0x7F { return "control character U+" + hex4(UInt32(byte)) }
    return "byte \(hex(byte))"
}

/// A key quoted for a message, escaped and cut at 64 characters so hostile keys stay readable.
private func quoted(_ key: String) -> String {
    let shown = key.unicodeScalars.count > 64 ? String(key.unicodeScalars.prefix(64)) + "…" : key
    return JSONValue.string(shown).serialized()
}

private func hex(_ byte: UInt8) -> String {
    let digits = String(byte, radix: 16, uppercase: true)
    return "0x" + (digits.count < 2 ? "0" + digits : digits)
}

private func hex4(_ value: UInt32) -> String {
    let digits = String(value, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}

private func escapeText(_ unit: UInt32) -> String {
    "\\u" + hex4(unit)
}

/// 10^0 ... 10^22: the powers of ten that are exact in a Double, for the fast number path.
private let exactPowersOfTen: [Double] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
]

extension UInt8 {
    fileprivate static var quote: UInt8 { UInt8(ascii: "\"") }
    fileprivate static var backslash: UInt8 { UInt8(ascii: "\\") }
    fileprivate static var slash: UInt8 { UInt8(ascii: "/") }
    fileprivate static var openBrace: UInt8 { UInt8(ascii: "{") }
    fileprivate static var closeBrace: UInt8 { UInt8(ascii: "}") }
    fileprivate static var openBracket: UInt8 { UInt8(ascii: "[") }
    fileprivate static var closeBracket: UInt8 { UInt8(ascii: "]") }
    fileprivate static var comma: UInt8 { UInt8(ascii: ",") }
    fileprivate static var colon: UInt8 { UInt8(ascii: ":") }
    fileprivate static var minus: UInt8 { UInt8(ascii: "-") }
    fileprivate static var plus: UInt8 { UInt8(ascii: "+") }
    fileprivate static var dot: UInt8 { UInt8(ascii: ".") }
    fileprivate static var digit0: UInt8 { UInt8(ascii: "0") }
    fileprivate static var space: UInt8 { UInt8(ascii: " ") }
    fileprivate static var newline: UInt8 { UInt8(ascii: "\n") }
    fileprivate static var carriageReturn: UInt8 { UInt8(ascii: "\r") }
    fileprivate static var tab: UInt8 { UInt8(ascii: "\t") }
}
