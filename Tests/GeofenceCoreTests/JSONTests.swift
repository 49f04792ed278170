import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// The gpsd recordings shared by the project (`<repo>/../shared/fixtures/gpsd`). Symlinks are
/// resolved first so the path also works when this file is linked into a scratch package.
private let gpsdFixtures: URL = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
    .deletingLastPathComponent()  // GeofenceCoreTests
    .deletingLastPathComponent()  // Tests
    .deletingLastPathComponent()  // <repo>
    .appendingPathComponent("../shared/fixtures/gpsd").standardizedFileURL

private let haveGPSDFixtures = FileManager.default.fileExists(atPath: gpsdFixtures.path)

/// The lines of every `.chk` recording, with their file name for failure messages.
private func gpsdLines() throws -> [(file: String, number: Int, line: [UInt8])] {
    let files = try FileManager.default.contentsOfDirectory(atPath: gpsdFixtures.path)
        .filter { $0.hasSuffix(".chk") }.sorted()
    var lines: [(file: String, number: Int, line: [UInt8])] = []
    for file in files {
        let data = try Data(contentsOf: gpsdFixtures.appendingPathComponent(file))
        for (index, line) in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated()
        where !line.isEmpty {
            lines.append((file, index + 1, Array(line)))
        }
    }
    return lines
}

private func parseError(_ text: String) -> JSONParseError? {
    parseError(Array(text.utf8))
}

private func parseError(_ bytes: [UInt8]) -> JSONParseError? {
    do {
        _ = try JSON.parse(bytes)
        return nil
    } catch {
        return error
    }
}

/// Everything `forEachMember` reports, or its error: for comparing the two parsing paths.
private func scan(_ bytes: [UInt8]) -> Result<[JSONObject.Member], JSONParseError> {
    var members: [JSONObject.Member] = []
    do {
        try JSON.forEachMember(in: bytes) { key, value in members.append((key, value)) }
        return .success(members)
    } catch {
        return .failure(error)
    }
}

/// One invalid input and where and why it must be rejected.
struct InvalidJSONCase: Sendable, CustomTestStringConvertible {
    var bytes: [UInt8]
    var offset: Int
    var line: Int
    var column: Int
    var message: String

    init(_ text: String, offset: Int, line: Int = 1, column: Int? = nil, _ message: String) {
        self.init(bytes: Array(text.utf8), offset: offset, line: line, column: column, message)
    }

    init(bytes: [UInt8], offset: Int, line: Int = 1, column: Int? = nil, _ message: String) {
        self.bytes = bytes
        self.offset = offset
        self.line = line
        self.column = column ?? offset + 1
        self.message = message
    }

    var testDescription: String { String(decoding: bytes, as: UTF8.self).debugDescription }
}

