import Foundation
import GeofenceCore
import Testing

/// One rule for the names a person reads (region ids, region names, vehicle names): no control character, no
/// bidi control, no format character and no `Default_Ignorable_Code_Point` (issue 23, items 6 and 7); and one
/// escaping, `PrintableText`, for whatever outside text reaches a terminal or a log.
@Suite("visible names and printable text")
struct VisibleNameRuleTests {
    /// Every Unicode scalar.
    static var allScalars: [Unicode.Scalar] {
        (0...0x10FFFF).compactMap { Unicode.Scalar(UInt32($0)) }
    }

    /// The ones the issue found passing.
    static let listed: [UInt32] = [0x034F, 0xFE0F, 0x3164, 0x115F, 0xFFA0, 0x17B4]

    static func region(id: String = "r", name: String? = nil, subject: String? = nil) throws(RegionValidationError)
        -> Region
    {
        try Region(
            id: id, name: name, center: Coordinate(latitude: 48.2, longitude: 16.3), radius: 100,
            subjects: subject.map { [$0] })
    }

    @Test("every Default_Ignorable_Code_Point is refused in ids, names and vehicle names, by one rule")
    func wholeProperty() {
        var checked = 0
        for scalar in Self.allScalars where scalar.properties.isDefaultIgnorableCodePoint {
            let text = "a" + String(Character(scalar)) + "b"
            #expect(VisibleName.problem(text) != nil, "U+\(String(scalar.value, radix: 16))")
            #expect(SubjectName.problem(text) != nil)
            #expect(throws: RegionValidationError.self) { try Self.region(id: text) }
            #expect(throws: RegionValidationError.self) { try Self.region(name: text) }
            #expect(throws: RegionValidationError.self) { try Self.region(subject: text) }
            #expect(PrintableText.needsEscape(scalar))
            checked += 1
        }
        // Unicode 15 has 4,174 of them (most in U+E0000-U+E0FFF); a table without the property would pass 0.
        #expect(checked > 4000, "\(checked)")
    }

    @Test("the scalars the issue found are refused, each in an id, a name and a vehicle name")
    func listedOnes() throws {
        for value in Self.listed {
            let scalar = try #require(Unicode.Scalar(value))
            #expect(scalar.properties.isDefaultIgnorableCodePoint)
            let text = "a" + String(Character(scalar)) + "b"
            #expect(VisibleName.problem(text)?.contains("invisible character") == true, "\(value)")
            #expect(throws: RegionValidationError.self) { try Self.region(id: text) }
            #expect(throws: RegionValidationError.self) { try Self.region(name: text) }
            #expect(throws: RegionValidationError.self) { try Self.region(subject: text) }
        }
        // What is refused is exactly what it should be: visible letters, marks and spaces are names.
        for text in ["ab", "café", "Zürich Hbf", "東京駅", "a\u{301}b", "depot 1 (north)", "a\\b"] {
            #expect(VisibleName.problem(text) == nil, "\(text)")
            #expect(throws: Never.self) { try Self.region(name: text) }
        }
    }

    @Test("names refuse control characters (Cc) and bidi controls, as ids do")
    func namesRefuseControls() {
        for scalar in Self.allScalars where scalar.properties.generalCategory == .control {
            #expect(throws: RegionValidationError.self) { try Self.region(name: "a" + String(Character(scalar)) + "b") }
        }
        for value: UInt32 in [
            0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069, 0x200E, 0x200F, 0x061C,
        ] {
            let text = "a" + String(Character(Unicode.Scalar(value)!)) + "b"
            #expect(throws: RegionValidationError.self) { try Self.region(name: text) }
        }
    }

    @Test("PrintableText escapes controls, bidi controls and invisibles as JSON does, and leaves the rest")
    func escaping() throws {
        #expect(PrintableText.escaped("\u{1B}]0;pwned\u{07}") == "\\u001B]0;pwned\\u0007")
        #expect(PrintableText.escaped("a\r\nb\tc") == "a\\r\\nb\\tc")
        #expect(PrintableText.escaped("a\nb\tc", keepingLineBreaks: true) == "a\nb\tc")
        #expect(PrintableText.escaped("exe.\u{202E}gpj") == "exe.\\u202Egpj")
        #expect(PrintableText.escaped("a\u{E0001}b") == "a\\uDB40\\uDC01b")
        #expect(PrintableText.escaped("café 東京 \\ plain") == "café 東京 \\ plain")
        // A JSON line passed through it is the same JSON.
        let json = JSONValue.object(["name": .string("a\u{202E}\u{FE0F}\u{85}b\u{E0041}")]).serialized()
        #expect(try JSON.parse(PrintableText.escaped(json)) == JSON.parse(json))
        // Nothing it lets through is a control, format or invisible character.
        for scalar in Self.allScalars where !PrintableText.needsEscape(scalar) {
            let p = scalar.properties
            #expect(p.generalCategory != .control && p.generalCategory != .format && !p.isDefaultIgnorableCodePoint)
        }
    }
}
