import Foundation

/// One line of gpsd's JSON protocol (what `gpspipe -w` prints), as far as the engine cares.
package enum GPSDJSONReport: Sendable, Equatable {
    /// A time-position-velocity report.
    case tpv(Fix)
    /// Any other class (`SKY`, `VERSION`, `DEVICES`, `WATCH`, ...), by name.
    case other(String)
    /// Not a gpsd report, or a TPV whose vehicle name is refused: why, for counting and one clear log line.
    case malformed(MalformedLine)
}

/// Why a line is not a usable gpsd report: a kind to count by, and the words for a log line.
package struct MalformedLine: Sendable, Equatable, CustomStringConvertible {
    package enum Kind: String, Sendable, CaseIterable {
        case tooLong = "too-long"
        case notJSON = "not-json"
        case noClass = "no-class"
        case wrongType = "wrong-type"
        case badTime = "bad-time"
        /// The `device` (the vehicle's name, the subject of its events) breaks `SubjectName`'s rule.
        case badDevice = "bad-device"
    }

    package var kind: Kind
    package var description: String

    package init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }
}

/// Decodes gpsd JSON reports (TPV into `Fix`); used by `replay` and fleet ingest (`--source json:`).
///
/// Lenient where gpsd is (absent fields are absent, NaN-like `null`s are absent), strict where the
/// input is hostile: a line that is not a JSON object, has no `class`, or gives a field the wrong type
/// is `malformed`, never a crash and never a fix with made-up values.
package enum GPSDJSON {
    /// Lines longer than this are refused without parsing (gpsd's own reports are under 2 KiB, SKY
    /// with many satellites under 8 KiB).
    package static let maximumLineLength = 64 * 1024

    /// - Parameters:
    ///   - defaultSubject: the subject when the TPV names no `device`.
    ///   - receivedAt: the wall clock at receipt, for live sources; nil for recordings.
    package static func decode(
        _ line: some Collection<UInt8>, defaultSubject: String = "gpsd", receivedAt: Date? = nil
    ) -> GPSDJSONReport {
        if let report = line.withContiguousStorageIfAvailable({
            decode(buffer: $0, defaultSubject: defaultSubject, receivedAt: receivedAt)
        }) {
            return report
        }
        return decode(Array(line), defaultSubject: defaultSubject, receivedAt: receivedAt)
    }

    /// `decode` of a line a reader hands over as a slice of its buffer (the JSON lines source, `replay`): called
    /// from another module, the generic one reached the bytes through the collection's witness table.
    package static func decode(
        _ line: ArraySlice<UInt8>, defaultSubject: String = "gpsd", receivedAt: Date? = nil
    ) -> GPSDJSONReport {
        line.withUnsafeBufferPointer { decode(buffer: $0, defaultSubject: defaultSubject, receivedAt: receivedAt) }
    }

    /// `decode` of a whole array.
    package static func decode(
        _ line: [UInt8], defaultSubject: String = "gpsd", receivedAt: Date? = nil
    ) -> GPSDJSONReport {
        line.withUnsafeBufferPointer { decode(buffer: $0, defaultSubject: defaultSubject, receivedAt: receivedAt) }
    }

    private static func decode(
        buffer line: UnsafeBufferPointer<UInt8>, defaultSubject: String, receivedAt: Date?
    ) -> GPSDJSONReport {
        if let early = notJSONLine(line) { return early }
        // The common line (a flat object of plain ASCII strings, numbers and literals) is scanned in place; any
        // other goes to the strict reader, which judges it as it always has (`decodeStrictly`).
        // Filled in place: returned as an optional, the fields (some 250 bytes) were copied four times a line.
        var fields = TPVFields()
        if scanPlainObject(line, into: &fields) {
            return finish(fields, defaultSubject: defaultSubject, receivedAt: receivedAt)
        }
        return decodeStrictly(line, defaultSubject: defaultSubject, receivedAt: receivedAt)
    }

    /// What `decode` makes of a line, through the strict JSON reader alone (the reference for the scan).
    package static func decodeStrictly(
        _ line: some Collection<UInt8>, defaultSubject: String = "gpsd", receivedAt: Date? = nil
    ) -> GPSDJSONReport {
        if let early = notJSONLine(line) { return early }
        var f = TPVFields()
        do {
            try JSON.forEachMember(in: line, matching: tpvFields) { key, value in
                switch value {
                case .string(let text): f.take(key, .string(text))
                case .number(let n): f.take(key, .number(n))
                case .null: f.take(key, .null)
                default: f.take(key, .other)
                }
            }
        } catch {
            return .malformed(.init(.notJSON, "not a JSON object: \(error)"))
        }
        return finish(f, defaultSubject: defaultSubject, receivedAt: receivedAt)
    }

    /// A line refused before it is read (too long), or one that is not JSON at all (NMEA, a comment).
    private static func notJSONLine(_ line: some Collection<UInt8>) -> GPSDJSONReport? {
        if line.count > maximumLineLength {
            return .malformed(.init(.tooLong, "line of \(line.count) bytes is too long"))
        }
        // Raw NMEA (`gpspipe -r`, or interleaved as in gpsd's regression logs) and comments are not reports.
        // The first byte through the line's own storage: called from another module, this body is generic, and
        // `Collection.first` looked up the index type's conformances each time (hundreds of instructions a line).
        switch line.withContiguousStorageIfAvailable({ $0.first }) ?? line.first {
        case UInt8(ascii: "$"), UInt8(ascii: "!"): return .other("NMEA")
        case UInt8(ascii: "#"): return .other("comment")
        default: return nil
        }
    }

    /// Whether `decode` reads `line` with its in-place scan (for tests: the scan must take the common lines).
    package static func scansInPlace(_ line: [UInt8]) -> Bool {
        var fields = TPVFields()
        return line.withUnsafeBufferPointer { scanPlainObject($0, into: &fields) }
    }

    /// A member's value as the TPV fields take it: what the strict reader and the scan both report.
    enum FieldValue {
        case string(String)
        /// A `time` the scan read straight from its bytes (`TimestampParser.seconds`): seconds since 1970.
        case time(Double)
        case number(Double)
        case null
        /// `true`, `false`, an array or an object.
        case other
    }

    /// The TPV members read so far, and the first one of the wrong type.
    struct TPVFields {
        var klass: String?
        var device: String?
        var mode: Double?
        var time: String?
        /// The time as the scan read it (then `time` is nil).
        var timeSeconds: Double?
        var lat: Double?
        var lon: Double?
        var altHAE: Double?
        var altMSL: Double?
        var alt: Double?
        var eph: Double?
        var epx: Double?
        var epy: Double?
        var epv: Double?
        var speed: Double?
        var track: Double?
        var badField: String?
        /// The scan read `device` as a plain string (printable ASCII, no escapes): `VisibleName`'s rule and NFC need
        /// no look-up.
        var devicePlain = false

        /// `take(key, .number(n))`, for the scan: without the value's enum and the switch over it, for the six or so
        /// numbers of every line.
        @inline(__always)
        mutating func take(_ key: TPVField, number n: Double) {
            switch key {
            case .mode: mode = n
            case .lat: lat = n
            case .lon: lon = n
            case .altHAE: altHAE = n
            case .altMSL: altMSL = n
            case .alt: alt = n
            case .eph: eph = n
            case .epx: epx = n
            case .epy: epy = n
            case .epv: epv = n
            case .speed: speed = n
            case .track: track = n
            case .class, .device, .time: take(key, .number(n))
            }
        }

        mutating func take(_ key: TPVField, _ value: FieldValue) {
            func number() -> Double? {
                switch value {
                case .number(let n): return n
                case .null: return nil
                default:
                    badField = badField ?? key.rawValue
                    return nil
                }
            }
            func text() -> String? {
                // A vehicle named by a number (or anything but a string) is refused, not renamed `fleet`.
                switch value {
                case .string(let s): return s
                case .null: return nil
                default:
                    badField = badField ?? key.rawValue
                    return nil
                }
            }
            switch key {
            case .class:
                if case .string(let s) = value { klass = s } else { klass = nil }
            case .device: device = text()
            case .mode: mode = number()
            case .time:
                if case .time(let seconds) = value {
                    timeSeconds = seconds
                    time = nil
                } else {
                    time = text()
                    timeSeconds = nil
                }
            case .lat: lat = number()
            case .lon: lon = number()
            case .altHAE: altHAE = number()
            case .altMSL: altMSL = number()
            case .alt: alt = number()
            case .eph: eph = number()
            case .epx: epx = number()
            case .epy: epy = number()
            case .epv: epv = number()
            case .speed: speed = number()
            case .track: track = number()
            }
        }
    }

    private static func finish(_ f: TPVFields, defaultSubject: String, receivedAt: Date?) -> GPSDJSONReport {
        guard let klass = f.klass else { return .malformed(.init(.noClass, "no \"class\" member")) }
        guard klass == "TPV" else { return .other(klass) }
        if let badField = f.badField {
            return .malformed(.init(.wrongType, "TPV field \"\(badField)\" has the wrong type"))
        }
        if let device = f.device,
            let problem = f.devicePlain ? SubjectName.lengthProblem(device) : SubjectName.problem(device)
        {
            return .malformed(.init(.badDevice, "TPV \"device\" \(problem)"))
        }

        var fixTime: Date?
        if let seconds = f.timeSeconds {
            fixTime = Date(timeIntervalSince1970: seconds)
        } else if let time = f.time {
            guard let parsed = try? TimestampParser.parse(time) else {
                return .malformed(.init(.badTime, "TPV time \"\(time.prefix(40))\" is not a timestamp"))
            }
            fixTime = parsed
        }
        let modeValue = f.mode.flatMap { $0.isFinite && $0 == $0.rounded() ? Int(exactly: $0) : nil }
        let fixMode = modeValue.flatMap(FixMode.init(rawValue:)) ?? .unknown
        return .tpv(
            Fix(
                subject: f.device.map { f.devicePlain ? $0 : VisibleName.normalized($0) } ?? defaultSubject,
                time: fixTime, receivedAt: receivedAt,
                mode: fixMode,
                latitude: finite(f.lat), longitude: finite(f.lon), altitudeHAE: finite(f.altHAE),
                altitudeMSL: finite(f.altMSL ?? f.alt),
                horizontalAccuracy: Fix.horizontalAccuracy(eph: f.eph, epx: f.epx, epy: f.epy),
                verticalAccuracy: finite(f.epv).flatMap { $0 >= 0 ? $0 : nil },
                speed: finite(f.speed).flatMap { $0 >= 0 ? $0 : nil },
                course: finite(f.track)))
    }

    /// Reads the common line in place into `fields`: one JSON object of members whose keys and string values are
    /// printable ASCII without escapes, and whose values are strings, numbers (plain ones read in place, the rest
    /// by the strict reader's own number reader) or `true`/`false`/`null`, each key once. False for anything else
    /// (an escape, a byte outside printable ASCII, a nested value, a repeated key, any syntax error), `fields`
    /// then partly filled: the strict reader reads the line whole, so the scan only ever decides lines the strict
    /// reader would read the same way.
    static func scanPlainObject(_ b: UnsafeBufferPointer<UInt8>, into fields: inout TPVFields) -> Bool {
        var scanner = PlainObjectScanner(b)
        return scanner.scan(into: &fields)
    }

    /// The TPV members the decoder reads; a key table lets the parser match them without building strings.
    enum TPVField: String, CaseIterable, Sendable {
        case `class`, device, mode, time, lat, lon, altHAE, altMSL, alt, eph, epx, epy, epv, speed, track

        /// The field whose name is `packed` (its up to 8 ASCII bytes, the first lowest), and a bit of its own.
        @inline(__always)
        static func matching(packed: UInt64) -> (TPVField, UInt32)? {
            switch packed {
            case 0x73_7361_6c63: (.class, 1 << 0)
            case 0x6563_6976_6564: (.device, 1 << 1)
            case 0x6564_6f6d: (.mode, 1 << 2)
            case 0x656d_6974: (.time, 1 << 3)
            case 0x74_616c: (.lat, 1 << 4)
            case 0x6e_6f6c: (.lon, 1 << 5)
            case 0x4541_4874_6c61: (.altHAE, 1 << 6)
            case 0x4c53_4d74_6c61: (.altMSL, 1 << 7)
            case 0x74_6c61: (.alt, 1 << 8)
            case 0x68_7065: (.eph, 1 << 9)
            case 0x78_7065: (.epx, 1 << 10)
            case 0x79_7065: (.epy, 1 << 11)
            case 0x76_7065: (.epv, 1 << 12)
            case 0x64_6565_7073: (.speed, 1 << 13)
            case 0x6b_6361_7274: (.track, 1 << 14)
            default: nil
            }
        }
    }

    private static let tpvFields = JSONKeyTable(TPVField.self)

    private static func finite(_ v: Double?) -> Double? {
        guard let v, v.isFinite else { return nil }
        return v
    }
}

