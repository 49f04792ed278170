import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// `geofence events` for a fleet: a subject column, and filters by region, subject, type and time.
@Suite("events: subject column and filters")
struct EventsFilterTests {
    static let depot = Coordinate(latitude: 48.85, longitude: 2.35)

    /// Two trucks, each outside, in the depot, and out again (a fix every 10 s).
    static func fleet() -> String {
        var lines: [String] = []
        for (n, truck) in ["truck-1", "truck-2"].enumerated() {
            for (i, north) in [400.0, 400, 0, 0, 0, 400, 400, 400].enumerated() {
                let p = offset(depot, north: north, east: 0)
                let time = TimestampParser.format(
                    Date(timeIntervalSince1970: 1_796_000_000 + Double(n * 1000 + i * 10)))
                lines.append(
                    #"{"class":"TPV","device":"\#(truck)","mode":3,"time":"\#(time)","lat":\#(p.latitude),"lon":\#(p.longitude),"eph":3}"#
                )
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    @Test("the table names each row's subject; --region, --subject, --type and --since pick the rows")
    func filters() throws {
        try withCLI { cli in
            try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100")
            try cli.run("add", "--id", "far", "--lat", "10", "--lon", "10", "--radius", "100")
            let replay = try cli.run(["replay", "-"], stdin: Self.fleet())
            #expect(replay.status == 0, "\(replay.stderr)")
            #expect(replay.lines.count == 6, "determined, enter, exit per truck: \(replay.stdout)")

            func rows(_ args: String...) throws -> [JSONValue] {
                let result = try cli.run(["events", "--json"] + args)
                #expect(result.status == 0, "\(result.stderr)")
                return try JSON.parse(result.stdout).arrayValue ?? []
            }
            func kinds(_ list: [JSONValue]) -> [String] {
                list.map { "\($0["subject"]?.stringValue ?? "-") \($0["type"]?.stringValue ?? "")" }
            }
            #expect(try rows().count == 6)
            #expect(try kinds(rows("--subject", "truck-2")) == ["truck-2 determined", "truck-2 enter", "truck-2 exit"])
            #expect(
                try kinds(rows("--type", "enter,exit")) == [
                    "truck-1 enter", "truck-1 exit", "truck-2 enter", "truck-2 exit",
                ])
            #expect(try kinds(rows("--subject", "truck-1", "--type", "exit")) == ["truck-1 exit"])
            #expect(try rows("--region", "far").isEmpty)
            #expect(try rows("--region", "depot").count == 6)
            #expect(
                try kinds(rows("--since", "2026-11-30T01:00:00Z")) == [
                    "truck-2 determined", "truck-2 enter", "truck-2 exit",
                ])
            #expect(try rows("--since", "1h").isEmpty, "the fixes are from 2026-11-30: none in the last hour")

            let table = try cli.run("events", "--subject", "truck-1")
            let header = table.lines.first?.split(separator: " ").map(String.init) ?? []
            #expect(header.prefix(5) == ["SEQ", "TIME", "EVENT", "REGION", "SUBJECT"], "\(table.stdout)")
            #expect(
                table.lines.count == 4
                    && table.lines.dropFirst().allSatisfy { $0.split(separator: " ")[3...4] == ["depot", "truck-1"] },
                "\(table.stdout)")
            let none = try cli.run("events", "--region", "far")
            #expect(none.status == 0 && none.stderr == "No events match.\n", "\(none.stderr)")

            let bad = try cli.run("events", "--type", "arrive")
            #expect(bad.status == 64)
            #expect(bad.stderr.hasPrefix("Error: invalid value for --type: \"arrive\" is not one of determined, enter"))
            let badSince = try cli.run("events", "--since", "yesterday")
            #expect(badSince.status == 64)
            #expect(badSince.stderr.hasPrefix("Error: invalid value for --since: \"yesterday\""), "\(badSince.stderr)")
        }
    }
}
