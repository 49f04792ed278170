import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

@Suite("Durations")
struct DurationParserTests {
    @Test(
        "accepted forms",
        arguments: [
            ("90s", 90.0), ("5m", 300), ("1h30m", 5400), ("2d", 172_800), ("500ms", 0.5), ("1.5h", 5400),
            ("30", 30), ("0", 0), ("0s", 0), ("2.25", 2.25), ("1d2h3m4s5ms", 93_784.005), ("1s500ms", 1.5),
            ("PT5M", 300), ("pt5m", 300), ("PT1H30M", 5400), ("P2D", 172_800), ("P1W", 604_800),
            ("P1DT12H", 129_600), ("PT0.5S", 0.5), ("PT1,5S", 1.5), ("1.5ms", 0.0015),
        ])
    func accepts(text: String, seconds: Double) throws {
        #expect(try DurationParser.parse(text) == seconds)
    }

    @Test(
        "rejections say what is wrong",
        arguments: [
            ("", "empty duration"), ("-5m", "is negative"), ("-1", "is negative"), ("nan", "not a finite number"),
            ("inf", "not a finite number"), ("+Infinity", "not a finite number"), ("5x", "unknown unit 'x'"),
            ("5min", "unknown unit 'min'"), ("5M", "unknown unit 'M'"), ("30m1h", "largest to smallest"),
            ("5m5m", "largest to smallest"), ("1h30", "without a unit"), ("1 h", "unexpected ' '"),
            (" 5s", "unexpected ' '"), ("1.h", "unexpected '.'"), (".5h", "unexpected '.'"), ("h", "unexpected 'h'"),
            ("+5m", "unexpected '+'"), ("1e3", "unknown unit 'e'"), ("36526d", "too long"),
            ("99999999999999999999999999999999h", "too long"),
            (String(repeating: "9", count: 400) + "s", "too long"), ("P", "not an ISO 8601 duration"),
            ("PT", "not an ISO 8601 duration"), ("P1DT", "not an ISO 8601 duration"), ("P1Y", "years or months"),
            ("P2M", "years or months"), ("PT5X", "not an ISO 8601 duration"), ("PT5M1H", "not an ISO 8601 duration"),
            ("P1D1W", "not an ISO 8601 duration"), ("PT-5M", "not an ISO 8601 duration"),
        ])
    func rejects(text: String, fragment: String) {
        #expect {
            try DurationParser.parse(text)
        } throws: { error in
            (error as? ValueError)?.message.contains(fragment) == true
        }
    }

    @Test func malformedTextMessageListsAcceptedForms() throws {
        let error = try #require(throws: ValueError.self) { try DurationParser.parse("soon") }
        #expect(
            error.message
                == "unexpected 's' in duration 'soon'; expected a duration like 90s, 5m, 1h30m, 2d, 500ms or 1.5h "
                + "(a bare number is seconds)")
    }

    @Test func maximumIsAccepted() throws {
        #expect(try DurationParser.parse("36525d") == DurationParser.maximumSeconds)
    }

    @Test(
        "canonical format",
        arguments: [
            (5400.0, "1h30m"), (300, "5m"), (0.5, "500ms"), (0, "0s"), (90, "1m30s"), (172_800, "2d"),
            (1.5, "1s500ms"), (93_784.005, "1d2h3m4s5ms"), (0.0015, "1.5ms"), (0.000_25, "0.25ms"), (-300, "-5m"),
            (.infinity, "inf"), (.nan, "nan"), (-Double.infinity, "-inf"),
        ])
    func formats(seconds: Double, text: String) {
        #expect(DurationParser.format(seconds) == text)
    }

    @Test func formatThenParseRoundTripsWholeMilliseconds() throws {
        var generator = SeededGenerator(seed: 42)
        for _ in 0..<2000 {
            let milliseconds = Double(generator.next() % 3_155_760_000_000)
            let seconds = milliseconds / 1000
            #expect(try DurationParser.parse(DurationParser.format(seconds)) == seconds)
        }
        for seconds in [0.001, 0.999, 59.999, 3599.999, 86_399.999, DurationParser.maximumSeconds] {
            #expect(try DurationParser.parse(DurationParser.format(seconds)) == seconds)
        }
    }
}

@Suite("Timestamps")
struct TimestampParserTests {
    static func date(_ seconds: Double) -> Date { Date(timeIntervalSince1970: seconds) }