/// The scan behind `GPSDJSON.scanPlainObject`: a position in a line, and no allocation but the strings it
/// keeps (the class, device and time) and, for a line with members the TPV does not read, their places.
private struct PlainObjectScanner {
    let b: UnsafeBufferPointer<UInt8>
    let n: Int
    var i = 0

    init(_ b: UnsafeBufferPointer<UInt8>) {
        self.b = b
        n = b.count
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while i < n {
            let c = b[i]
            // Every byte that is not whitespace, and so nearly every byte a compact line has here, is above 0x20:
            // one comparison for it instead of four.
            guard c <= 0x20, c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D else { return }
            i += 1
        }
    }

    /// The closing quote of a plain string whose first byte is at `i`, or nil.
    ///
    /// Eight bytes at a time while none of them can end the string or refuse it: a word with no quote, no
    /// backslash, no byte below 0x20 and none from 0x7F up is skipped whole (the tests of each byte in the word at
    /// once, as in "Bit Twiddling Hacks"' has-zero-byte, may flag a byte that is none of these after one that
    /// is, never miss one, and never flag one before the first that is). In a flagged word the lowest flagged byte
    /// is therefore the first that ends or refuses the string: the quote (its end) or any other (not plain).
    /// The last few bytes of the buffer are read one by one.
    @inline(__always)
    func plainStringEnd() -> Int? {
        var k = i
        while n - k >= 8, let base = b.baseAddress {
            let word = UInt64(littleEndian: UnsafeRawPointer(base + k).loadUnaligned(as: UInt64.self))
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            @inline(__always) func hasZeroByte(_ v: UInt64) -> UInt64 { (v &- ones) & ~v & highs }
            let flagged =
                hasZeroByte(word ^ (ones &* 0x22)) | hasZeroByte(word ^ (ones &* 0x5C))
                | hasZeroByte(word ^ (ones &* 0x7F)) | ((word &- ones &* 0x20) & ~word & highs) | (word & highs)
            if flagged != 0 {
                let at = k + flagged.trailingZeroBitCount / 8
                return b[at] == UInt8(ascii: "\"") ? at : nil
            }
            k += 8
        }
        while k < n {
            let c = b[k]
            if c == UInt8(ascii: "\"") { return k }
            if c < 0x20 || c >= 0x7F || c == UInt8(ascii: "\\") { return nil }
            k += 1
        }
        return nil
    }

