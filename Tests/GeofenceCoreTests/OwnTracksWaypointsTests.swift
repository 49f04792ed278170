import Foundation
import GeofenceCore
import Testing

/// OwnTracks waypoints become regions of the phone that sent them, keyed by their `tst`; deletions are the
/// apps' own marks; a bad waypoint is named by its field and makes nothing.
@Suite("OwnTracks waypoints")
struct OwnTracksWaypointsTests {
    static let now = Date(timeIntervalSince1970: 1_796_000_000)

    static func decode(_ text: String, subject: String = "alice/phone") throws(RegionValidationError)
        -> OwnTracksWaypoints.Update
    {
        let object: JSONValue
        do { object = try JSON.parse(Array(text.utf8)) } catch {
            throw RegionValidationError(field: "(json)", message: "\(error)")
        }
        return try OwnTracksWaypoints.decodeMessage(object, subject: subject, now: now)
    }

    @Test("a waypoint: id owntracks/USER/DEVICE/TST, desc the name, rad the radius, for that vehicle only")
    func waypoint() throws {
        let update = try Self.decode(
            #"{"_type":"waypoint","desc":"Home","lat":51.5007,"lon":-0.1246,"rad":150,"tst":1385997757,"rid":"f7676c"}"#
        )
        #expect(!update.wholeList)
        guard case .define(let region)? = update.entries.first, update.entries.count == 1 else {
            Issue.record("not one region: \(update)")
            return
        }
        #expect(region.id == "owntracks/alice/phone/1385997757")
        #expect(region.name == "Home")
        #expect(region.center == Coordinate(latitude: 51.5007, longitude: -0.1246))
        #expect(region.radius == 150)
        #expect(region.subjects == ["alice/phone"])
        #expect(region.notify == [.enter, .exit])
        #expect(OwnTracksWaypoints.creationTime(regionID: region.id) == 1_385_997_757)
    }

