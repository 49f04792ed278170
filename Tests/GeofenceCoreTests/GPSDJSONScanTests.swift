import Foundation
import GeofenceTestSupport
import Testing

@testable import GeofenceCore

/// `GPSDJSON.decode` reads the common line with an in-place scan and any other with the strict JSON reader:
/// whatever the line, its report must be the strict reader's (`decodeStrictly`), and the common lines must
/// take the scan (or it would be a test of nothing).
@Suite struct GPSDJSONScanTests {
    /// Lines as fleets and gpsd write them: the replay bench's, gpsd's with its other members, edge values.
    static let common: [String] = [
        #"{"class":"TPV","device":"veh-0042","mode":3,"time":"2026-12-03T10:00:01.000Z","lat":48.8566,"lon":2.3522,"eph":4.5,"speed":12.5,"track":271.4}"#,
        #"{"class":"TPV","device":"/dev/ttyACM0","status":2,"mode":3,"time":"2026-12-03T10:00:01.000Z","leapseconds":18,"ept":0.005,"lat":51.50101,"lon":-0.12512,"altHAE":73.2,"altMSL":27.1,"alt":27.1,"epx":3.1,"epy":4.2,"epv":8.6,"track":12.3,"magtrack":13.1,"speed":0.021,"climb":-0.01,"eps":0.8,"epc":17.3,"geoidSep":46.1,"eph":5.2,"sep":9.8}"#,
        #"{ "class" : "TPV" , "mode" : 2 , "lat" : -33.9 , "lon" : 151.2 , "eph" : null }"#,
        #"{"class":"TPV","mode":1}"#,
        #"{"class":"SKY","device":"/dev/ttyUSB0","nSat":12,"uSat":9}"#,
        #"{"class":"VERSION","release":"3.25","rev":"3.25","proto_major":3,"proto_minor":15}"#,
        #"{"class":"TPV","device":"truck-1","mode":3,"time":"2026-12-03T10:00:01Z","lat":1e1,"lon":-0.0,"eph":1.5E+2,"speed":0,"track":359.99999999999994}"#,
        #"{"class":"TPV","device":"x","mode":"3","lat":48.0,"lon":2.0}"#,
        #"{"class":"TPV","device":7,"mode":3,"lat":48.0,"lon":2.0}"#,
        #"{"class":"TPV","mode":3,"lat":true,"lon":2.0}"#,
        #"{"class":"TPV","device":"","mode":3}"#,
        #"{"class":"TPV","time":"yesterday","mode":3,"lat":1,"lon":2}"#,
        #"{"class":42}"#,
        #"{}"#,
        #"{"mode":3,"lat":48.0}"#,
        #"{"class":"TPV","mode":3.5,"lat":48.0,"lon":2.0,"extra":false,"other":null}"#,
    ]

    /// Bytes a mutation inserts: the syntax, escapes, non-ASCII, control characters, number parts.
    static let inserted: [UInt8] = Array(#"{}[]:,"\ -+.eE0159ntfu"#.utf8) + [0x01, 0x09, 0x0A, 0x7F, 0xC3, 0xA9, 0xFF]

    @Test("the common lines take the scan, and each decodes as the strict reader decodes it")
    func commonLines() {
        for line in Self.common {
            let bytes = Array(line.utf8)
            #expect(GPSDJSON.scansInPlace(bytes), "not scanned: \(line)")
            #expect(GPSDJSON.decode(bytes) == GPSDJSON.decodeStrictly(bytes), "\(line)")
        }
    }

    @Test("200,000 mutated lines: the same report as the strict reader's, whichever path reads them")
    func mutatedLines() {
        var random = SeededGenerator(seed: 29)
        var scanned = 0
        var total = 0
        for base in Self.common.map({ Array($0.utf8) }) {
            for _ in 0..<12_500 {
                var line = base
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    switch Int.random(in: 0..<5, using: &random) {
                    case 0 where !line.isEmpty:
                        line.remove(at: Int.random(in: 0..<line.count, using: &random))
                    case 1:
                        line.insert(
                            Self.inserted.randomElement(using: &random)!,
                            at: Int.random(in: 0...line.count, using: &random))
                    case 2 where !line.isEmpty:
                        line[Int.random(in: 0..<line.count, using: &random)] = Self.inserted.randomElement(
                            using: &random)!
                    case 3:
                        // A member again (a repeated key), or a member of another line.
                        let donor = Self.common.randomElement(using: &random)!
                        let members = donor.dropFirst().dropLast().split(separator: ",")
                        if let member = members.randomElement(using: &random), line.count > 1 {
                            line.insert(contentsOf: Array(("," + member).utf8), at: line.count - 1)
                        }
                    default:
                        line = Array(line.prefix(Int.random(in: 0...line.count, using: &random)))
                    }
                }
                total += 1
                if GPSDJSON.scansInPlace(line) { scanned += 1 }
                let fast = GPSDJSON.decode(line, defaultSubject: "fleet")
                let strict = GPSDJSON.decodeStrictly(line, defaultSubject: "fleet")
                if fast != strict {
                    Issue.record("\(String(decoding: line, as: UTF8.self)): \(fast) against \(strict)")
                    return
                }
            }
        }
        // Both paths are exercised: many mutations leave a valid plain line, many do not.
        #expect(scanned > total / 10 && scanned < total * 9 / 10, "\(scanned) of \(total) scanned")
    }