    /// The number at `i` (on `-` or a digit) read in place when it is plain, and `i` past it: a minus, digits with
    /// no leading zero (or a single 0), a fraction of one digit or more, no exponent, at most 19 digits, a value the
    /// parser's exact paths read (`JSONParser.decimal`). Nil for anything else, `i` unmoved: the parser reads it
    /// then, with its own errors, as before.
    @inline(__always)
    mutating func plainNumber() -> Double? {
        var k = i
        let negative = b[k] == UInt8(ascii: "-")
        if negative { k += 1 }
        var mantissa: UInt64 = 0
        var digits = 0
        var exponent = 0
        guard k < n else { return nil }
        if b[k] == UInt8(ascii: "0") {
            k += 1
            if k < n, b[k] &- UInt8(ascii: "0") < 10 { return nil }
        } else {
            // Whole parts are short (a latitude's two digits, a speed's one or two): one by one.
            let start = k
            while k < n, case let d = b[k] &- UInt8(ascii: "0"), d < 10 {
                mantissa = mantissa &* 10 &+ UInt64(d)
                k += 1
            }
            guard k > start else { return nil }
            digits = k - start
        }
        if k < n, b[k] == UInt8(ascii: ".") {
            k += 1
            let start = k
            digitsAt(&k, into: &mantissa)
            guard k > start else { return nil }
            digits += k - start
            exponent = start - k
        }
        // An exponent, or more digits than a 64-bit mantissa holds: the parser's.
        guard digits <= 19, k == n || b[k] | 0x20 != UInt8(ascii: "e"),
            let value = JSONParser.decimal(mantissa, exponent: exponent)
        else { return nil }
        i = k
        return negative ? -value : value
    }