    /// The line scan reads a time from its bytes (`seconds(utf8:)`), the common shape at fixed places: the value
    /// must be `parse`'s, to the bit, and whatever `parse` refuses it refuses, for every field at the edges of its
    /// range and beyond, leap seconds, other separators and lengths, and single bytes changed anywhere.
    @Test("the bytes' reader gives parse's value or nothing, on 300,000 times of the common shape and near it")
    func bytesReaderAgreesWithParse() {
        var random = SeededGenerator(seed: 12)
        func pick<T>(_ values: [T]) -> T { values[Int(random.next() % UInt64(values.count))] }
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        var agreed = 0
        var fast = 0
        for round in 0..<300_000 {
            let year = pick([
                0, 1, 1600, 1899, 1900, 1969, 1970, 2000, 2024, 2026, 2100, 9999, Int(random.next() % 10_000),
            ])
            let yearText = String(repeating: "0", count: 4 - String(year).count) + String(year)
            let month = pick([0, 1, 2, 3, 11, 12, 13, Int(random.next() % 12) + 1])
            let day = pick([0, 1, 28, 29, 30, 31, 32, Int(random.next() % 28) + 1])
            let hour = pick([0, 23, 24, Int(random.next() % 24)])
            let minute = pick([0, 59, 60, Int(random.next() % 60)])
            let second = pick([0, 59, 60, 61, Int(random.next() % 60)])
            let fraction = pick([
                "", ".000", ".5", ".999", ".123", ",250", ".1234",
                ".\(random.next() % 10)\(random.next() % 10)\(random.next() % 10)",
            ])
            let separator = pick(["T", "T", "T", "t", " "])
            let zone = pick(["Z", "Z", "Z", "z", "+00:00", ""])
            var text = Array(
                "\(yearText)-\(two(month))-\(two(day))\(separator)\(two(hour)):\(two(minute)):\(two(second))\(fraction)\(zone)"
                    .utf8)
            if round % 4 == 0, !text.isEmpty {
                text[Int(random.next() % UInt64(text.count))] = pick(Array("0123456789-:.TZ /a".utf8) + [0x00, 0xFF])
            }
            let bytesValue = text.withUnsafeBufferPointer { TimestampParser.seconds(utf8: $0) }
            // As dates, which is what both become (a date keeps its time from 2001, so a value's last bits may not
            // come back through one; the decoder's `Date(timeIntervalSince1970:)` is the one compared).
            let parsed = try? TimestampParser.parse(String(decoding: text, as: UTF8.self))
            let bytesDate = bytesValue.map { Date(timeIntervalSince1970: $0) }
            if bytesDate?.timeIntervalSinceReferenceDate.bitPattern == parsed?.timeIntervalSinceReferenceDate.bitPattern
            {
                agreed += 1
            } else {
                Issue.record(
                    "\(String(decoding: text, as: UTF8.self)): \(String(describing: bytesValue)) against \(String(describing: parsed))"
                )
                return
            }
            if text.count == 24 || text.count == 20, parsed != nil { fast += 1 }
        }
        #expect(agreed == 300_000)
        // The common shape is well represented among the accepted ones.
        #expect(fast > 10_000, "\(fast)")
    }

    @Test(
        "accepted forms",
        arguments: [
            ("2027-01-01T00:00:00Z", 1_798_761_600.0), ("2027-01-01", 1_798_761_600),
            ("2027-01-01T02:00:00+02:00", 1_798_761_600), ("2026-12-31T19:00:00-05:00", 1_798_761_600),
            ("2027-01-01T05:30:00+0530", 1_798_761_600), ("2027-01-01T02:00:00+02", 1_798_761_600),
            ("2027-01-01t00:00:00z", 1_798_761_600), ("2027-01-01 00:00:00Z", 1_798_761_600),
            ("2027-01-01T00:00Z", 1_798_761_600), ("2026-12-31T23:59:59-00:00", 1_798_761_599),
            ("2018-08-20T09:47:37.000Z", 1_534_758_457), ("2029-07-25T15:25:05.500Z", 1_879_687_505.5),
            ("2027-01-01T00:00:00.25Z", 1_798_761_600.25), ("2027-01-01T00:00:00,25Z", 1_798_761_600.25),
            ("1970-01-01T00:00:00Z", 0), ("1969-12-31T23:59:59.5Z", -0.5), ("2000-02-29T00:00:00Z", 951_782_400),
            ("2024-02-29", 1_709_164_800), ("1600-02-29", -11_670_998_400),
        ])
    func accepts(text: String, seconds: Double) throws {
        let parsed = try TimestampParser.parse(text)
        #expect(abs(parsed.timeIntervalSince1970 - seconds) < 1e-6, "\(text)")
    }

