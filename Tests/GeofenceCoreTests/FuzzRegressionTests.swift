import Foundation
import GeofenceCore
import Testing

/// Inputs the libFuzzer harnesses in `Fuzz/` found to break an invariant (Docs/reliability.md,
/// "Fuzzing"), each checked here against the behaviour that fixed it. The same inputs are committed
/// as seeds under `Fuzz/Seeds/<harness>/regression-*`, so every fuzz run replays them too.
@Suite("Fuzz regressions")
struct FuzzRegressionTests {
    private static let now = Date(timeIntervalSince1970: 1_796_000_000.125)

    // MARK: GPSDJSONFuzzer

    /// `epx` and `epy` whose squares overflow gave an infinite horizontal accuracy, which the fix
    /// filter reads as "no estimate" and replaces by its default: a fix gpsd calls hopeless was kept.
    @Test func hugeEpxEpyGiveAFiniteHorizontalAccuracy() throws {
        let line = Array(#"{"class":"TPV","mode":2,"lat":-33.9,"lon":151.2,"epx":1e200,"epy":3}"#.utf8)
        guard case .tpv(let fix) = GPSDJSON.decode(line) else {
            Issue.record("not a TPV")
            return
        }
        let accuracy = try #require(fix.horizontalAccuracy)
        #expect(accuracy.isFinite)
        #expect(accuracy >= 1e200)
        #expect(fix.latitude == -33.9)

        let capped = Fix.horizontalAccuracy(eph: nil, epx: .greatestFiniteMagnitude, epy: .greatestFiniteMagnitude)
        #expect(capped == .greatestFiniteMagnitude)
        // Ordinary values are computed as before.
        #expect(Fix.horizontalAccuracy(eph: nil, epx: 3, epy: 4) == 5)
    }

    // MARK: RegionJSONFuzzer

    /// An expiry with a fraction finer than a millisecond came back changed from export (which
    /// writes milliseconds) and import: regions now hold it to the millisecond.
    @Test func subMillisecondExpiryRoundTrips() throws {
        let file = Array(
            #"""
            {"regions":[{"id":"iso","lat":10,"lon":20,"radius":30,"dwell":"PT1H30M",\#
            "expires":"2027-06-01T12:00:00.25680+05:30","notify":["dwell"]}]}
            """#.utf8)
        let regions = try RegionJSON.decodeFile(file, now: Self.now, createdBy: 1000).get()
        let region = try #require(regions.first)
        #expect(region.expires == Date(timeIntervalSince1970: 1_811_831_400.257))
        try expectRoundTrip(region)
    }

    /// A dwell finer than a microsecond (what export writes) came back changed, or as `0s`, which
    /// import refuses; a numeric dwell had no upper bound, and `1e300` exported as `1e+300s`.
    @Test(
        "dwell times are held to what export can write",
        arguments: [
            (#""dwell": 0.0000016"#, 0.000_002), (#""dwell": "1.0000004s""#, 1), (#""dwell": "0.0016ms""#, 0.000_002),
            (#""dwell": 36525.5"#, 36_525.5),
        ])
    func dwellRoundTrips(member: String, seconds: Double) throws {
        let file = Array(#"[{"id":"d","lat":0,"lon":0,"radius":1,\#(member)}]"#.utf8)
        let region = try #require(try RegionJSON.decodeFile(file, now: Self.now).get().first)
        #expect(region.dwell == seconds)
        try expectRoundTrip(region)
    }

    @Test(
        "dwell times export cannot write are refused",
        arguments: [#""dwell": 1e300"#, #""dwell": 0.0000004"#, #""dwell": "0.0001ms""#, #""dwell": 3155760001"#])
    func dwellOutOfRange(member: String) {
        let file = Array(#"[{"id":"d","lat":0,"lon":0,"radius":1,\#(member)}]"#.utf8)
        guard case .failure(let error) = RegionJSON.decodeFile(file, now: Self.now) else {
            Issue.record("\(member) was accepted")
            return
        }
        let message = "must be a positive duration of at most 36525d (100 years)"
        #expect(error.problems == [#"regions[0].dwell (id "d"): "# + message])
    }

    // MARK: ValueParsersFuzzer

    /// An offset or a fraction carried a timestamp over the edge of years 0000-9999, which `format`
    /// writes in the expanded form (`-0001-12-31T23:00:00.000Z`) that `parse` does not read.
    @Test(
        "timestamps outside the years 0000-9999 in UTC are refused",
        arguments: ["0000-01-01T00:00+01:00", "9999-12-31T23:59:59.9996Z", "9999-12-31T20:00:00-04:00"])
    func timestampsOverTheEdge(text: String) {
        #expect {
            try TimestampParser.parse(text)
        } throws: { error in
            (error as? ValueError)?.message.contains("outside the years 0000 to 9999") == true
        }
    }

    @Test(
        "timestamps at the edges of years 0000-9999 round trip",
        arguments: ["0000-01-01T00:00:00Z", "0000-01-01T01:00:00+01:00", "9999-12-31T23:59:59.9994Z"])
    func timestampsAtTheEdge(text: String) throws {
        let date = try TimestampParser.parse(text)
        let again = try TimestampParser.parse(TimestampParser.format(date))
        #expect(abs(again.timeIntervalSince(date)) <= 0.0005)
    }

    @Test func regionExpiryOverTheEdgeIsAProblemNotACrash() {
        let file = Array(#"[{"id":"e","lat":0,"lon":0,"radius":1,"expires":"0000-01-01T00:00:00+01:00"}]"#.utf8)
        guard case .failure(let error) = RegionJSON.decodeFile(file, now: Self.now) else {
            Issue.record("accepted")
            return
        }
        #expect(error.problems.count == 1)
        #expect(error.problems.first?.hasPrefix(#"regions[0].expires (id "e"): "#) == true)
    }

    /// Export, then import, must give back the same region (what `RegionJSONFuzzer` checks).
    private func expectRoundTrip(_ region: Region, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let definition = RegionJSON.encode(region)
        let text = JSONValue.object(definition).serialized()
        let again = try RegionJSON.decode(JSON.parse(text), now: Self.now, createdBy: region.createdBy)
        #expect(again == region, "\(text)", sourceLocation: sourceLocation)
    }
}

/// Regressions of `Fuzz/FleetPayloadFuzzer.swift` and of issue 23 (the seed `owntracks-tst-1e300`).
@Suite("Fuzz regressions: fleet payloads")
struct FleetPayloadFuzzRegressionTests {
    /// One OwnTracks message with `"tst":1e300` reached `Int(time.timeIntervalSince(now).rounded())` in the
    /// future check and trapped; it is now `bad-time`, and the check itself shows any lead without a trap.
    @Test func ownTracksTimeOfTenToThe300IsBadTime() {
        let payload = Array(#"{"_type":"location","lat":48.2,"lon":16.3,"tst":1e300}"#.utf8)
        let report = FleetPayload.decode(topic: "in/a", payload: payload)
        guard case .malformed(let problem) = report else {
            Issue.record("not refused: \(report)")
            return
        }
        #expect(problem.kind == .badTime)
        // A library caller's fix dated 1e300 is no time; a lead of 1e300 s is still worded without a trap.
        let fix = Fix(
            subject: "in/a", time: Date(timeIntervalSince1970: 1e300), mode: .twoD, latitude: 48.2, longitude: 16.3)
        let configuration = FixFilterConfiguration()
        #expect(
            FixFilter.classify(fix, now: Date(timeIntervalSince1970: 1_796_000_000), configuration: configuration)
                == .noTime)
        let reason = FixUsability.reason(.future(lead: 1e300 - 1_796_000_000), configuration: configuration)
        #expect(reason?.kind == FixUsability.futureTime)
        #expect(reason?.why.contains("1000000000000000 s ahead") == true, "\(String(describing: reason))")
    }
}