private let invalidCases: [InvalidJSONCase] = [
    // Structure.
    .init("", offset: 0, "unexpected end of input; expected a value"),
    .init("  \n ", offset: 4, line: 2, column: 2, "unexpected end of input"),
    .init("[", offset: 1, "unexpected end of input; expected a value"),
    .init("[1", offset: 2, "unexpected end of input; expected ',' or ']'"),
    .init("{\"a\":", offset: 5, "unexpected end of input; expected a value"),
    .init("{\"a\"", offset: 4, "unexpected end of input; expected ':'"),
    .init("[1 2]", offset: 3, "expected ',' or ']' after an array element, found '2'"),
    .init("[,1]", offset: 1, "unexpected ','; expected a value"),
    .init("{\"a\" 1}", offset: 5, "expected ':' after an object key, found '1'"),
    .init("{1:2}", offset: 1, "expected a string key, found '1'"),
    .init("{\"a\":1 \"b\":2}", offset: 7, "expected ',' or '}' after an object member"),
    .init("1 2", offset: 2, "unexpected '2' after the JSON value"),
    .init("{} x", offset: 3, "unexpected 'x' after the JSON value"),
    .init("[1,2,]", offset: 5, "trailing comma before ']'"),
    .init("{\"a\":1,}", offset: 7, "trailing comma before '}'"),
    .init("[1,\n2,\n]", offset: 7, line: 3, column: 1, "trailing comma"),
    .init("// note\n1", offset: 0, "comments are not allowed"),
    .init("[1 /* note */]", offset: 3, "comments are not allowed"),
    .init("{\"a\":1 // note\n}", offset: 7, "comments are not allowed"),
    .init("1 // note", offset: 2, "comments are not allowed"),
    .init("'a'", offset: 0, "strings must use double quotes"),
    .init("{'a':1}", offset: 1, "strings must use double quotes"),
    .init("[1,\u{1}]", offset: 3, "unexpected control character U+0001; expected a value"),
    .init(bytes: [0xEF, 0xBB, 0xBF, 0x31], offset: 0, "byte order mark"),
    // Literals.
    .init("tru", offset: 0, "invalid literal 'tru'; expected 'true'"),
    .init("[nul]", offset: 1, "invalid literal 'nul'; expected 'null'"),
    .init("falsey", offset: 5, "unexpected 'y' after the JSON value"),
    .init("True", offset: 0, "unexpected 'True'; expected a value"),
    .init("NaN", offset: 0, "NaN is not valid JSON"),
    .init("[1, NaN]", offset: 4, "NaN is not valid JSON"),
    .init("Infinity", offset: 0, "Infinity is not valid JSON"),
    .init("{\"lat\":-Infinity}", offset: 7, "-Infinity is not valid JSON"),
    // Numbers.
    .init("01", offset: 0, "leading zeros are not allowed"),
    .init("[-007]", offset: 1, "leading zeros are not allowed"),
    .init("-", offset: 1, "expected a digit after '-'"),
    .init("- 1", offset: 1, "expected a digit after '-'"),
    .init("1.", offset: 2, "expected a digit after the decimal point"),
    .init("1.e5", offset: 2, "expected a digit after the decimal point"),
    .init("1e", offset: 2, "expected a digit in the exponent"),
    .init("1e+", offset: 3, "expected a digit in the exponent"),
    .init(".5", offset: 0, "unexpected '.'; expected a value"),
    .init("+1", offset: 0, "unexpected '+'; expected a value"),
    .init("0x10", offset: 1, "unexpected 'x' after the JSON value"),
    .init("1e999", offset: 0, "number out of range"),
    .init("[0, -1e400]", offset: 4, "number out of range"),
    .init("1" + String(repeating: "0", count: 400), offset: 0, "number out of range"),
    // Strings.
    .init("\"abc", offset: 0, "unterminated string"),
    .init("[\"a\\", offset: 1, "unterminated string"),
    .init("\"\\x\"", offset: 1, "invalid escape '\\x'"),
    .init("\"\\'\"", offset: 1, "invalid escape '\\''"),
    .init("\"\\u12\"", offset: 1, "invalid \\u escape: expected 4 hex digits"),
    .init("\"\\u12G4\"", offset: 1, "invalid \\u escape: expected 4 hex digits"),
    .init("\"\\uD800\"", offset: 1, "lone surrogate \\uD800"),
    .init("\"ab\\uDC00\"", offset: 3, "lone surrogate \\uDC00"),
    .init("\"\\uD800\\u0041\"", offset: 1, "lone surrogate \\uD800"),
    .init("\"\\uD800\\uD800\"", offset: 1, "lone surrogate \\uD800"),
    .init("\"\\uD800\\u12\"", offset: 7, "invalid \\u escape"),
    .init("\"a\nb\"", offset: 2, "unescaped control character U+000A in string"),
    .init("\"a\tb\"", offset: 2, "unescaped control character U+0009 in string"),
    .init("\"\\n\u{0}\"", offset: 3, "unescaped control character U+0000 in string"),
    .init(bytes: [0x22, 0xFF, 0x22], offset: 1, "invalid UTF-8 byte 0xFF"),
    .init(bytes: [0x22, 0x80, 0x22], offset: 1, "invalid UTF-8 byte 0x80"),
    .init(bytes: [0x22, 0xC0, 0x80, 0x22], offset: 1, "invalid UTF-8 byte 0xC0"),
    .init(bytes: [0x22, 0xE0, 0x80, 0x80, 0x22], offset: 2, "invalid UTF-8 byte 0x80 after 0xE0"),
    .init(bytes: [0x22, 0xED, 0xA0, 0x80, 0x22], offset: 2, "invalid UTF-8 byte 0xA0 after 0xED"),
    .init(bytes: [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], offset: 2, "invalid UTF-8 byte 0x90 after 0xF4"),
    .init(bytes: [0x22, 0xE2, 0x82, 0x41, 0x22], offset: 3, column: 3, "invalid UTF-8 byte 0x41 after 0xE2"),
    .init(bytes: [0x22, 0xE2, 0x82], offset: 1, "truncated UTF-8 sequence"),
    .init(bytes: [0x22, 0x5C, 0x6E, 0xFF, 0x22], offset: 3, "invalid UTF-8 byte 0xFF"),
    .init(bytes: [0x5B, 0xC3, 0xA9, 0x5D], offset: 1, "unexpected byte 0xC3; expected a value"),
    // Duplicate keys point at the second occurrence.
    .init("{\"a\":1,\"a\":2}", offset: 7, "duplicate key \"a\""),
    .init("{\"a\":1,\"\\u0061\":2}", offset: 7, "duplicate key \"a\""),
    .init("[{\"x\":{}, \"x\":[]}]", offset: 10, "duplicate key \"x\""),
    // Positions: lines end at \n, columns count Unicode scalars.
    .init("{\n  \"a\": 01\n}", offset: 9, line: 2, column: 8, "leading zeros"),
    .init("[\"é\", x]", offset: 7, column: 7, "unexpected 'x'; expected a value"),
    .init("\r\n\r\n  @", offset: 6, line: 3, column: 3, "unexpected '@'; expected a value"),
]