    @Test func longFractionsKeepNanosecondsAndIgnoreTheRest() throws {
        let parsed = try TimestampParser.parse("2027-01-01T00:00:00.1234567891234Z")
        #expect(abs(parsed.timeIntervalSince1970 - 1_798_761_600.123_456_789) < 1e-6)
        #expect(TimestampParser.format(parsed) == "2027-01-01T00:00:00.123Z")
    }

    @Test func leapSecondIsHeldAtTheLastMillisecondOfTheDay() throws {
        let leap = try TimestampParser.parse("2016-12-31T23:59:60Z")
        let before = try TimestampParser.parse("2016-12-31T23:59:59.5Z")
        let after = try TimestampParser.parse("2017-01-01T00:00:00Z")
        #expect(TimestampParser.format(leap) == "2016-12-31T23:59:59.999Z")
        #expect(before < leap && leap < after)
        let offsetLeap = try TimestampParser.parse("2017-01-01T01:59:60+02:00")
        #expect(offsetLeap == leap)
    }

    @Test(
        "rejections say what is wrong",
        arguments: [
            ("", "is not a timestamp"), ("yesterday", "is not a timestamp"), ("2027-1-01", "is not a timestamp"),
            ("27-01-01", "is not a timestamp"), ("2027-01-01T", "is not a timestamp"),
            ("2027-01-01T00", "is not a timestamp"), ("2027-01-01T00:00:00", "has no time zone"),
            ("2027-01-01T00:00", "has no time zone"), ("2027-01-01T00:00:00.Z", "is not a timestamp"),
            ("2027-01-01T00:00:00ZZ", "is not a timestamp"), ("2027-01-01T00:00:00+2", "is not a timestamp"),
            ("2027-01-01T00:00:00+02:0", "is not a timestamp"), ("2027-01-01T00:00:00 Z", "is not a timestamp"),
            ("2027-01-01Z", "is not a timestamp"), (" 2027-01-01", "is not a timestamp"),
            ("2027-01-01 ", "is not a timestamp"), ("2027-01-01X00:00:00Z", "is not a timestamp"),
            ("2027-00-01", "month 0 is out of range"), ("2027-13-01", "month 13 is out of range"),
            ("2027-01-00", "day 0 is out of range for month 1 (1-31)"),
            ("2027-04-31", "day 31 is out of range for month 4 (1-30)"),
            ("2027-02-29", "day 29 is out of range for February 2027 (1-28)"),
            ("1900-02-29", "day 29 is out of range for February 1900 (1-28)"),
            ("2027-01-01T24:00:00Z", "hour 24 is out of range"), ("2027-01-01T00:60:00Z", "minute 60 is out of range"),
            ("2027-01-01T00:00:61Z", "second 61 is out of range"), ("2027-01-01T12:00:60Z", "only valid for a leap"),
            ("2027-01-01T00:00:00+24:00", "offset"), ("2027-01-01T00:00:00+02:60", "offset"),
            ("２０２７-01-01", "is not a timestamp"),
        ])
    func rejects(text: String, fragment: String) {
        #expect {
            try TimestampParser.parse(text)
        } throws: { error in
            (error as? ValueError)?.message.contains(fragment) == true
        }
    }

    @Test(
        "format",
        arguments: [
            (0.0, "1970-01-01T00:00:00.000Z"), (1_798_761_600, "2027-01-01T00:00:00.000Z"),
            (1_796_047_387, "2026-11-30T14:03:07.000Z"), (1_879_687_505.5, "2029-07-25T15:25:05.500Z"),
            (-0.001, "1969-12-31T23:59:59.999Z"), (-86_400, "1969-12-31T00:00:00.000Z"),
            (951_782_400, "2000-02-29T00:00:00.000Z"), (0.0004, "1970-01-01T00:00:00.000Z"),
            (0.0006, "1970-01-01T00:00:00.001Z"), (1.9999, "1970-01-01T00:00:02.000Z"),
            (253_402_300_799.999, "9999-12-31T23:59:59.999Z"), (253_402_300_800, "+10000-01-01T00:00:00.000Z"),
            (-62_167_219_200, "0000-01-01T00:00:00.000Z"), (-62_167_219_201, "-0001-12-31T23:59:59.000Z"),
            (.nan, "1970-01-01T00:00:00.000Z"),
        ])
    func formats(seconds: Double, text: String) {
        #expect(TimestampParser.format(Self.date(seconds)) == text)
    }

    @Test func formatThenParseRoundTripsToTheMillisecond() throws {
        var generator = SeededGenerator(seed: 7)
        for _ in 0..<5000 {
            // 1900 to 2200, whole milliseconds.
            let milliseconds = Int64(generator.next() % 9_467_280_000_000) - 2_208_988_800_000
            let date = Self.date(Double(milliseconds) / 1000)
            let text = TimestampParser.format(date)
            let parsed = try TimestampParser.parse(text)
            #expect(abs(parsed.timeIntervalSince(date)) < 1e-6, "\(text)")
            #expect(TimestampParser.format(parsed) == text)
        }
    }

    @Test func civilCalendarMatchesADayByDayWalk() {
        var (year, month, day) = (1899, 12, 31)
        for days in CivilCalendar.daysFromCivil(
            year: 1899, month: 12, day: 31)...CivilCalendar.daysFromCivil(
                year: 2101, month: 1, day: 1)
        {
            #expect(CivilCalendar.daysFromCivil(year: year, month: month, day: day) == days)
            let civil = CivilCalendar.civilFromDays(days)
            #expect(civil.year == year && civil.month == month && civil.day == day)
            day += 1
            if day > CivilCalendar.daysInMonth(year: year, month: month) {
                day = 1
                month += 1
                if month > 12 {
                    month = 1
                    year += 1
                }
            }
        }
    }

    @Test func leapYears() {
        #expect(CivilCalendar.isLeapYear(2024))
        #expect(CivilCalendar.isLeapYear(2000))
        #expect(CivilCalendar.isLeapYear(1600))
        #expect(!CivilCalendar.isLeapYear(1900))
        #expect(!CivilCalendar.isLeapYear(2100))
        #expect(!CivilCalendar.isLeapYear(2027))
        #expect(CivilCalendar.daysInMonth(year: 2028, month: 2) == 29)
        #expect(CivilCalendar.daysInMonth(year: 2100, month: 2) == 28)
        #expect(CivilCalendar.daysFromCivil(year: 1970, month: 1, day: 1) == 0)
        #expect(CivilCalendar.daysFromCivil(year: 2000, month: 3, day: 1) == 11_017)
    }
}

