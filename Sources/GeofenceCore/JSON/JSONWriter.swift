extension JSONValue {
    /// This value as JSON text: compact on one line by default, or indented by two spaces per
    /// level when `pretty` (for `export` files people read and diff). No trailing newline.
    ///
    /// Output is stable: object members come in insertion order. Strings are escaped minimally
    /// (`\"`, `\\`, and control characters: `\n`, `\t`... or `\u00XX`); everything else, including
    /// non-ASCII, is written as UTF-8. Numbers are the shortest text that reads back as the same
    /// Double, and integral values print without a fraction (`200`, not `200.0`): JSON has one
    /// number type, so `1` and `1.0` are the same value. Non-finite numbers, which JSON cannot
    /// express, are written as `null`.
    package func serialized(pretty: Bool = false) -> String {
        var writer = JSONWriter(pretty: pretty)
        writer.write(self, level: 0)
        return String(decoding: writer.output, as: UTF8.self)
    }
}

extension JSONObject {
    /// The object as JSON text; see `JSONValue.serialized(pretty:)`.
    package func serialized(pretty: Bool = false) -> String {
        JSONValue.object(self).serialized(pretty: pretty)
    }
}

extension EventFix {
    /// The same text as `JSONValue.object(json).serialized()` (members in `json`'s order, numbers written
    /// alike), written straight from the fields: the store keeps every vehicle's last fix as this text, once
    /// per fix, where building the object and walking it cost more than the row's write.
    package var serializedJSON: String {
        var writer = JSONWriter(pretty: false)
        writer.output.reserveCapacity(160)
        writer.append("{\"lat\":")
        writer.writeNumber(latitude)
        writer.append(",\"lon\":")
        writer.writeNumber(longitude)
        writer.append(",\"accuracy\":")
        writer.writeNumber(accuracy)
        if accuracyEstimated { writer.append(",\"accuracyEstimated\":true") }
        writer.append(",\"mode\":")
        writer.writeNumber(Double(mode.rawValue))
        if let speed {
            writer.append(",\"speed\":")
            writer.writeNumber(speed)
        }
        if let course {
            writer.append(",\"course\":")
            writer.writeNumber(course)
        }
        writer.append("}")
        return String(decoding: writer.output, as: UTF8.self)
    }
}

/// Accumulates the UTF-8 of a serialization; `serialized(pretty:)` is its interface.
private struct JSONWriter {
    let pretty: Bool
    var output: [UInt8] = []

    init(pretty: Bool) {
        self.pretty = pretty
    }

    mutating func write(_ value: JSONValue, level: Int) {
        switch value {
        case .null:
            append("null")
        case .bool(let value):
            append(value ? "true" : "false")
        case .number(let value):
            writeNumber(value)
        case .string(let value):
            writeString(value)
        case .array(let elements):
            guard !elements.isEmpty else {
                append("[]")
                return
            }
            output.append(UInt8(ascii: "["))
            for (position, element) in elements.enumerated() {
                if position > 0 { output.append(UInt8(ascii: ",")) }
                startLine(level: level + 1)
                write(element, level: level + 1)
            }
            startLine(level: level)
            output.append(UInt8(ascii: "]"))
        case .object(let object):
            guard !object.isEmpty else {
                append("{}")
                return
            }
            output.append(UInt8(ascii: "{"))
            for (position, member) in object.enumerated() {
                if position > 0 { output.append(UInt8(ascii: ",")) }
                startLine(level: level + 1)
                writeString(member.key)
                append(pretty ? ": " : ":")
                write(member.value, level: level + 1)
            }
            startLine(level: level)
            output.append(UInt8(ascii: "}"))
        }
    }