@Suite("JSON")
struct JSONTests {
    // MARK: - Reading valid input

    @Test func parsesScalarsAndContainers() throws {
        #expect(try JSON.parse("null") == .null)
        #expect(try JSON.parse(" true ") == .bool(true))
        #expect(try JSON.parse("\t\r\nfalse\n") == .bool(false))
        #expect(try JSON.parse("-12.5e-1") == .number(-1.25))
        #expect(try JSON.parse("\"hi\"") == .string("hi"))
        #expect(try JSON.parse("[]") == .array([]))
        #expect(try JSON.parse("{}") == .object([:]))
        let value = try JSON.parse(#"{"b": [1, 2.5, "x", null, true], "a": {"c": {}}}"#)
        #expect(value == ["b": [1, 2.5, "x", nil, true], "a": ["c": [:]]])
        #expect(value.objectValue?.keys == ["b", "a"])
    }

    @Test func decodesEscapes() throws {
        let value = try JSON.parse(#""\"\\\/\b\f\n\r\t\u0041\u00e9\u20AC\uD83D\uDE00\u0000""#)
        #expect(value == .string("\"\\/\u{8}\u{C}\n\r\tAé€😀\u{0}"))
        // Raw UTF-8 around escapes is kept.
        #expect(try JSON.parse("\"é\\n😀ß\"") == .string("é\n😀ß"))
    }

    @Test func readsNumbersCorrectly() throws {
        #expect(try JSON.parse("0") == .number(0))
        #expect(try JSON.parse("-0").doubleValue?.sign == .minus)
        #expect(try JSON.parse("1E2") == .number(100))
        #expect(try JSON.parse("1e+2") == .number(100))
        #expect(try JSON.parse("52.850156667") == .number(52.850156667))
        #expect(try JSON.parse("9007199254740993") == .number(9_007_199_254_740_992))
        #expect(try JSON.parse("1.7976931348623157e308") == .number(.greatestFiniteMagnitude))
        #expect(try JSON.parse("4.9e-324") == .number(.leastNonzeroMagnitude))
        // Underflow is not an error: the nearest double is zero.
        #expect(try JSON.parse("1e-400") == .number(0))
        #expect(try JSON.parse("0e99999999999999999999") == .number(0))
        #expect(try JSON.parse("123456789012345678901234567890") == .number(1.2345678901234568e29))
    }

    /// The fast path (small mantissa, small exponent) and the standard library must agree to the bit.
    @Test func numbersMatchTheStandardLibrary() throws {
        var random = SeededGenerator(seed: 42)
        for _ in 0..<30_000 {
            var text = RandomDecimal.text(using: &random, leadingZeros: false)
            if Bool.random(using: &random) {
                text += "e" + String(Int.random(in: -340...320, using: &random))
            }
            guard let expected = Double(text) else { continue }
            if expected.isFinite {
                let parsed = try JSON.parse(text).doubleValue
                #expect(parsed?.bitPattern == expected.bitPattern, "\(text)")
            } else {
                #expect(parseError(text)?.message == "number out of range", "\(text)")
            }
        }
    }

    /// 17 to 19 significant digits with a decimal point (a double's shortest form as Swift, JavaScript and Python
    /// print it; the fleet replay's speeds) are read by the 128-bit check of `nearestQuotient`, not by `Double(_:)`:
    /// to the bit what the standard library reads, ties (which it leaves to `Double(_:)`) included.
    @Test func longDecimalsMatchTheStandardLibrary() throws {
        var random = SeededGenerator(seed: 7)
        var texts = [
            "9007199254740993.0", "9007199254740995.0", "900719925474099.35", "0.30000000000000004",
            "17.234523452345234", "1.0000000000000002", "0.9999999999999999", "4503599627370496.5",
            "4503599627370497.5", "123456789.12345678", "0.0009765625000000001", "1844674407370955.1615",
        ]
        for _ in 0..<40_000 {
            let magnitude = Double.random(in: -4...9, using: &random)
            let x = Double.random(in: 1..<10, using: &random) * pow(10, magnitude.rounded(.down))
            texts.append("\(x)")
            texts.append(String(format: "%.17g", x))
            texts.append(String(format: "%.18g", x))
            texts.append(String(format: "%.19g", x))
        }
        for text in texts where !text.contains("e") {
            let expected = try #require(Double(text))
            let parsed = try JSON.parse(text).doubleValue
            #expect(parsed?.bitPattern == expected.bitPattern, "\(text)")
            let negative = try JSON.parse("-" + text).doubleValue
            #expect(negative?.bitPattern == (-expected).bitPattern, "-\(text)")
        }
    }

    @Test func acceptsTopLevelWhitespaceOnly() throws {
        #expect(try JSON.parse(" \n\t\r[1]\r\n ") == [1])
    }

    @Test func readsOtherCollections() throws {
        #expect(try JSON.parse(Data("[1]".utf8)) == [1])
        #expect(try JSON.parse("x[2]".utf8.dropFirst()) == [2])
        // Not contiguous: copied first.
        #expect(try JSON.parse(Array("[3]".utf8).lazy.map { $0 }) == [3])
        #expect(throws: JSONParseError.self) { try JSON.parse(ArraySlice<UInt8>()) }
    }

    // MARK: - Rejecting invalid input

    @Test(arguments: invalidCases)
    func rejectsWithPosition(_ invalid: InvalidJSONCase) {
        let error = parseError(invalid.bytes)
        #expect(error?.offset == invalid.offset)
        #expect(error?.line == invalid.line)
        #expect(error?.column == invalid.column)
        #expect(error?.message.contains(invalid.message) == true, "\(error?.message ?? "no error")")
        // The streaming path reports the same error for object documents.
        if invalid.bytes.first == UInt8(ascii: "{"), case .failure(let scanError) = scan(invalid.bytes) {
            #expect(scanError == error)
        }
    }

    @Test func errorDescriptionSaysWhereAndWhat() {
        let error = parseError("{\n  \"radius\": 1,\n  \"radius\": 2\n}")
        #expect(error?.description == #"line 3, column 3 (byte offset 19): duplicate key "radius""#)
    }

    @Test func duplicateKeysInLargeObjects() {
        // Past the linear-search limit lookups use a hash index; duplicates must still be found.
        var text = "{"
        for index in 0..<100 { text += "\"key\(index)\":\(index)," }
        let duplicate = text.utf8.count
        text += "\"key57\":0}"
        let error = parseError(text)
        #expect(error?.offset == duplicate)
        #expect(error?.message == #"duplicate key "key57""#)
        #expect(scan(Array(text.utf8)).failure == error)
    }

    @Test func duplicateKeysAreComparedAsSwiftStrings() {
        // U+212A KELVIN SIGN is canonically equivalent to "K": JSONObject could not hold both, so
        // both paths reject the pair, in either order.
        for text in [#"{"\u212A":1,"K":2}"#, #"{"K":1,"\u212A":2}"#, "{\"é\":1,\"e\u{301}\":2}"] {
            let error = parseError(text)
            #expect(error?.message.hasPrefix("duplicate key") == true, "\(text)")
            #expect(scan(Array(text.utf8)).failure == error, "\(text)")
        }
        #expect(parseError(#"{"k":1,"K":2}"#) == nil)
    }

    @Test func deepNestingFailsCleanly() {
        let brackets = [UInt8](repeating: UInt8(ascii: "["), count: 100_000)
        let error = parseError(brackets)
        #expect(error?.offset == JSON.maximumDepth)
        #expect(error?.message == "nesting deeper than 512 levels")

        let objects = Array(String(repeating: "{\"a\":", count: 100_000).utf8)
        #expect(parseError(objects)?.message == "nesting deeper than 512 levels")
        #expect(scan(objects).failure?.message == "nesting deeper than 512 levels")

        let deepest = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        #expect(parseError(deepest) == nil)
        let tooDeep = String(repeating: "[", count: 513) + String(repeating: "]", count: 513)
        #expect(parseError(tooDeep)?.offset == 512)
    }

    @Test func maximumDepthFitsASmallStack() {
        // Parsing, writing, comparing and freeing the deepest accepted document must not need a
        // big stack: 512 KiB is what a thread may get; debug builds use the most per level.
        let text = String(repeating: "{\"a\":[", count: 256) + "1" + String(repeating: "]}", count: 256)
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var parsed = false
        let thread = Thread {
            if let value = try? JSON.parse(text) {
                parsed = value.serialized() == text && value == value
            }
            done.signal()
        }
        thread.stackSize = 512 * 1024
        thread.start()
        done.wait()
        #expect(parsed)
    }

    @Test func megabyteLines() throws {
        let long = String(repeating: "abcdéfgh😀", count: 80_000)
        let text = "{\"class\":\"TPV\",\"note\":\"\(long)\",\"n\":[" + String(repeating: "1.5,", count: 50_000) + "2]}"
        #expect(text.utf8.count > 1_000_000)
        let value = try JSON.parse(text)
        #expect(value["note"]?.stringValue == long)
        #expect(value["n"]?.arrayValue?.count == 50_001)
        var note: String?
        try JSON.forEachMember(in: text) { key, value in if key == "note" { note = value.stringValue } }
        #expect(note == long)
        let escaped = "\"" + String(repeating: "\\u00e9\\n", count: 200_000) + "\""
        #expect(try JSON.parse(escaped).stringValue?.count == 400_000)
    }

    /// Random damage to real lines and random bytes: never a crash, both paths agree, and what
    /// parses survives a round trip.
    @Test func survivesMutatedInput() throws {
        var seeds: [[UInt8]] = [
            Array(
                #"{"class":"TPV","mode":3,"time":"2018-08-20T09:47:37.000Z","lat":52.850155,"lon":5.313616667}"#.utf8),
            Array(#"{"regions":[{"id":"home","lat":52.1,"lon":5.2,"radius":200,"notify":["enter","exit"]}]}"#.utf8),
            Array(#"{"s":"\u00e9\uD83D\uDE00\n","a":[[],{},[{}]],"n":-0.0e-0,"t":true,"f":false,"z":null}"#.utf8),
        ]
        if haveGPSDFixtures {
            seeds += try gpsdLines().filter { $0.line.first == UInt8(ascii: "{") }.prefix(40).map(\.line)
        }
        let alphabet =
            Array(#"{}[]:,"\/ebfnrtu0123456789.-+eEaNI "#.utf8) + [0x00, 0x0A, 0x7F, 0x80, 0xC3, 0xED, 0xF4, 0xFF]
        var random = SeededGenerator(seed: 7)
        for iteration in 0..<12_000 {
            var bytes: [UInt8]
            if iteration % 6 == 5 {
                let count = Int.random(in: 0...40, using: &random)
                bytes = (0..<count).map { _ in alphabet.randomElement(using: &random)! }
            } else {
                bytes = seeds.randomElement(using: &random)!
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    let at = Int.random(in: 0...bytes.count, using: &random)
                    switch Int.random(in: 0..<4, using: &random) {
                    case 0: bytes.insert(alphabet.randomElement(using: &random)!, at: at)
                    case 1 where at < bytes.count: bytes[at] = alphabet.randomElement(using: &random)!
                    case 2 where at < bytes.count: bytes.remove(at: at)
                    default: bytes.removeLast(bytes.count - at)
                    }
                }
            }
            let parsed = Result { () throws(JSONParseError) in try JSON.parse(bytes) }
            switch parsed {
            case .success(let value):
                #expect(try JSON.parse(value.serialized()) == value)
                if case .object(let object) = value {
                    let members = try #require(scan(bytes).success)
                    #expect(members.map(\.key) == object.keys)
                    var matched: [String] = []
                    try JSON.forEachMember(in: bytes, matching: tableKeys) { key, _ in matched.append(key.rawValue) }
                    #expect(matched == object.keys.filter { TableKey(rawValue: $0) != nil })
                    #expect(JSONObject(uniqueKeysWithValues: members.map { ($0.key, $0.value) }) == object)
                }
            case .failure(let error):
                #expect(error.offset <= bytes.count)
                let firstByte = bytes.first { ![0x20, 0x0A, 0x0D, 0x09].contains($0) }
                if firstByte == UInt8(ascii: "{") {
                    #expect(scan(bytes).failure == error, "\(String(decoding: bytes, as: UTF8.self))")
                    var matchingError: JSONParseError?
                    do {
                        try JSON.forEachMember(in: bytes, matching: tableKeys) { _, _ in }
                    } catch let caught {
                        matchingError = caught
                    }
                    #expect(matchingError == error)
                }
            }
        }
    }

    // MARK: - Real gpsd output

    @Test(.enabled(if: haveGPSDFixtures, "needs /work/shared/fixtures/gpsd next to the repository"))
    func parsesEveryGPSDRecording() throws {
        var reports = 0
        for (file, number, line) in try gpsdLines() {
            if line.first == UInt8(ascii: "$") {
                // NMEA sentences interleaved in the recordings are not JSON and must fail cleanly.
                #expect(parseError(line)?.offset == 0, "\(file):\(number)")
                continue
            }
            let value = try JSON.parse(line)
            let object = try #require(value.objectValue, "\(file):\(number)")
            #expect(object["class"]?.stringValue != nil, "\(file):\(number)")
            let members = try #require(scan(line).success, "\(file):\(number)")
            #expect(members.map(\.key) == object.keys, "\(file):\(number)")
            #expect(try JSON.parse(value.serialized()) == value, "\(file):\(number)")
            let foundation = try JSONSerialization.jsonObject(with: Data(line), options: [.fragmentsAllowed])
            #expect(JSONValue(foundation: foundation) == value, "\(file):\(number)")
            reports += 1
        }
        #expect(reports > 3_000)
    }

    @Test(.enabled(if: haveGPSDFixtures, "needs /work/shared/fixtures/gpsd next to the repository"))
    func decodesATPVLineMemberByMember() throws {
        let line = try gpsdLines().first { String(decoding: $0.line, as: UTF8.self).contains(#""time":"#) }
        let tpv = try #require(line).line
        var latitude: Double?
        var time: String?
        var keys: [String] = []
        try JSON.forEachMember(in: tpv) { key, value in
            keys.append(key)
            switch key {
            case "lat": latitude = value.doubleValue
            case "time": time = value.stringValue
            default: break
            }
        }
        #expect(keys.first == "class")
        #expect(latitude.map { (-90...90).contains($0) } == true)
        #expect(time?.hasSuffix("Z") == true)
    }

    // MARK: - Against Foundation

    @Test(arguments: [
        "0", "-0", "1", "-1", "0.5", "1e10", "1E-10", "-2.5e+3", "123456789", "1.7976931348623157e308",
        "2.2250738585072014e-308", "5e-324", "0.1", "3.141592653589793", "100000000000000000000",
        "\"\"", "\"plain\"", #""esc \" \\ \/ \b \f \n \r \t""#, #""\u00e9\u4e2d\ud83d\ude00""#, "\"é中😀\"",
        "true", "false", "null", "[]", "{}", "[[]]", "[{}]", #"{"a":{}}"#, "[1,[2,[3,[4]]]]",
        #"{"regions":[{"id":"home","lat":52.85,"lon":5.31,"radius":200,"notify":["enter","exit"]}]}"#,
        #" { "a" : [ 1 , 2 ] , "b" : { "c" : null } } "#, #"{"":0,"\u0000":1}"#,
    ])
    func agreesWithFoundation(_ text: String) throws {
        let ours = try JSON.parse(text)
        let theirs = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        #expect(JSONValue(foundation: theirs) == ours)
    }

    // MARK: - The streaming walk

    @Test func forEachMemberWalksInOrder() throws {
        var seen: [String] = []
        var values: [JSONValue] = []
        try JSON.forEachMember(in: #" {"z":1,"a":"x","m":[1,{"k":null}],"e":{}} "#) { key, value in
            seen.append(key)
            values.append(value)
        }
        #expect(seen == ["z", "a", "m", "e"])
        #expect(values == [1, "x", [1, ["k": nil]], [:]])
        try JSON.forEachMember(in: "{}") { _, _ in Issue.record("no members expected") }
    }

    @Test func forEachMemberNeedsAnObject() {
        #expect(scan(Array("[1]".utf8)).failure?.message == "expected a JSON object")
        #expect(scan(Array(" 1".utf8)).failure?.offset == 1)
        #expect(scan(Array("".utf8)).failure?.message == "unexpected end of input; expected a value")
        #expect(scan(Array("{} 1".utf8)).failure?.offset == 3)
        #expect(scan(Array("NaN".utf8)).failure?.message.hasPrefix("NaN") == true)
    }

    @Test func forEachMemberRejectsDuplicates() {
        let cases: [(String, Int)] = [
            (#"{"a":1,"b":2,"a":3}"#, 13),
            (#"{"a":1,"\u0061":2}"#, 7),
            (#"{"\u0061":1,"a":2}"#, 12),
            (#"{"a long key of many bytes":1,"a long key of many bytes":2}"#, 30),
            ("{\"é\":1,\"é\":2}", 8),
        ]
        for (text, offset) in cases {
            let error = scan(Array(text.utf8)).failure
            #expect(error?.offset == offset, "\(text)")
            #expect(error?.message.hasPrefix("duplicate key") == true, "\(text)")
        }
        // More keys than the inline store holds.
        var text = "{"
        for index in 0..<200 { text += "\"k\(index)\":0," }
        #expect(scan(Array((text + "\"z\":1}").utf8)).success?.count == 201)
        #expect(scan(Array((text + "\"k3\":1}").utf8)).failure?.message == #"duplicate key "k3""#)
    }

    @Test func forEachMemberMatchesAKeyTable() throws {
        let line =
            #"{"class":"TPV","device":"/dev/ttyUSB0","mode":3,"lat":52.5,"extra":[1,{"lat":0}],"lon":5.25,"#
            + #""\u0074ime":"2018-08-20T09:47:37.000Z","a key longer than fifteen":1,"höhe":12,"lat2":0}"#
        var seen: [(TableKey, JSONValue)] = []
        try JSON.forEachMember(in: line, matching: tableKeys) { key, value in seen.append((key, value)) }
        #expect(seen.map(\.0) == [.class, .mode, .lat, .lon, .time, .long, .height])
        #expect(seen.map(\.1) == ["TPV", 3, 52.5, 5.25, "2018-08-20T09:47:37.000Z", 1, 12])

        // Same checks as everywhere else, listed key or not.
        for bad in [#"{"class":"TPV","extra":1,"extra":2}"#, #"{"lat":1,"lat":2}"#, #"{"lat":1,}"#, #"{"x":NaN}"#] {
            var error: JSONParseError?
            do {
                try JSON.forEachMember(in: bad, matching: tableKeys) { _, _ in }
            } catch let caught {
                error = caught
            }
            #expect(error != nil && error == scan(Array(bad.utf8)).failure, "\(bad)")
        }
    }

    // MARK: - Writing

    @Test func writesCompactStableOutput() {
        let value: JSONValue = ["id": "home", "lat": 52.85, "radius": 200, "tags": ["a", nil, true], "x": [:]]
        #expect(value.serialized() == #"{"id":"home","lat":52.85,"radius":200,"tags":["a",null,true],"x":{}}"#)
    }

    @Test func writesNumbers() {
        let cases: [(Double, String)] = [
            (200, "200"), (-3, "-3"), (0, "0"), (-0.0, "-0"), (0.1, "0.1"), (1.5e300, "1.5e+300"),
            (1e16, "1e+16"), (9_007_199_254_740_992, "9007199254740992"), (.leastNonzeroMagnitude, "5e-324"),
            (1e-7, "1e-07"),
            (52.850156667, "52.850156667"), (.nan, "null"), (.infinity, "null"), (-.infinity, "null"),
        ]
        for (number, text) in cases {
            #expect(JSONValue.number(number).serialized() == text)
        }
    }

    /// Numbers are written as `String(Int64(n))` for integers below 2^53, else `description` without a
    /// trailing ".0": the text the writer has always given (stored rows and events compare equal).
    @Test func numbersAreWrittenAsBefore() {
        func reference(_ number: Double) -> String {
            guard number.isFinite else { return "null" }
            if number.rounded(.towardZero) == number, number.magnitude < 9_007_199_254_740_992 {
                return number == 0 && number.sign == .minus ? "-0" : String(Int64(number))
            }
            var text = number.description
            if text.hasSuffix(".0") { text.removeLast(2) }
            return text
        }
        var random = SeededGenerator(seed: 7)
        var numbers: [Double] = [
            9_007_199_254_740_991, -9_007_199_254_740_991, 9_007_199_254_740_992, 1e15, 1e16, 1e17, 123_456_789_012,
            -1, 10, 100, 1_000_000, 0.5, -0.5, 48.85, 2.35, 1e-5, 3e22, -4.2e-300,
        ]
        for _ in 0..<20_000 {
            numbers.append(Double(bitPattern: random.next()))
            numbers.append(Double(Int64(bitPattern: random.next()) >> (random.next() % 64)))
            numbers.append((Double(random.next() % 2_000_000_000) / 1e7).rounded(toPlaces: random.next() % 9))
        }
        // The writer's own path for non-integers of magnitude 1e-4 to 1e9 with up to nine digits after the point
        // (`shortestFixed`): decimals of every length and magnitude there, either sign, their neighbours one unit
        // in the last place away (which need 16-17 digits), powers of two, and values drawn at random in the range.
        for _ in 0..<150_000 {
            let places = Int(random.next() % 10)
            let whole = Double(random.next() % 1_000_000_000) / Double(1 << (random.next() % 40))
            let decimal = (whole * pow(10, Double(places))).rounded() / pow(10, Double(places))
            let sign: Double = random.next() % 2 == 0 ? 1 : -1
            numbers.append(sign * decimal)
            numbers.append(sign * decimal.nextUp)
            numbers.append(sign * decimal.nextDown)
            numbers.append(sign * pow(10, Double.random(in: -4...9, using: &random)))
        }
        for exponent in -14...30 { numbers.append(pow(2, Double(exponent)) * 1.0) }
        for exponent in -14...30 { numbers.append(-pow(2, Double(exponent)) * 3) }
        for number in numbers {
            #expect(JSONValue.number(number).serialized() == reference(number), "\(number)")
        }
    }

    @Test func numbersRoundTripExactly() throws {
        var random = SeededGenerator(seed: 99)
        for _ in 0..<20_000 {
            let number = Double(bitPattern: random.next())
            guard number.isFinite else { continue }
            let back = try JSON.parse(JSONValue.number(number).serialized()).doubleValue
            #expect(back?.bitPattern == number.bitPattern, "\(number)")
        }
    }

    @Test func escapesStrings() throws {
        let text = "q\"b\\s/n\nr\rt\tb\u{8}f\u{C}c\u{1}\u{1F}d\u{7F}é中😀"
        let written = JSONValue.string(text).serialized()
        #expect(written == #""q\"b\\s/n\nr\rt\tb\bf\fc\u0001\u001fd"# + "\u{7F}é中😀\"")
        #expect(try JSON.parse(written) == .string(text))
    }

    @Test func writesPretty() {
        let value: JSONValue = ["regions": [["id": "home", "notify": ["enter"], "hooks": [:]]], "empty": []]
        #expect(
            value.serialized(pretty: true) == """
                {
                  "regions": [
                    {
                      "id": "home",
                      "notify": [
                        "enter"
                      ],
                      "hooks": {}
                    }
                  ],
                  "empty": []
                }
                """)
        #expect(JSONValue.number(1).serialized(pretty: true) == "1")
    }

    /// The store keeps a vehicle's last fix as `serializedJSON`: the very text the object form gives.
    @Test func eventFixTextIsTheObjectsText() {
        let numbers: [Double] = [
            0, -0.0, 1, -1, 48.86798561, 2.3772456, 3, 20.5, 1e-7, 123_456.789, 9_007_199_254_740_992, 1e300,
            -179.99999999, .nan, .infinity, .leastNonzeroMagnitude,
        ]
        var fixes: [EventFix] = []
        for (index, number) in numbers.enumerated() {
            let other = numbers[(index + 5) % numbers.count]
            for mode in [FixMode.unknown, .noFix, .twoD, .threeD] {
                fixes.append(
                    EventFix(
                        latitude: number, longitude: other, accuracy: abs(number), accuracyEstimated: index % 2 == 0,
                        mode: mode, speed: mode == .twoD ? nil : other, course: mode == .noFix ? nil : number))
            }
        }
        fixes.append(EventFix(latitude: 1.5, longitude: 2.5, accuracy: 10, mode: .threeD))
        for fix in fixes {
            #expect(fix.serializedJSON == JSONValue.object(fix.json).serialized(), "\(fix)")
        }
    }

    // MARK: - Values and objects

    @Test func objectsKeepOrderAndUniqueKeys() {
        var object: JSONObject = ["b": 1, "a": 2]
        object["c"] = 3
        object["b"] = 4
        #expect(object.keys == ["b", "a", "c"])
        #expect(object.values == [4, 2, 3])
        object["a"] = nil
        #expect(object.keys == ["b", "c"])
        #expect(object.removeValue(forKey: "b") == 4)
        #expect(object.removeValue(forKey: "zz") == nil)
        #expect(object.count == 1)
        #expect(object.contains(key: "c"))
        #expect(object[0].key == "c")
    }

    @Test func largeObjectsStayConsistent() {
        var object = JSONObject()
        for index in 0..<100 { object["k\(index)"] = .number(Double(index)) }
        for index in stride(from: 0, to: 100, by: 3) { object["k\(index)"] = nil }
        object["k1"] = "one"
        #expect(object.count == 66)
        #expect(object["k1"] == "one")
        #expect(object["k3"] == nil)
        #expect(object["k98"] == 98)
        #expect(object.keys.first == "k1")
        #expect(object.keys.last == "k98")
    }

    @Test func objectEqualityIgnoresOrder() throws {
        #expect(try JSON.parse(#"{"a":1,"b":[2]}"#) == JSON.parse(#"{"b":[2],"a":1}"#))
        #expect(try JSON.parse(#"{"a":1}"#) != JSON.parse(#"{"a":1,"b":2}"#))
        #expect(try JSON.parse(#"{"a":1,"c":2}"#) != JSON.parse(#"{"a":1,"b":2}"#))
    }

    @Test func typedAccessors() throws {
        let value = try JSON.parse(#"{"s":"x","n":3,"f":3.5,"b":true,"z":null,"a":[1],"o":{"k":1}}"#)
        #expect(value["s"]?.stringValue == "x")
        #expect(value["n"]?.doubleValue == 3)
        #expect(value["n"]?.intValue == 3)
        #expect(value["f"]?.intValue == nil)
        #expect(value["b"]?.boolValue == true)
        #expect(value["z"]?.isNull == true)
        #expect(value["s"]?.isNull == false)
        #expect(value["a"]?.arrayValue == [1])
        #expect(value["o"]?.objectValue == ["k": 1])
        #expect(value["o"]?["k"] == 1)
        #expect(value["missing"] == nil)
        #expect(value["s"]?.doubleValue == nil)
        #expect(JSONValue.number(1e300).intValue == nil)
        #expect(value["a"]?["k"] == nil)
        #expect("\(value["o"]!)" == #"{"k":1}"#)
    }
}

/// Keys for `JSONKeyTable` tests: short ASCII, long and non-ASCII names.
private enum TableKey: String, CaseIterable {
    case `class`, mode, time, lat, lon
    case long = "a key longer than fifteen"
    case height = "höhe"
}

private let tableKeys = JSONKeyTable(TableKey.self)

extension Result {
    fileprivate var success: Success? {
        if case .success(let value) = self { return value }
        return nil
    }

    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

extension JSONValue {
    /// Converts what `JSONSerialization` returns, to compare the two parsers.
    fileprivate init?(foundation: Any) {
        switch foundation {
        case is NSNull:
            self = .null
        case let string as String:
            self = .string(string)
        case let number as NSNumber:
            // Foundation gives booleans as NSNumber too; their Objective-C type is "c".
            self = String(cString: number.objCType) == "c" ? .bool(number.boolValue) : .number(number.doubleValue)
        case let array as [Any]:
            var elements: [JSONValue] = []
            for element in array {
                guard let value = JSONValue(foundation: element) else { return nil }
                elements.append(value)
            }
            self = .array(elements)
        case let dictionary as [String: Any]:
            var object = JSONObject()
            for (key, element) in dictionary {
                guard let value = JSONValue(foundation: element) else { return nil }
                object[key] = value
            }
            self = .object(object)
        default:
            return nil
        }
    }
}

extension Double {
    /// Rounded to `places` decimal places (as a coordinate in a fix often is).
    fileprivate func rounded(toPlaces places: UInt64) -> Double {
        let scale = (0..<places).reduce(1.0) { value, _ in value * 10 }
        return (self * scale).rounded() / scale
    }
}