@Suite("Expiry")
struct ExpiryParserTests {
    let now = Date(timeIntervalSince1970: 1_796_047_387)

    @Test func durationIsRelativeToNow() throws {
        #expect(try ExpiryParser.parse("2h", now: now) == now.addingTimeInterval(7200))
        #expect(try ExpiryParser.parse("PT30M", now: now) == now.addingTimeInterval(1800))
        #expect(try ExpiryParser.parse("90", now: now) == now.addingTimeInterval(90))
    }

    @Test func timestampIsAbsolute() throws {
        let expected = Date(timeIntervalSince1970: 1_798_761_600)
        #expect(try ExpiryParser.parse("2027-01-01T00:00:00Z", now: now) == expected)
        #expect(try ExpiryParser.parse("2027-01-01", now: now) == expected)
    }

    @Test func errorsSayBothFormsAreAccepted() throws {
        let tail = "expected a duration from now (like 2h or 1d12h) or a timestamp (like 2027-01-01T00:00:00Z)"
        let junk = try #require(throws: ValueError.self) { try ExpiryParser.parse("tomorrow", now: now) }
        #expect(junk.message == "unexpected 't' in duration 'tomorrow'; " + tail)
        let badDate = try #require(throws: ValueError.self) { try ExpiryParser.parse("2027-01-01T00", now: now) }
        #expect(badDate.message == "'2027-01-01T00' is not a timestamp; " + tail)
        let range = try #require(throws: ValueError.self) { try ExpiryParser.parse("2027-02-30", now: now) }
        #expect(range.message.contains("day 30 is out of range"))
        #expect(throws: ValueError.self) { try ExpiryParser.parse("-2h", now: now) }
    }
}

@Suite("Numbers and coordinates")
struct NumberParserTests {
    @Test(
        "accepted numbers",
        arguments: [
            ("-0.1246", -0.1246), ("51.5007", 51.5007), ("1e3", 1000), ("200", 200), ("+5", 5), (".5", 0.5),
            ("5.", 5), ("-1E-3", -0.001), ("0", 0), ("1e308", 1e308),
        ])
    func acceptsFinite(text: String, value: Double) throws {
        #expect(try NumberParser.finite(text) == value)
    }

