import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// `geofence vehicles`: what the store knows of each vehicle, and `--prune` of the quiet ones.
@Suite("geofence vehicles")
struct VehiclesCommandTests {
    static let depot = Coordinate(latitude: 45.76, longitude: 4.84)

    /// TPV lines for a vehicle: `count` fixes a second apart from `start`, `north` metres from the depot.
    static func lines(_ subject: String, north: Double, start: Date, count: Int = 3) -> String {
        (0..<count).map { i in
            let p = offset(depot, north: north, east: 0)
            let time = TimestampParser.format(start.addingTimeInterval(Double(i)))
            return
                #"{"class":"TPV","device":"\#(subject)","mode":3,"time":"\#(time)","lat":\#(p.latitude),"lon":\#(p.longitude),"eph":5}"#
        }.joined(separator: "\n") + "\n"
    }

    @Test("lists every vehicle with its last fix and the regions it is inside; prunes the quiet ones")
    func listAndPrune() throws {
        try withCLI { cli in
            #expect(
                try cli.run("add", "--id", "depot", "--lat", "45.76", "--lon", "4.84", "--radius", "100").status == 0)
            let old = Date().addingTimeInterval(-40 * 86_400)
            let recent = Date().addingTimeInterval(-3600)
            let fed = try cli.run(
                ["replay", "-"],
                stdin: Self.lines("van-old", north: 10, start: old) + Self.lines("van-new", north: 500, start: recent))
            #expect(fed.status == 0, "\(fed.stderr)")

            let listed = try cli.run("vehicles", "--json")
            #expect(listed.status == 0, "\(listed.stderr)")
            let vehicles = try JSON.parse(listed.stdout).arrayValue ?? []
            #expect(vehicles.map { $0["subject"]?.stringValue } == ["van-new", "van-old"])
            #expect(vehicles[1]["inside"]?.arrayValue?.map(\.stringValue) == ["depot"])
            #expect(vehicles[0]["inside"]?.arrayValue?.isEmpty == true)
            #expect(vehicles[0]["lastFix"]?["accuracy"]?.doubleValue == 5)
            let text = try cli.run("vehicles")
            #expect(text.stdout.contains("van-old") && text.stdout.contains("depot"), "\(text.stdout)")

            let pruned = try cli.run("vehicles", "--prune", "30d", "--json")
            #expect(pruned.status == 0, "\(pruned.stderr)")
            #expect(try JSON.parse(pruned.stdout)["pruned"]?.arrayValue?.map(\.stringValue) == ["van-old"])
            let after = try JSON.parse(try cli.run("vehicles", "--json").stdout).arrayValue ?? []
            #expect(after.map { $0["subject"]?.stringValue } == ["van-new"])
            // Its events stay in the outbox.
            let events = try JSON.parse(try cli.run("events", "--json", "--subject", "van-old").stdout).arrayValue ?? []
            #expect(!events.isEmpty)

            let bad = try cli.run("vehicles", "--prune", "0s")
            #expect(bad.status == 64)
            #expect(bad.stderr.hasPrefix("Error: "))
        }
    }

    @Test("--prune with an engine serving the store refuses with 75 and changes nothing")
    func pruneRefusedWhileAnEngineRuns() async throws {
        let e = try await ControlSocketTests.Engine()
        let fed = try e.cli.run(
            ["replay", "-"], stdin: Self.lines("van-old", north: 10, start: Date().addingTimeInterval(-40 * 86_400)),
            environment: ["GEOFENCE_SOCKET": e.cli.dir.file("none.sock")])
        #expect(fed.status == 0, "\(fed.stderr)")
        let refused = try e.cli.run("vehicles", "--prune", "30d")
        #expect(refused.status == 75, "\(refused.stderr)")
        #expect(refused.stderr.split(separator: "\n").count == 1, "\(refused.stderr)")
        #expect(try e.cli.run("vehicles").stdout.contains("van-old"))
        _ = await e.daemon.stop()
    }
}
