import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

/// `geofence replay` on the real receiver recordings in ../shared/fixtures/gpsd.
@Suite("geofence replay", .enabled(if: SharedFixtures.gpsdDirectory != nil, "\(SharedFixtures.missingReason)"))
struct ReplayTests {
    private func recording(_ name: String) -> String { SharedFixtures.gpsdDirectory! + "/\(name).log.chk" }

    private func events(_ result: GeofenceBinary.Result) throws -> [JSONValue] {
        try result.lines.map { try JSON.parse($0) }
    }

    @Test("--stats on the boat recording accepts one fix per epoch and counts the rest")
    func bundgStats() throws {
        try withCLI { cli in
            let result = try cli.run("replay", "--stats", "--json", recording("bundg_zeus_9"))
            #expect(result.status == 0, "\(result.stderr)")
            let stats = try JSON.parse(try #require(result.stderr.split(separator: "\n").last.map(String.init)))
            #expect(stats["tpv"]?.intValue == 2484)
            #expect(stats["accepted"]?.intValue == 148)
            // The other 2336 TPVs repeat an epoch: 2333 carry its time, 3 are partial reports sent before the
            // receiver gave a date (no time at all), counted apart so they can be told from duplicates.
            #expect(stats["rejected"]?["duplicate"]?.intValue == 2333)
            #expect(stats["rejected"]?["no-time"]?.intValue == 3)
            let rejected = try #require(stats["rejected"]?.objectValue)
            #expect(rejected.values.compactMap(\.intValue).reduce(0, +) == 2484 - 148)

            let text = try cli.run("replay", "--stats", recording("bundg_zeus_9"))
            #expect(text.stderr.contains("accepted"))
            #expect(text.stderr.contains("148"))
        }
    }

    /// One case per recording: regions placed on its path, and the events they must produce.
    struct Placement: Sendable, CustomTestStringConvertible {
        var recording: String
        var id: String
        var lat: Double
        var lon: Double
        var radius: Double
        /// Expected `type:state` sequence; `~` marks an inferred event.
        var expected: [String]
        var why: String
        var testDescription: String { "\(recording) \(id)" }
    }

    static let placements: [Placement] = [
        Placement(
            recording: "bundg_zeus_9", id: "harbour", lat: 52.848986667, lon: 5.310998333, radius: 60,
            expected: ["determined:outside", "enter:inside", "exit:outside"],
            why: """
                The boat sails ~430 m south-west at ~3 m/s with eph 11.4 m. A 60 m circle centred on the fix in \
                the middle of the track: it starts 215 m away (determined outside), passes through the centre and \
                leaves on the far side: one enter, one exit.
                """),
        Placement(
            recording: "haicom-305N", id: "walk-boundary", lat: -27.210858333, lon: 153.051905, radius: 10,
            expected: [],
            why: """
                The walk's accepted fixes (eph 20.9-43.7 m; the 142-400 m ones are refused) stay within ~21 m. \
                A 10 m circle on the walk's turning point is smaller than every fix's margin: it can never be \
                conclusively inside (accuracyLimited), and no fix is 31 m clear of it: no event at all, in \
                particular no enter/exit from the noise.
                """),
        Placement(
            recording: "haicom-305N", id: "walk-area", lat: -27.210858333, lon: 153.051905, radius: 40,
            expected: ["determined:inside"],
            why: "A 40 m circle holds the whole walk: determined inside, then nothing, however the fixes jitter."),
        Placement(
            recording: "quectel-eg25-g", id: "outlier", lat: 36.762769767, lon: 31.410763833, radius: 50,
            expected: ["determined:outside"],
            why: """
                The phone modem's fix at 19:15:25.98 lands ~190 m south of its track, claiming 77.9 m. A 50 m \
                circle around that outlier: the outlier's margin (77.9 m) exceeds the radius, so it cannot \
                count as inside; the track itself is far outside. No false enter.
                """),
        Placement(
            recording: "quectel-eg25-g", id: "jump", lat: 36.764238433, lon: 31.41177145, radius: 30,
            expected: ["determined:outside"],
            why: """
                At 19:15:28.98 the fix jumps ~60 m east (implied 93 m/s) claiming 30.4 m. A 30 m circle on the \
                jump: one fix with a margin as wide as the radius is not conclusive, and one fix would not be \
                confirmed anyway. No false enter.
                """),
        Placement(
            recording: "bt451", id: "parking", lat: 55.797022, lon: 23.569019, radius: 100,
            expected: ["determined:inside", "~exit:outside"],
            why: """
                The first segment stands still (eph 51.7 m) inside a 100 m circle: determined inside. The next \
                accepted fixes are the car, 1.9 km away and 23 hours later: the exit happened unseen, inferred.
                """),
        Placement(
            recording: "bt451", id: "road", lat: 55.7805, lon: 23.5787, radius: 150,
            expected: ["~enter:inside"],
            why: """
                A 150 m circle on the car's road. From the first segment, 1.9 km away, it is silently outside \
                (beyond the 1 km vicinity); the car appears inside after a 23-hour gap (its clock stepped back \
                a day, which the filter follows after 3 consistent fixes): an inferred enter.
                """),
        Placement(
            recording: "ublox-lea-4h", id: "site", lat: 49.12625, lon: -122.7101, radius: 100,
            expected: ["determined:outside", "~enter:inside"],
            why: """
                The first four fixes claim 189 m and sit 880 m north-west of the rest. Weighed rather than \
                refused (the old 100 m cap dropped them), they say the receiver is outside this 100 m circle \
                even at their stated accuracy: determined outside. The next fixes come 67 s later, within 30 m \
                of each other and well inside: an enter, inferred across the gap (880 m in 67 s is 13 m/s, \
                nothing a rule that believes stated accuracies could tell from a drive).
                """),
        Placement(
            recording: "ublox-lea-4h", id: "edge", lat: 49.12675, lon: -122.7101, radius: 30,
            expected: ["determined:outside"],
            why: """
                A 30 m circle 45-70 m north of the fixes. The first three (40-42 m accuracy) are too close to \
                its boundary to say anything; only the last two (21 m) are clear of it: determined outside, \
                late but right, and never an enter.
                """),
    ]

    @Test("regions placed across each recording's path produce exactly the expected events", arguments: placements)
    func recordings(placement: Placement) throws {
        try withCLI { cli in
            let added = try cli.run(
                "add", "--id", placement.id, "--lat", String(placement.lat), "--lon", String(placement.lon),
                "--radius", String(placement.radius))
            #expect(added.status == 0, "\(added.stderr)")
            let result = try cli.run("replay", recording(placement.recording))
            #expect(result.status == 0, "\(result.stderr)")
            let got = try events(result).map { e in
                (e["inferred"]?.boolValue == true ? "~" : "") + (e["type"]?.stringValue ?? "?") + ":"
                    + (e["state"]?.stringValue ?? "")
            }
            #expect(got == placement.expected, "\(placement.why)")
            for event in try events(result) {
                #expect(event["region"]?.stringValue == placement.id)
                #expect(event["radius"]?.doubleValue == placement.radius)
                #expect(event["fix"]?["accuracy"]?.doubleValue != nil)
            }
            // Replay persists events exactly as the daemon does: every printed event is in the outbox.
            let store = try StateStore(directory: cli.stateDir)
            for event in try events(result) {
                #expect(try store.outbox.contains(id: try #require(event["id"]?.stringValue)))
            }
        }
    }

    @Test("replay --stats of a city drive with eph 100-350 m refuses none of its fixes, and reports its crossings")
    func cityDriveStats() throws {
        let scenario = DecisionScenarios.cityDrive()
        try withCLI { cli in
            let regions = cli.dir.file("regions.json")
            let drive = cli.dir.file("drive.json")
            try scenario.regionsFile.write(toFile: regions, atomically: true, encoding: .utf8)
            try scenario.tpvLines.write(toFile: drive, atomically: true, encoding: .utf8)
            let imported = try cli.run("import", regions)
            #expect(imported.status == 0, "\(imported.stderr)")
            let result = try cli.run("replay", "--stats", "--json", drive)
            #expect(result.status == 0, "\(result.stderr)")
            let stats = try JSON.parse(try #require(result.stderr.split(separator: "\n").last.map(String.init)))
            #expect(stats["rejected"]?["too-inaccurate"]?.intValue == 0)
            #expect(stats["accepted"]?.intValue == scenario.fixes.count)
            var got: [String: [String]] = [:]
            for event in try events(result) {
                guard let type = event["type"]?.stringValue, type == "enter" || type == "exit" else { continue }
                got[event["region"]?.stringValue ?? "?", default: []].append(type)
            }
            for (id, expected) in scenario.required {
                #expect(got[id, default: []] == expected.map(\.rawValue), "\(id)")
            }
        }
    }
}