    @Test("a byte that ends or refuses a string, at every place in the scan's eight-byte words, in keys and values")
    func stringEnds() {
        // The quote ends the string early; the others make it not plain (the strict reader decides then).
        let specials: [UInt8] = [0x22, 0x5C, 0x00, 0x01, 0x09, 0x1F, 0x7F, 0x80, 0xC3, 0xFF, 0x20, 0x21, 0x7E]
        var checked = 0
        for length in 0..<20 {
            for special in specials {
                for inKey in [false, true] {
                    let run = Array(repeating: UInt8(ascii: "a"), count: length) + [special] + Array("bcdefghij".utf8)
                    var line = Array(#"{"class":"TPV","mode":3,"#.utf8)
                    if inKey {
                        line += [0x22] + run + Array(#"":1,"device":"veh-1""#.utf8)
                    } else {
                        line += Array(#""device":""#.utf8) + run + [0x22]
                    }
                    line += Array(#","lat":48.1,"lon":2.2,"time":"2026-12-03T10:00:01.000Z"}"#.utf8)
                    let fast = GPSDJSON.decode(line, defaultSubject: "fleet")
                    let strict = GPSDJSON.decodeStrictly(line, defaultSubject: "fleet")
                    #expect(fast == strict, "\(String(decoding: line, as: UTF8.self)): \(fast) against \(strict)")
                    checked += 1
                }
            }
        }
        #expect(checked == 20 * 13 * 2)
    }

    /// The scan reads a plain number itself (`plainNumber`) and leaves the rest to the parser: numbers of 1 to 22
    /// digits, with a point anywhere or none, leading zeros, a minus, an exponent, as a TPV's `lat` and `speed`.
    @Test("numbers of every shape: the scan's value is the strict reader's, to the bit")
    func numbersOfEveryShape() {
        var random = SeededGenerator(seed: 31)
        for _ in 0..<40_000 {
            var text = RandomDecimal.text(using: &random, leadingZeros: true)
            if Int.random(in: 0..<8, using: &random) == 0 {
                text += "e" + String(Int.random(in: -30...30, using: &random))
            }
            let line = Array(
                #"{"class":"TPV","device":"v","mode":3,"lat":\#(text),"lon":2,"speed":\#(text)}"#.utf8)
            let fast = GPSDJSON.decode(line)
            let strict = GPSDJSON.decodeStrictly(line)
            guard case .tpv(let a) = fast, case .tpv(let b) = strict else {
                #expect(fast == strict, "\(text)")
                continue
            }
            #expect(
                a.latitude?.bitPattern == b.latitude?.bitPattern && a.speed?.bitPattern == b.speed?.bitPattern,
                "\(text)")
        }
    }

    /// A fraction's digits are read eight bytes at a time while eight remain (`digitsAt`): runs of 1 to 19 digits,
    /// followed by every byte there is, ending 0 to 9 bytes before the line does, so that the run meets the end of
    /// the word, of the eight bytes left, and of the line at every place.
    @Test("a fraction's digits followed by any byte, at every distance from the line's end: the strict reader's value")
    func fractionDigitRuns() {
        var checked = 0
        for length in 1...19 {
            let digits = (0..<length).map { UInt8(ascii: "0") + UInt8(($0 * 7 + length) % 10) }
            for follower in 0...255 {
                for tail in 0...9 {
                    let line =
                        Array(#"{"class":"TPV","mode":3,"lon":2,"lat":4."#.utf8) + digits + [UInt8(follower)]
                        + Array(repeating: UInt8(ascii: " "), count: tail) + [UInt8(ascii: "}")]
                    let fast = GPSDJSON.decode(line, defaultSubject: "fleet")
                    let strict = GPSDJSON.decodeStrictly(line, defaultSubject: "fleet")
                    let text = String(decoding: line, as: UTF8.self)
                    if case .tpv(let a) = fast, case .tpv(let b) = strict {
                        #expect(a.latitude?.bitPattern == b.latitude?.bitPattern, "\(text)")
                    } else {
                        #expect(fast == strict, "\(text)")
                    }
                    checked += 1
                }
            }
        }
        #expect(checked == 19 * 256 * 10)
        // The common case does take the scan (or this would test the strict reader against itself).
        #expect(GPSDJSON.scansInPlace(Array(#"{"class":"TPV","mode":3,"lat":4.1234567890123,"lon":2}"#.utf8)))
    }

    @Test("gpsd's recordings (../shared/fixtures/gpsd): every line decodes as the strict reader decodes it")
    func recordings() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared/fixtures/gpsd")
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else {
            print("GPSDJSONScanTests: skipped the recordings: \(directory.path) is absent")
            return
        }
        var lines = 0
        var tpv = 0
        for name in names where name.hasSuffix(".chk") {
            let text = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
            for line in text.split(separator: "\n") {
                let bytes = Array(line.utf8)
                lines += 1
                let report = GPSDJSON.decode(bytes)
                #expect(report == GPSDJSON.decodeStrictly(bytes), "\(name): \(line)")
                if case .tpv = report { tpv += 1 }
            }
        }
        #expect(tpv > 0, "\(lines) lines, no TPV: the fixtures are not what this test reads")
    }
}