    @Test(
        "rejected numbers",
        arguments: [
            ("nan", "'nan' is not a finite number"), ("NaN", "not a finite number"),
            ("-inf", "not a finite number"), ("inf", "not a finite number"), ("Infinity", "not a finite number"),
            ("1e999", "'1e999' is too large"), ("-1e999", "too large"), ("0x10", "'0x10' is hexadecimal"),
            ("-0x1p3", "hexadecimal"), (" 5", "' 5' has spaces around it"), ("5 ", "spaces around it"),
            ("5m", "'5m' is not a number"), ("", "empty value"), ("1e", "not a number"), ("e3", "not a number"),
            ("-", "not a number"), (".", "not a number"), ("1.2.3", "not a number"), ("1_000", "not a number"),
            ("1,5", "not a number"), ("--5", "not a number"),
        ])
    func rejectsFinite(text: String, fragment: String) {
        #expect {
            try NumberParser.finite(text)
        } throws: { error in
            guard let message = (error as? ValueError)?.message else { return false }
            return message.contains(fragment) && message.contains("expected a decimal number")
                || fragment.contains("too large") && message.contains(fragment)
        }
    }

    @Test func integers() throws {
        #expect(try NumberParser.integer("10") == 10)
        #expect(try NumberParser.integer("-3") == -3)
        #expect(try NumberParser.integer("+7") == 7)
        let fraction = try #require(throws: ValueError.self) { try NumberParser.integer("1.5") }
        #expect(fraction.message == "'1.5' is not a whole number; expected digits only, like 10")
        let overflow = try #require(throws: ValueError.self) { try NumberParser.integer("99999999999999999999") }
        #expect(overflow.message.contains("too large"))
        for bad in ["", "abc", "1e3", " 1", "nan", "0x10", "-"] {
            #expect(throws: ValueError.self) { try NumberParser.integer(bad) }
        }
    }

    @Test func latitudeRange() throws {
        #expect(try CoordinateParser.latitude("90") == 90)
        #expect(try CoordinateParser.latitude("-90") == -90)
        #expect(try CoordinateParser.latitude("51.5007") == 51.5007)
        let high = try #require(throws: ValueError.self) { try CoordinateParser.latitude("91") }
        #expect(high.message == "latitude 91 is out of range: must be between -90 and 90")
        let low = try #require(throws: ValueError.self) { try CoordinateParser.latitude("-90.5") }
        #expect(low.message == "latitude -90.5 is out of range: must be between -90 and 90")
        #expect(throws: ValueError("'nan' is not a finite number; expected a decimal number like 200, -0.1246 or 1e3"))
        {
            try CoordinateParser.latitude("nan")
        }
    }

    @Test func longitudeRange() throws {
        #expect(try CoordinateParser.longitude("-0.1246") == -0.1246)
        #expect(try CoordinateParser.longitude("180") == 180)
        #expect(try CoordinateParser.longitude("-180") == -180)
        let error = try #require(throws: ValueError.self) { try CoordinateParser.longitude("180.5") }
        #expect(error.message == "longitude 180.5 is out of range: must be between -180 and 180")
        #expect(throws: ValueError("longitude nan is not a finite number")) {
            try CoordinateParser.validateLongitude(.nan)
        }
    }

    @Test func coordinatePairs() throws {
        #expect(try CoordinateParser.coordinate("51.5007,-0.1246") == Coordinate(latitude: 51.5007, longitude: -0.1246))
        #expect(throws: ValueError.self) { try CoordinateParser.coordinate("51.5007") }
        #expect(throws: ValueError.self) { try CoordinateParser.coordinate("51.5007,-0.1246,3") }
        #expect(throws: ValueError("latitude 95 is out of range: must be between -90 and 90")) {
            try CoordinateParser.coordinate("95,0")
        }
    }
}