    /// Reads the digits from `k` on into `mantissa` (times ten for each, plus it; wrapping: the caller counts the
    /// digits) and moves `k` past them: up to eight at a time while eight bytes remain, then one by one. For a
    /// fraction (a coordinate's seven or nine digits): for one or two digits the plain loop costs less.
    ///
    /// Eight bytes less `0` each are digits where a byte is below 10; each byte that is not is flagged (high bit
    /// of the byte, or of the byte plus 0x76), exactly up to the first such byte, as in `plainStringEnd`. The
    /// digits before it, moved to the word's top bytes over zeros (leading zeros of the number), are combined in
    /// three multiplications (pairs, fours, eight: Lemire, "Faster Integer Parsing", 2018).
    @inline(__always)
    func digitsAt(_ k: inout Int, into mantissa: inout UInt64) {
        while n - k >= 8, let base = b.baseAddress {
            let word = UInt64(littleEndian: UnsafeRawPointer(base + k).loadUnaligned(as: UInt64.self))
            let t = word &- 0x3030_3030_3030_3030
            let flagged = (t | (t &+ 0x7676_7676_7676_7676)) & 0x8080_8080_8080_8080
            let count = flagged == 0 ? 8 : flagged.trailingZeroBitCount / 8
            guard count > 0 else { return }
            var v = t &<< UInt64(8 &* (8 &- count))
            v = ((v & 0x0F0F_0F0F_0F0F_0F0F) &* 2561) &>> 8
            v = ((v & 0x00FF_00FF_00FF_00FF) &* 6_553_601) &>> 16
            v = ((v & 0x0000_FFFF_0000_FFFF) &* 42_949_672_960_001) &>> 32
            mantissa = mantissa &* Self.powerOfTen(count) &+ v
            k += count
            if count < 8 { return }
        }
        while k < n, case let d = b[k] &- UInt8(ascii: "0"), d < 10 {
            mantissa = mantissa &* 10 &+ UInt64(d)
            k += 1
        }
    }

