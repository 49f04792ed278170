import Foundation

/// The rule for names a person reads and compares: region ids, region names and vehicle names (subjects).
///
/// A name is compared in Unicode normalization form C, so "café" typed precomposed and "café" typed as
/// `e` and a combining accent are one name, and a backup exported and imported again cannot hold both.
/// Characters that change how a name looks without being seen are refused, not escaped: control
/// characters (NUL, newline, ESC: a log line or terminal is not theirs to steer), bidi controls
/// (U+202E makes "gpj.exe" read as "exe.jpg"), format characters and every Unicode
/// `Default_Ignorable_Code_Point` (U+200B, U+034F, U+FE0F, U+3164, U+115F, U+FFA0, U+17B4, ...: each makes
/// two names that print alike differ).
package enum VisibleName {
    /// `text` in normalization form C (ASCII, the usual case, is returned as is without a look-up).
    package static func normalized(_ text: String) -> String {
        if text.utf8.allSatisfy({ $0 < 0x80 }) { return text }
        return text.precomposedStringWithCanonicalMapping
    }

    /// What is wrong with `text` by this rule ("contains a bidi control character (U+202E)"), or nil.
    package static func problem(_ text: String) -> String? {
        // Printable ASCII needs no look-up of Unicode properties.
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return nil }
        for scalar in text.unicodeScalars {
            let code = "U+" + String(scalar.value, radix: 16, uppercase: true).leftPadded(to: 4)
            switch scalar.value {
            case 0x202A...0x202E, 0x2066...0x2069, 0x200E, 0x200F, 0x061C:
                return "contains a bidi control character (\(code)), which can make it read as another name"
            default: break
            }
            switch scalar.properties.generalCategory {
            case .control:
                return "contains a control character (\(code))"
            case .format, .lineSeparator, .paragraphSeparator:
                return "contains an invisible character (\(code)), which can make it pass for another name"
            default:
                // Fillers (U+3164, U+115F, U+FFA0), variation selectors, U+034F, U+17B4, ...: letters and marks
                // by category, yet shown as nothing.
                if scalar.properties.isDefaultIgnorableCodePoint {
                    return "contains an invisible character (\(code)), which can make it pass for another name"
                }
            }
        }
        return nil
    }
}

/// The rule for a vehicle's name (a fleet line's `device`, a region's `subjects`, the subject of events).
///
/// A name is taken in NFC; a name that breaks the rule is refused, never escaped or renamed: a fleet line
/// with one is counted (`bad-device`) and skipped, so what reaches events, hooks' environment and their
/// stdin is the same text everywhere. For the one place where even a clean name is not safe as it is, an
/// MQTT or NATS topic (`/`, `+`, `#`, `.`, `*`, `>` mean something there), hooks get it percent-encoded too.
package enum SubjectName {
    /// The longest name taken, in bytes of UTF-8.
    package static let maximumBytes = 256

    /// What is wrong with a vehicle name, or nil: empty, too long, or breaking `VisibleName`'s rule.
    package static func problem(_ name: String) -> String? {
        if let problem = lengthProblem(name) { return problem }
        return VisibleName.problem(name)
    }

    /// `problem` for a name its reader has already found to be printable ASCII (bytes 0x20-0x7E: nothing for
    /// `VisibleName` to refuse, and already in NFC): only its length can be wrong.
    package static func lengthProblem(_ name: String) -> String? {
        if name.isEmpty { return "is empty" }
        if name.utf8.count > maximumBytes { return "is longer than \(maximumBytes) bytes" }
        return nil
    }

    /// `text` as one topic level: every byte but `A-Z a-z 0-9 - _ ~` as `%XX`, so no MQTT (`/ + #`) or NATS
    /// (`. * >`) wildcard or separator and no space survives, and `%` itself is encoded.
    package static func topicLevel(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

/// The one escaping of outside text for a terminal or a log line: whatever a name, a topic, a payload or a
/// stored string holds, what reaches an operator's screen is printable text.
///
/// Control characters (ESC, BEL, CR, NUL, C1), bidi controls and other format characters, line and
/// paragraph separators and every `Default_Ignorable_Code_Point` are written as JSON writes them: `\n`,
/// `\r`, `\t`, else `\u001B` (a scalar beyond U+FFFF as its UTF-16 surrogate pair, `\uDB40\uDC01`). So a JSON
/// line passed through it is the same JSON, and human output shows `\u202E` where the text would have turned
/// the line around. Everything else, backslashes included, is left as it is.
package enum PrintableText {
    /// `text` with every character outside printable text escaped; with `keepingLineBreaks`, `\n` and `\t`
    /// stay as they are (a block of several lines, a table).
    package static func escaped(_ text: String, keepingLineBreaks: Bool = false) -> String {
        let clean = text.utf8.allSatisfy { byte in
            (byte >= 0x20 && byte < 0x7F)
                || (keepingLineBreaks && (byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\t")))
        }
        if clean { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if keepingLineBreaks && (scalar == "\n" || scalar == "\t") {
                out.append(scalar)
                continue
            }
            guard needsEscape(scalar) else {
                out.append(scalar)
                continue
            }
            switch scalar {
            case "\n": out.append(contentsOf: "\\n".unicodeScalars)
            case "\r": out.append(contentsOf: "\\r".unicodeScalars)
            case "\t": out.append(contentsOf: "\\t".unicodeScalars)
            default:
                for unit in String(scalar).utf16 {
                    let hex = String(unit, radix: 16, uppercase: true)
                    out.append(contentsOf: ("\\u" + String(repeating: "0", count: 4 - hex.count) + hex).unicodeScalars)
                }
            }
        }
        return String(out)
    }

    /// Whether `scalar` is escaped by `escaped(_:)`.
    package static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.value >= 0x20 && scalar.value < 0x7F { return false }
        if scalar.value < 0xA0 { return true }  // C0, DEL, C1
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate: return true
        default: return scalar.properties.isDefaultIgnorableCodePoint
        }
    }
}