@Suite("Regions file entries")
struct RegionEntryTests {
    @Test func theFieldSwitchKnowsExactlyTheDocumentedFields() {
        for key in RegionJSON.fields.union(RegionJSON.outputOnlyFields) {
            #expect(RegionJSON.isKnownField(key), "\(key)")
        }
        for key in ["", "ID", "radious", "lat ", "state", "hook"] { #expect(!RegionJSON.isKnownField(key), "\(key)") }
    }

    @Test func idsWithControlCharactersAreRefusedWhetherASCIIOrNot() {
        for id in ["a\u{7}b", "tab\there", "del\u{7F}", "nel\u{85}x"] {
            #expect(throws: RegionValidationError.self, "\(id.debugDescription)") {
                try Region.validateID(id)
            }
        }
        for id in ["depot-12", "Zürich HB", "東京", "a b"] { #expect(throws: Never.self) { try Region.validateID(id) } }
    }

    @Test func entriesGivenInPartsAreCheckedAsOneList() throws {
        func entry(_ id: String) -> JSONValue { .object(["id": .string(id), "lat": 1, "lon": 2, "radius": 50]) }
        var decoder = RegionEntryDecoder(now: Date())
        decoder.add([entry("a"), entry("b")])
        decoder.add([entry("c"), entry("a"), .object(["id": "d", "lat": 1, "lon": 2])])
        #expect(decoder.count == 5)
        #expect(decoder.regions.map(\.id) == ["a", "b", "c"])
        #expect(
            decoder.problems == [
                "regions[3].id: \"a\" repeats the id of regions[0]", "regions[4].radius (id \"d\"): is missing",
            ])
        guard case .failure = decoder.result else {
            Issue.record("a list with problems must fail")
            return
        }
    }
}

@Suite("Regions file entries as written")
struct RegionEntryRangeTests {
    /// The entries the ranges cut out, parsed, against the entries the file decodes to.
    private func check(_ text: String, count: Int) throws {
        let bytes = Array(text.utf8)
        let ranges = try #require(RegionJSON.entryRanges(in: bytes), "\(text)")
        #expect(ranges.count == count)
        let cut = try ranges.map { try JSON.parse(Array(bytes[$0])) }
        let root = try JSON.parse(bytes)
        #expect(cut == (root.arrayValue ?? root["regions"]?.arrayValue), "\(text)")
    }

    @Test func entriesAreFoundWhereverTheFileSpellsThem() throws {
        try check(#"[]"#, count: 0)
        try check(#" { "regions" : [ ] } "#, count: 0)
        try check(#"[{"id":"a","lat":1,"lon":2,"radius":3}]"#, count: 1)
        try check(
            """
            {
              "comment": {"regions": [1, 2, 3], "note": "a ] and a } and a \\" in a string"},
              "version": 2, "flags": [true, null, -1.5e3],
              "regions": [
                {"id": "a]b}", "lat": 1, "lon": 2, "radius": 3, "name": "x\\\\", "notify": ["enter", "exit"]},
                {"id": "c", "lat": -1.25, "lon": 2e1, "radius": 30,
                 "hooks": {"enter": "echo \\"[{\\""}}
              ],
              "after": "regions"
            }
            """, count: 2)
        try check(
            "[\n\t{\"id\":\"a\",\"lat\":1,\"lon\":2,\"radius\":3}\r\n,\n{\"id\":\"b\",\"lat\":1,\"lon\":2,\"radius\":3}\n]",
            count: 2)
    }

    @Test func aKeyWithEscapesOrAnotherShapeIsLeftToTheDecodedRegions() {
        #expect(RegionJSON.entryRanges(in: Array(#"{"regi\u006fns": []}"#.utf8)) == nil)
        #expect(RegionJSON.entryRanges(in: Array(#"{"other": []}"#.utf8)) == nil)
        #expect(RegionJSON.entryRanges(in: Array(#""regions""#.utf8)) == nil)
        #expect(RegionJSON.entryRanges(in: Array("".utf8)) == nil)
        #expect(RegionJSON.entryRanges(in: Array(#"[{"id": "a""#.utf8)) == nil)
    }

    @Test func regionsTakenAreNotKeptByTheDecoder() throws {
        func entry(_ id: String) -> JSONValue { .object(["id": .string(id), "lat": 1, "lon": 2, "radius": 50]) }
        var decoder = RegionEntryDecoder(now: Date())
        decoder.add([entry("a"), entry("b")])
        #expect(decoder.takeRegions().map(\.id) == ["a", "b"])
        decoder.add([entry("c"), entry("a")])
        #expect(decoder.takeRegions().map(\.id) == ["c"])
        #expect(decoder.takeRegions().isEmpty)
        #expect(decoder.count == 4)
        #expect(decoder.problems == ["regions[3].id: \"a\" repeats the id of regions[0]"])
    }
}
