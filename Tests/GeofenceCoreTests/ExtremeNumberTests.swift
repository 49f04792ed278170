import Foundation
import GeofenceCore
import Testing

/// Numbers from outside at and past the ends of what a `Double` and a `Date` hold, through every decoder a fix
/// comes in by and the code that classifies it: each is refused with a reason or taken as a finite value, and
/// nothing traps (issue 23, item 1: `"tst":1e300` ended the engine in `Int(...)`).
@Suite("extreme numbers in fixes")
struct ExtremeNumberTests {
    static let now = Date(timeIntervalSince1970: 1_796_000_000)

    static func ownTracks(_ tst: String) -> GPSDJSONReport {
        let payload = Array(#"{"_type":"location","lat":48.2,"lon":16.3,"tst":\#(tst)}"#.utf8)
        return FleetPayload.decode(topic: "owntracks/u/d", payload: payload)
    }

    /// `tst` values and whether each is a time the engine takes.
    static let tstTable: [(text: String, taken: Bool)] = [
        ("1e300", false), ("1.7976931348623157e308", false), ("-1e300", false), ("-1", false), ("0", false),
        ("253402300800", false), ("9223372036854775807", false), ("18446744073709551616", false),
        ("253402300799.999", true), ("1796000000", true), ("1", true), ("1e-320", true), ("4.9e-324", true),
    ]

    @Test("OwnTracks tst: a time outside the years 1970-9999 is bad-time, one inside is a fix")
    func ownTracksTimes() {
        for (text, taken) in Self.tstTable {
            let report = Self.ownTracks(text)
            switch report {
            case .tpv(let fix):
                #expect(taken, "tst \(text) gave \(report)")
                let seconds = fix.time?.timeIntervalSince1970 ?? .nan
                #expect(Fix.representableTimes.contains(seconds))
                // The path that trapped: the future check and its words.
                let filter = FixFilterConfiguration()
                _ = FixUsability.reason(
                    FixFilter.classify(fix, now: Self.now, configuration: filter), configuration: filter)
            case .malformed(let problem):
                #expect(!taken, "tst \(text) was refused: \(problem)")
                #expect(problem.kind == .badTime, "tst \(text): \(problem)")
            case .other:
                Issue.record("tst \(text) gave \(report)")
            }
        }
    }

    @Test("the message of the issue is one bad-time, and its words say why")
    func theMessageOfTheIssue() {
        let payload = Array(#"{"_type":"location","lat":48.2,"lon":16.3,"tst":1e300}"#.utf8)
        guard case .malformed(let problem) = FleetPayload.decode(topic: "in/a", payload: payload) else {
            Issue.record("not refused")
            return
        }
        #expect(problem.kind == .badTime)
        #expect(problem.description.contains("1e+300"), "\(problem)")
    }

    @Test("a fix dated 1e300 s (made by a library caller) is classified and filtered without a trap")
    func classifyingAnyTime() {
        let configuration = FixFilterConfiguration()
        for seconds in [1e300, -1e300, .greatestFiniteMagnitude, 9.3e18, -9.3e18, .infinity, .nan] {
            let fix = Fix(
                subject: "v", time: Date(timeIntervalSince1970: seconds), mode: .threeD, latitude: 48.2,
                longitude: 16.3)
            // A time beyond the years 0000-9999 is no time, to a fleet source as to the filter.
            let verdict = FixFilter.classify(fix, now: Self.now, configuration: configuration)
            #expect(verdict == .noTime, "\(seconds)")
            #expect(FixUsability.reason(verdict, configuration: configuration)?.kind == FixUsability.noTime)
            var filter = FixFilter()
            #expect(filter.evaluate(fix) == .rejected(.noTime), "\(seconds)")
            // The words of any lead or age are made without a trap.
            for why in [
                FixUsability.reason(.future(lead: seconds), configuration: configuration)?.why,
                FixUsability.reason(.stale(age: seconds), configuration: configuration)?.why,
            ] {
                #expect(why?.isEmpty == false, "\(seconds)")
            }
        }
        #expect(Fix.seconds(1e300) == "1000000000000000")
        #expect(Fix.seconds(-.infinity) == "-1000000000000000")
        #expect(Fix.seconds(.nan) == "nan")
        #expect(Fix.seconds(61.4) == "61")
    }

    /// TPV lines and what each must give: `nil` for a fix, else the kind it is refused as.
    static let tpvTable: [(members: String, refused: MalformedLine.Kind?)] = [
        (#""mode":3,"time":"9999-12-31T23:59:59.999Z","lat":48.2,"lon":16.3"#, nil),
        (#""mode":3,"time":"9999-12-31T23:59:59-23:59","lat":48.2,"lon":16.3"#, .badTime),
        (#""mode":3,"time":"0000-01-01T00:00:00+00:01","lat":48.2,"lon":16.3"#, .badTime),
        (#""mode":3,"time":"99999-01-01T00:00:00Z","lat":48.2,"lon":16.3"#, .badTime),
        (#""mode":3,"time":"+275760-09-13T00:00:00Z","lat":48.2,"lon":16.3"#, .badTime),
        (#""mode":3,"time":1e300,"lat":48.2,"lon":16.3"#, .wrongType),
        (#""mode":1e20,"lat":48.2,"lon":16.3"#, nil),
        (#""mode":-9223372036854775809,"lat":48.2,"lon":16.3"#, nil),
        (#""mode":3,"lat":1e-320,"lon":1.7976931348623157e308,"eph":1e308,"epv":1e308,"ept":1e308"#, nil),
        (#""mode":3,"lat":48.2,"lon":16.3,"speed":-1e300,"track":1e300,"alt":-1e308,"epx":1e308,"epy":1e308"#, nil),
        (#""mode":3,"lat":48.2,"lon":16.3,"eph":1e999"#, .notJSON),
        (#""mode":3,"lat":NaN,"lon":16.3"#, .notJSON),
        (#""mode":3,"lat":48.2,"lon":Infinity"#, .notJSON),
        (#""mode":3,"lat":-Infinity,"lon":16.3"#, .notJSON),
        (#""mode":3,"lat":48.2,"lon":16.3,"eph":-0.0,"epv":-1e-320"#, nil),
    ]

    @Test("TPV lines with extreme numbers: a finite fix or a refusal by reason, as JSON lines and as MQTT")
    func tpvLines() {
        for (members, refused) in Self.tpvTable {
            let line = #"{"class":"TPV","device":"v1",\#(members)}"#
            for report in [
                GPSDJSON.decode(Array(line.utf8)), FleetPayload.decode(topic: "in/a", payload: Array(line.utf8)),
            ] {
                switch report {
                case .tpv(let fix):
                    #expect(refused == nil, "\(members) gave \(fix)")
                    for value in [fix.latitude, fix.longitude, fix.horizontalAccuracy, fix.verticalAccuracy, fix.speed]
                    {
                        #expect(value?.isFinite ?? true, "\(members)")
                    }
                    #expect((fix.horizontalAccuracy ?? 0) >= 0 && (fix.verticalAccuracy ?? 0) >= 0, "\(members)")
                    for now in [Self.now, nil] {
                        let configuration = FixFilterConfiguration()
                        let verdict = FixFilter.classify(fix, now: now, configuration: configuration)
                        _ = FixUsability.reason(verdict, configuration: configuration)
                    }
                    var filter = FixFilter()
                    _ = filter.evaluate(fix)
                case .malformed(let problem):
                    #expect(problem.kind == refused, "\(members): \(problem)")
                case .other:
                    Issue.record("\(members) gave \(report)")
                }
            }
        }
    }
}
