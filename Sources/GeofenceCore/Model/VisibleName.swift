import Foundation

/// The rule for names a person reads and compares: region ids and vehicle names (subjects).
///
/// A name is compared in Unicode normalization form C, so "café" typed precomposed and "café" typed as
/// `e` and a combining accent are one name, and a backup exported and imported again cannot hold both.
/// Characters that change how a name looks without being seen are refused, not escaped: control
/// characters (NUL, newline, ESC: a log line or terminal is not theirs to steer), bidi controls
/// (U+202E makes "gpj.exe" read as "exe.jpg") and invisible format characters (U+200B makes two
/// names that print alike differ).
public enum VisibleName {
    /// `text` in normalization form C (ASCII, the usual case, is returned as is without a look-up).
    public static func normalized(_ text: String) -> String {
        if text.utf8.allSatisfy({ $0 < 0x80 }) { return text }
        return text.precomposedStringWithCanonicalMapping
    }

    /// What is wrong with `text` by this rule ("contains a bidi control character (U+202E)"), or nil.
    public static func problem(_ text: String) -> String? {
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
            default: break
            }
        }
        return nil
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