    @Test("the booklet's quoted numbers are numbers; the same waypoint sent again is the same region")
    func quotedNumbers() throws {
        let quoted = try Self.decode(
            #"{"_type":"waypoint","desc":"Paris is lovely","lat":"48.858330","lon":"2.295130","rad":"50","tst":"1385997757"}"#
        )
        let plain = try Self.decode(
            #"{"_type":"waypoint","desc":"Paris is lovely","lat":48.85833,"lon":2.29513,"rad":50,"tst":1385997757}"#)
        #expect(quoted == plain)
    }

    @Test("deletion: lat or lon out of range (the apps' mark) and rad 0 remove the region of that tst")
    func removals() throws {
        for text in [
            #"{"_type":"waypoint","lat":1000,"lon":0,"rad":50,"tst":1385997757}"#,
            #"{"_type":"waypoint","lat":10,"lon":-1000,"rad":50,"tst":1385997757}"#,
            #"{"_type":"waypoint","desc":"x","lat":10,"lon":10,"rad":0,"tst":1385997757}"#,
            #"{"_type":"waypoint","lat":10,"lon":10,"tst":1385997757}"#,
        ] {
            let update = try Self.decode(text)
            guard case .remove(let id, _)? = update.entries.first else {
                Issue.record("not a removal: \(text)")
                continue
            }
            #expect(id == "owntracks/alice/phone/1385997757")
        }
    }

    @Test("a bad waypoint is one error naming its field, as the waypoint spells it")
    func bad() {
        let cases: [(String, String)] = [
            (#"{"_type":"waypoint","lat":1,"lon":2,"rad":50}"#, "tst"),
            (#"{"_type":"waypoint","lat":1,"lon":2,"rad":50,"tst":1.5}"#, "tst"),
            (#"{"_type":"waypoint","lat":1,"lon":2,"rad":50,"tst":1e300}"#, "tst"),
            (#"{"_type":"waypoint","lat":1,"lon":2,"rad":50,"tst":-4}"#, "tst"),
            (#"{"_type":"waypoint","lat":1,"lon":2,"rad":-5,"tst":1385997757}"#, "rad"),
            (#"{"_type":"waypoint","lat":1,"lon":2,"rad":600000,"tst":1385997757}"#, "rad"),
            (#"{"_type":"waypoint","lat":true,"lon":2,"rad":5,"tst":1385997757}"#, "lat"),
            (#"{"_type":"waypoint","lat":"near","lon":2,"rad":5,"tst":1385997757}"#, "lat"),
            (#"{"_type":"waypoint","lon":2,"rad":5,"tst":1385997757}"#, "lat"),
            (#"{"_type":"waypoint","lat":1,"lon":2,"rad":5,"tst":1385997757,"desc":7}"#, "desc"),
            (#"{"_type":"waypoint","lat":1,"lon":2,"rad":5,"tst":1385997757,"desc":"a\u202Eb"}"#, "desc"),
            (#"{"_type":"waypoint","lat":1,"lon":2,"rad":5,"tst":1385997757,"rid":5}"#, "rid"),
            (#"{"_type":"waypoints","waypoints":{}}"#, "waypoints"),
            (#"{"_type":"waypoints"}"#, "waypoints"),
            (
                #"{"_type":"waypoints","waypoints":[{"lat":1,"lon":2,"rad":5,"tst":1385997757},{"lat":1,"lon":2,"rad":-1,"tst":1385997758}]}"#,
                "waypoints[1].rad"
            ),
            (
                #"{"_type":"waypoints","waypoints":[{"lat":1,"lon":2,"rad":5,"tst":1385997757},{"lat":1,"lon":2,"rad":5,"tst":1385997757}]}"#,
                "waypoints[1].tst"
            ),
            (
                #"{"_type":"waypoints","waypoints":[{"_type":"location","lat":1,"lon":2,"rad":5,"tst":1}]}"#,
                "waypoints[0]._type"
            ),
        ]
        for (text, field) in cases {
            #expect(throws: RegionValidationError.self, "\(text)") { try Self.decode(text) }
            do {
                _ = try Self.decode(text)
            } catch {
                #expect(error.field == field, "\(text): \(error)")
            }
        }
    }

    @Test("a waypoints list is the device's whole set, each entry a region or a removal")
    func list() throws {
        let update = try Self.decode(
            #"{"_type":"waypoints","waypoints":[{"_type":"waypoint","desc":"Home","lat":51.5,"lon":-0.12,"rad":100,"tst":1700000000},{"desc":"Gone","lat":-999,"lon":0,"rad":10,"tst":1700000001}]}"#
        )
        #expect(update.wholeList)
        #expect(
            update.entries.map(\.regionID) == ["owntracks/alice/phone/1700000000", "owntracks/alice/phone/1700000001"])
        if case .remove = update.entries[1] {} else { Issue.record("the second is no removal: \(update.entries[1])") }
    }

    @Test("an .otrw file imports as regions owntracks/TST for every vehicle, all or nothing")
    func otrwFile() throws {
        let file = #"""
            {"_type":"waypoints","waypoints":[
              {"_type":"waypoint","desc":"Home","lat":51.5007,"lon":-0.1246,"rad":150,"tst":1700000000},
              {"_type":"waypoint","desc":"Work","lat":"51.52","lon":"-0.08","rad":"80","tst":"1700000100","rid":"ab12cd"}]}
            """#
        let regions = try RegionJSON.decodeFile(Array(file.utf8), now: Self.now).get()
        #expect(regions.map(\.id) == ["owntracks/1700000000", "owntracks/1700000100"])
        #expect(regions.map(\.name) == ["Home", "Work"])
        #expect(regions.map(\.radius) == [150, 80])
        #expect(regions.allSatisfy { $0.subjects == nil })
        let bad = #"""
            {"_type":"waypoints","waypoints":[
              {"desc":"Home","lat":51.5,"lon":-0.12,"rad":150,"tst":1700000000},
              {"desc":"Gone","lat":-999,"lon":0,"rad":10,"tst":1700000001},
              {"desc":"Far","lat":1,"lon":1,"rad":9e9,"tst":1700000002}]}
            """#
        guard case .failure(let error) = RegionJSON.decodeFile(Array(bad.utf8), now: Self.now) else {
            Issue.record("a file with bad waypoints was taken")
            return
        }
        #expect(error.problems.count == 2, "\(error)")
        #expect(error.problems.first?.hasPrefix("waypoints[1].lat: -999 is out of range") == true, "\(error)")
        #expect(error.problems.last?.hasPrefix("waypoints[2].rad: 9000000000 is out of range") == true, "\(error)")
        let noList = RegionJSON.decodeFile(Array(#"{"_type":"waypoints"}"#.utf8), now: Self.now)
        #expect(
            noList == .failure(RegionFileError(problems: [#"the OwnTracks waypoints file has no "waypoints" array"#])))
    }

    @Test("a transition's tid is the vehicle's last two characters; wtst only from a waypoint's region id")
    func trackerAndCreation() {
        #expect(OwnTracksJSON.trackerID(subject: "alice/phone") == "ne")
        #expect(OwnTracksJSON.trackerID(subject: "truck-7") == "-7")
        #expect(OwnTracksJSON.trackerID(subject: "é") == "é")
        #expect(OwnTracksWaypoints.creationTime(regionID: "owntracks/alice/phone/1700000000") == 1_700_000_000)
        #expect(OwnTracksWaypoints.creationTime(regionID: "owntracks/1700000000") == 1_700_000_000)
        for id in [
            "depot", "owntracks/alice/phone/home", "owntracks/", "x/owntracks/1", "owntracks/a/99999999999999999999",
        ] {
            #expect(OwnTracksWaypoints.creationTime(regionID: id) == nil, "\(id)")
        }
    }
}