    /// In pretty mode, a line break and the indentation for `level`; nothing in compact mode.
    private mutating func startLine(level: Int) {
        guard pretty else { return }
        output.append(UInt8(ascii: "\n"))
        output.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * level))
    }

    fileprivate mutating func append(_ text: StaticString) {
        text.withUTF8Buffer { output.append(contentsOf: $0) }
    }

    fileprivate mutating func writeNumber(_ value: Double) {
        guard value.isFinite else {
            append("null")
            return
        }
        // Integral values below 2^53 are exact integers: print them as such. Larger ones (and
        // fractions) use `description`, the shortest round-tripping form, which is valid JSON
        // (`1e+16`, `5e-324`) apart from a trailing `.0` on some integral values.
        if value.rounded(.towardZero) == value, value.magnitude < 9_007_199_254_740_992 {
            if value == 0, value.sign == .minus {
                append("-0")  // keeps the sign through a round trip, like `description`'s "-0.0"
            } else {
                writeInteger(Int64(value))
            }
            return
        }
        if let (digits, fraction) = Self.shortestFixed(value) {
            writeFixed(digits, fraction: fraction, negative: value < 0)
            return
        }
        // The bytes are copied as they are (appending a String's `utf8` goes a byte at a time), without the
        // trailing ".0".
        var text = value.description
        text.withUTF8 { bytes in
            let count = bytes.count
            let point = count >= 2 && bytes[count - 2] == UInt8(ascii: ".") && bytes[count - 1] == UInt8(ascii: "0")
            output.append(contentsOf: point ? UnsafeBufferPointer(rebasing: bytes[..<(count - 2)]) : bytes)
        }
    }

    /// The text `description` gives a number that is not an integer, for the numbers a fix and an event carry
    /// (magnitude 0.0001 to 10^9, at most nine digits after the point), without making a `String` (a fix's row
    /// has five such numbers, and `description` cost about a thousand instructions each): the fewest digits
    /// after the point that read back as `value`, as `digits` × 10^−`fraction`. Nil for anything else, and
    /// wherever a digit is in doubt: `description` writes it then.
    ///
    /// Why it is `description`'s text: for `m` and 10^k exact (below 2^53), `m / 10^k` in floating point is the
    /// double nearest the decimal m·10^−k, which is what reading "m·10^−k" gives; so the text reads back as
    /// `value` exactly when that quotient is `value`. With k the least that works, no text with fewer digits
    /// after the point (and so fewer significant digits) reads back, and `m` is the integer nearest value·10^k
    /// (checked: the product's rounding error, under one unit in its last place, must leave it clear of the
    /// midpoint), the one `description` picks, being the closest to the value of the shortest texts (the reading
    /// interval is symmetric about the value, so when any text with k digits reads back, the nearest does).
    static func shortestFixed(_ value: Double) -> (digits: UInt64, fraction: Int)? {
        let magnitude = value.magnitude
        // A power of two's reading interval is narrower below it than above, where the nearest text may not read
        // back when a farther one does: left to `description`.
        guard magnitude >= 1e-4, magnitude < 1e9, value.significandBitPattern != 0 else { return nil }
        var scale = 1.0
        for fraction in 1...9 {
            scale *= 10
            let scaled = magnitude * scale
            guard scaled < 9_007_199_254_740_992 else { return nil }
            let rounded = scaled.rounded(.toNearestOrEven)
            // Clear of the midpoint by more than the product's error: `rounded` is the nearest integer.
            guard (scaled - rounded).magnitude < 0.5 - 2 * scaled.ulp else { return nil }
            if rounded / scale == magnitude { return (UInt64(rounded), fraction) }
        }
        return nil
    }

    /// Writes `digits` × 10^−`fraction` as `description` does: the integer part (0 when there is none), the
    /// point, then exactly `fraction` digits. Made from the last byte in a buffer on the stack (`digits` is below
    /// 2^53: at most 16 digits, a point and a sign), then appended at once.
    private mutating func writeFixed(_ digits: UInt64, fraction: Int, negative: Bool) {
        var buffer: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &buffer) { bytes in
            var position = bytes.count
            var rest = digits
            for place in 0... {
                if place == fraction {
                    position -= 1
                    bytes[position] = UInt8(ascii: ".")
                }
                position -= 1
                bytes[position] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
                if rest == 0 && place >= fraction { break }
            }
            if negative {
                position -= 1
                bytes[position] = UInt8(ascii: "-")
            }
            output.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[position...]))
        }
    }

    /// `String(value)`'s digits, without making the string.
    private mutating func writeInteger(_ value: Int64) {
        if value < 0 { output.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits = 1
        var rest = magnitude / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        // Room for the digits, then filled from the last (reversing a slice of the array copied it).
        let end = output.count + digits
        output.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: digits))
        output.withUnsafeMutableBufferPointer { bytes in
            var position = end
            repeat {
                position -= 1
                bytes[position] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
        }
    }

    private mutating func writeString(_ string: String) {
        output.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): append("\\\"")
            case UInt8(ascii: "\\"): append("\\\\")
            case UInt8(ascii: "\n"): append("\\n")
            case UInt8(ascii: "\r"): append("\\r")
            case UInt8(ascii: "\t"): append("\\t")
            case 0x08: append("\\b")
            case 0x0C: append("\\f")
            case ..<0x20:
                append("\\u00")
                output.append(hexDigit(byte >> 4))
                output.append(hexDigit(byte & 0x0F))
            default:
                output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }

    private func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