    /// 10^`count`, for 1 to 8.
    @inline(__always)
    static func powerOfTen(_ count: Int) -> UInt64 {
        switch count {
        case 1: 10
        case 2: 100
        case 3: 1000
        case 4: 10000
        case 5: 100_000
        case 6: 1_000_000
        case 7: 10_000_000
        default: 100_000_000
        }
    }

    /// Whether the four bytes at `i` are `word` (`null`, `true`, `fals`); moves past them if so.
    @inline(__always)
    mutating func four(_ a: UInt8, _ b1: UInt8, _ c: UInt8, _ d: UInt8) -> Bool {
        guard n - i >= 4, b[i] == a, b[i + 1] == b1, b[i + 2] == c, b[i + 3] == d else { return false }
        i += 4
        return true
    }

    /// The TPV fields met so far (their bits), and the places of the other members' keys.
    var seen: UInt32 = 0
    var others: [(start: Int, count: Int)] = []

    /// Notes the member whose key is at `keyStart` (`field`, if the TPV reads it): false if its key came before.
    @inline(__always)
    mutating func firstTime(_ field: (GPSDJSON.TPVField, UInt32)?, keyStart: Int, keyCount: Int) -> Bool {
        if let (_, bit) = field {
            guard seen & bit == 0 else { return false }
            seen |= bit
            return true
        }
        for other in others where other.count == keyCount {
            if memcmp(b.baseAddress! + other.start, b.baseAddress! + keyStart, keyCount) == 0 { return false }
        }
        guard others.count < 64 else { return false }
        others.append((keyStart, keyCount))
        return true
    }

