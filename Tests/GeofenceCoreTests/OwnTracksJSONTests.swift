import Foundation
import GeofenceCore
import Testing

/// OwnTracks `location` messages become fixes with the units converted; everything else is said, not guessed.
@Suite("OwnTracks JSON")
struct OwnTracksJSONTests {
    static func decode(_ text: String, subject: String = "alice/phone") throws -> GPSDJSONReport {
        OwnTracksJSON.decode(try JSON.parse(text), subject: subject)
    }

    @Test("a location: lat, lon, acc in metres, tst in Unix seconds, vel km/h to m/s, cog, alt makes it 3D")
    func location() throws {
        let report = try Self.decode(
            #"{"_type":"location","tid":"ph","lat":48.85,"lon":2.35,"acc":12,"tst":1796000000,"vel":36,"cog":90,"alt":120,"vac":8}"#
        )
        guard case .tpv(let fix) = report else {
            Issue.record("not a fix: \(report)")
            return
        }
        #expect(fix.subject == "alice/phone")
        #expect(fix.time == Date(timeIntervalSince1970: 1_796_000_000))
        #expect(fix.latitude == 48.85 && fix.longitude == 2.35)
        #expect(fix.horizontalAccuracy == 12)
        #expect(fix.verticalAccuracy == 8)
        #expect(fix.speed == 10)
        #expect(fix.course == 90)
        #expect(fix.altitudeMSL == 120)
        #expect(fix.mode == .threeD)
        #expect(fix.receivedAt == nil, "judged by its own time, as fleet fixes are")
    }

    @Test("absent stays absent: no acc, vel or alt gives nil (and a 2D fix), never 0")
    func absentFields() throws {
        guard case .tpv(let fix) = try Self.decode(#"{"_type":"location","lat":1,"lon":2,"tst":1796000000}"#) else {
            Issue.record("not a fix")
            return
        }
        #expect(fix.horizontalAccuracy == nil && fix.speed == nil && fix.course == nil && fix.altitudeMSL == nil)
        #expect(fix.mode == .twoD)
    }

    @Test("other types are other; wrong types, bad tst and bad names are malformed with their kind")
    func refusals() throws {
        #expect(try Self.decode(#"{"_type":"transition","event":"enter"}"#) == .other("OwnTracks transition"))
        func kind(_ text: String, subject: String = "alice/phone") throws -> MalformedLine.Kind? {
            if case .malformed(let m) = try Self.decode(text, subject: subject) { return m.kind }
            return nil
        }
        #expect(try kind(#"{"_type":"location","lat":"48.85","lon":2.35}"#) == .wrongType)
        #expect(try kind(#"{"_type":"location","lat":48.85,"lon":2.35,"tid":7}"#) == .wrongType)
        #expect(try kind(#"{"_type":"location","lat":48.85,"lon":2.35,"tst":-5}"#) == .badTime)
        #expect(try kind(#"{"_type":"location","lat":48.85,"lon":2.35}"#, subject: "a\u{202E}b") == .badDevice)
        #expect(try kind(#"{"lat":48.85}"#) == .noClass)
    }

    @Test("the vehicle of a topic: USER/DEVICE of owntracks/USER/DEVICE, nil for any other topic")
    func subjects() {
        #expect(OwnTracksJSON.subject(topic: "owntracks/alice/phone") == "alice/phone")
        #expect(OwnTracksJSON.subject(topic: "owntracks/alice/phone/event") == "alice/phone")
        #expect(OwnTracksJSON.subject(topic: "owntracks/alice") == nil)
        #expect(OwnTracksJSON.subject(topic: "owntracks//phone") == nil)
        #expect(OwnTracksJSON.subject(topic: "fleet/alice/phone") == nil)
    }
}
