/// Strict parsing of numbers typed by a user (command-line values, config): decimal only,
/// finite, no surrounding spaces, no units, no hexadecimal.
///
/// `Double("0x10")`, `Double("nan")` and `Double("inf")` all succeed in Swift; a radius or a
/// latitude given that way is a mistake, so this parser refuses them with a message that says
/// what to write instead.
package enum NumberParser {
    static let accepted = "expected a decimal number like 200, -0.1246 or 1e3"

    /// Parses a finite decimal number: optional sign, digits with an optional fraction, an
    /// optional exponent (`51.5007`, `-0.1246`, `1e3`, `.5`).
    package static func finite(_ text: String) throws(ValueError) -> Double {
        try checkShape(text)
        guard isDecimal(Array(text.utf8)) else {
            throw ValueError("'\(text)' is not a number; \(accepted)")
        }
        guard let value = Double(text), value.isFinite else {
            throw ValueError("'\(text)' is too large to be a number")
        }
        return value
    }

    /// Parses a whole number in decimal (`10`, `-3`), rejecting fractions and overflow.
    package static func integer(_ text: String) throws(ValueError) -> Int {
        try checkShape(text)
        let bytes = Array(text.utf8)
        let digits =
            bytes.first == UInt8(ascii: "-") || bytes.first == UInt8(ascii: "+") ? bytes.dropFirst() : bytes[...]
        guard !digits.isEmpty, digits.allSatisfy(\.isASCIIDigit) else {
            if isDecimal(bytes) {
                throw ValueError("'\(text)' is not a whole number; expected digits only, like 10")
            }
            throw ValueError("'\(text)' is not a number; expected a whole number like 10")
        }
        guard let value = Int(text) else {
            throw ValueError("'\(text)' is too large; the limit is \(Int.max)")
        }
        return value
    }

    /// Rejects the inputs `Double.init` would take but a user almost never means.
    private static func checkShape(_ text: String) throws(ValueError) {
        guard let first = text.utf8.first, let last = text.utf8.last else {
            throw ValueError("empty value; \(accepted)")
        }
        if first.isASCIIWhitespace || last.isASCIIWhitespace {
            throw ValueError("'\(text)' has spaces around it; \(accepted)")
        }
        var unsigned = Substring(text.lowercased())
        if unsigned.first == "-" || unsigned.first == "+" { unsigned = unsigned.dropFirst() }
        if unsigned == "nan" || unsigned == "inf" || unsigned == "infinity" || unsigned == "snan" {
            throw ValueError("'\(text)' is not a finite number; \(accepted)")
        }
        if unsigned.hasPrefix("0x") {
            throw ValueError("'\(text)' is hexadecimal; \(accepted)")
        }
    }

    /// `[+-]? (digits [. digits*] | . digits) ([eE] [+-]? digits)?`
    private static func isDecimal(_ bytes: [UInt8]) -> Bool {
        var i = 0
        let n = bytes.count
        if i < n && (bytes[i] == UInt8(ascii: "-") || bytes[i] == UInt8(ascii: "+")) { i += 1 }
        var mantissaDigits = 0
        while i < n && bytes[i].isASCIIDigit {
            i += 1
            mantissaDigits += 1
        }
        if i < n && bytes[i] == UInt8(ascii: ".") {
            i += 1
            while i < n && bytes[i].isASCIIDigit {
                i += 1
                mantissaDigits += 1
            }
        }
        guard mantissaDigits > 0 else { return false }
        if i < n && (bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E")) {
            i += 1
            if i < n && (bytes[i] == UInt8(ascii: "-") || bytes[i] == UInt8(ascii: "+")) { i += 1 }
            var exponentDigits = 0
            while i < n && bytes[i].isASCIIDigit {
                i += 1
                exponentDigits += 1
            }
            guard exponentDigits > 0 else { return false }
        }
        return i == n
    }
}