    mutating func scan(into f: inout GPSDJSON.TPVFields) -> Bool {
        skipWhitespace()
        guard i < n, b[i] == UInt8(ascii: "{") else { return false }
        i += 1
        skipWhitespace()
        if i < n, b[i] == UInt8(ascii: "}") {
            i += 1
        } else {
            while true {
                skipWhitespace()
                guard i < n, b[i] == UInt8(ascii: "\"") else { return false }
                i += 1
                guard let keyEnd = plainStringEnd() else { return false }
                let keyStart = i
                let keyCount = keyEnd - keyStart
                i = keyEnd + 1
                var packed: UInt64 = 0
                if keyCount <= 8 {
                    if n - keyStart >= 8 {
                        // One load: the key's bytes and what follows, masked to the key (the first byte lowest).
                        let word = UInt64(
                            littleEndian: UnsafeRawPointer(b.baseAddress! + keyStart).loadUnaligned(as: UInt64.self))
                        packed = keyCount == 8 ? word : word & ((1 &<< UInt64(8 &* keyCount)) &- 1)
                    } else {
                        for k in 0..<keyCount { packed |= UInt64(b[keyStart + k]) &<< UInt64(8 * k) }
                    }
                }
                let field = keyCount <= 8 ? GPSDJSON.TPVField.matching(packed: packed) : nil
                skipWhitespace()
                guard i < n, b[i] == UInt8(ascii: ":") else { return false }
                i += 1
                skipWhitespace()
                guard i < n else { return false }
                let value: GPSDJSON.FieldValue
                let c = b[i]
                if c == UInt8(ascii: "\"") {
                    i += 1
                    guard let end = plainStringEnd() else { return false }
                    let text = UnsafeBufferPointer(rebasing: b[i..<end])
                    if field?.0 == .time, let seconds = TimestampParser.seconds(utf8: text) {
                        // Read straight from the bytes, without a string. A time it refuses is kept as text, as
                        // before, for `finish` to refuse with the parser's own error (`badTime`).
                        value = .time(seconds)
                    } else if field?.0 == .class, text.count == 3, text[0] == UInt8(ascii: "T"),
                        text[1] == UInt8(ascii: "P"), text[2] == UInt8(ascii: "V")
                    {
                        // Nearly every line's class: the literal, not a string made from the bytes.
                        value = .string("TPV")
                    } else {
                        value = .string(String(decoding: text, as: UTF8.self))
                    }
                    i = end + 1
                } else if c == UInt8(ascii: "-") || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) {
                    let number: Double
                    if let plain = plainNumber() {
                        number = plain
                    } else {
                        var parser = JSONParser(bytes: b)
                        parser.position = i
                        guard let parsed = try? parser.parseNumber() else { return false }
                        i = parser.position
                        number = parsed
                    }
                    guard firstTime(field, keyStart: keyStart, keyCount: keyCount) else { return false }
                    if let (key, _) = field { f.take(key, number: number) }
                    guard nextMember() else { return false }
                    if b[i - 1] == UInt8(ascii: ",") { continue }
                    break
                } else if four(0x6E, 0x75, 0x6C, 0x6C) {  // null
                    value = .null
                } else if four(0x74, 0x72, 0x75, 0x65) {  // true
                    value = .other
                } else if four(0x66, 0x61, 0x6C, 0x73), i < n, b[i] == 0x65 {  // false
                    i += 1
                    value = .other
                } else {
                    return false
                }
                guard firstTime(field, keyStart: keyStart, keyCount: keyCount) else { return false }
                if let (key, _) = field {
                    f.take(key, value)
                    // A plain string's bytes are 0x20-0x7E (`plainStringEnd`).
                    if key == .device, case .string = value { f.devicePlain = true }
                }
                guard nextMember() else { return false }
                if b[i - 1] == UInt8(ascii: ",") { continue }
                break
            }
        }
        skipWhitespace()
        return i == n
    }

    /// Past the `,` or `}` after a member's value; false for anything else.
    @inline(__always)
    mutating func nextMember() -> Bool {
        skipWhitespace()
        guard i < n, b[i] == UInt8(ascii: ",") || b[i] == UInt8(ascii: "}") else { return false }
        i += 1
        return true
    }
}
