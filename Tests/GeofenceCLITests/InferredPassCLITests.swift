import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

/// A sparse fleet end to end: passes between reports are stored, printed, listed and survive a restart.
@Suite("inferred passes through the engine")
struct InferredPassCLITests {
    static let start = 1_796_000_000.0
    static let origin = Coordinate(latitude: 48.85, longitude: 2.35)

    /// A fleet report of `truck-1` driving east at 28 m/s along the parallel of `origin`, `east` metres from it,
    /// at `seconds`.
    static func line(_ seconds: Int, east: Double) -> String {
        let p = offset(origin, north: 0, east: east)
        let time = TimestampParser.format(Date(timeIntervalSince1970: start + Double(seconds)))
        return
            #"{"class":"TPV","device":"truck-1","mode":3,"time":"\#(time)","lat":\#(p.latitude),"lon":\#(p.longitude),"eph":6,"speed":28,"track":90}"#
    }

    /// The events among `output`'s JSON lines (or a JSON array) that are inferred.
    static func inferred(_ lines: [String]) -> [JSONValue] {
        var out: [JSONValue] = []
        for line in lines {
            guard let event = try? JSON.parse(line) else { continue }
            if event["inferred"]?.boolValue == true { out.append(event) }
        }
        return out
    }

    static func field(_ events: [JSONValue], _ name: String) -> [String] {
        events.compactMap { $0[name]?.stringValue }
    }

    @Test("a drive reporting every 30 s past a 300 m region: inferred enter and exit at their times, stored, listed")
    func passThroughTheEngine() throws {
        let cli = try CLI()
        defer { cli.dir.remove() }
        // A region of 300 m on the road; the truck reports every 30 s (840 m), 420 m either side of its centre:
        // no report inside it.
        try cli.run("add", "--id", "yard-a", "--lat", "48.85", "--lon", "2.35", "--radius", "300")
        let reports = [Self.line(0, east: -1260), Self.line(30, east: -420), Self.line(60, east: 420)]
        let replay = try cli.run(["replay", "-"], stdin: reports.joined(separator: "\n") + "\n")
        #expect(replay.status == 0, "\(replay.stderr)")
        let passes = Self.inferred(replay.stdout.split(separator: "\n").map(String.init))
        #expect(Self.field(passes, "type") == ["enter", "exit"], "\(replay.stdout)")
        #expect(Set(Self.field(passes, "region")) == ["yard-a"])
        // Entered 300 m before the centre (at 30 + 120/28 s), left 300 m after it (at 30 + 720/28 s).
        let times = Self.field(passes, "time").compactMap { try? TimestampParser.parse($0) }
        let expected = [Self.start + 30 + 120.0 / 28, Self.start + 30 + 720.0 / 28]
        #expect(times.count == 2)
        for (time, want) in zip(times, expected) { #expect(abs(time.timeIntervalSince1970 - want) < 0.5) }
        let ids = Set(Self.field(passes, "id"))
        #expect(ids.count == 2)

        // The store has them, as the engine printed them.
        let listed = try cli.run(["events", "--json", "--region", "yard-a"])
        #expect(listed.status == 0, "\(listed.stderr)")
        let rows = try JSON.parse(listed.stdout).arrayValue ?? []
        // Each row holds the event as it was stored.
        let stored = rows.compactMap { $0["event"] }.filter { $0["inferred"]?.boolValue == true }
        #expect(Set(Self.field(stored, "id")) == ids, "\(listed.stdout)")
        #expect(Set(Self.field(stored, "time")) == Set(Self.field(passes, "time")))
    }

    @Test("a restart between two reports: the pass between the last stored report and the next is inferred")
    func passAcrossARestart() throws {
        let cli = try CLI()
        defer { cli.dir.remove() }
        try cli.run("add", "--id", "yard-a", "--lat", "48.85", "--lon", "2.35", "--radius", "300")
        let first = [Self.line(0, east: -1260), Self.line(30, east: -420)].joined(separator: "\n") + "\n"
        let before = try cli.run(["replay", "-"], stdin: first)
        #expect(before.status == 0, "\(before.stderr)")
        #expect(Self.inferred(before.stdout.split(separator: "\n").map(String.init)).isEmpty)
        // The engine stops; the next report comes to a new one, which has only the store.
        let after = try cli.run(["replay", "-"], stdin: Self.line(60, east: 420) + "\n")
        #expect(after.status == 0, "\(after.stderr)")
        let passes = Self.inferred(after.stdout.split(separator: "\n").map(String.init))
        #expect(Self.field(passes, "type") == ["enter", "exit"], "\(after.stdout)")
    }
}
