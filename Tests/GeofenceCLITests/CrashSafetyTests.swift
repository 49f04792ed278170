import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("crash safety")
struct CrashSafetyTests {
    /// A vehicle driving a loop through a ring of regions, again and again, as gpsd TPV lines.
    static func drive(laps: Int, regions: [Coordinate], start: Date) -> String {
        var lines: [String] = []
        var time = start
        var rng = SeededGenerator(seed: 99)
        for _ in 0..<laps {
            for (i, centre) in regions.enumerated() {
                let next = regions[(i + 1) % regions.count]
                // 40 one-second steps from this centre to the next, passing through both.
                for step in 0..<40 {
                    let f = Double(step) / 40
                    let lat = centre.latitude + (next.latitude - centre.latitude) * f
                    let lon = centre.longitude + (next.longitude - centre.longitude) * f
                    let jitter = offset(
                        Coordinate(latitude: lat, longitude: lon), north: Double.random(in: -2...2, using: &rng),
                        east: Double.random(in: -2...2, using: &rng))
                    lines.append(
                        #"{"class":"TPV","device":"/dev/ttyACM0","mode":3,"time":"\#(TimestampParser.format(time))","lat":\#(jitter.latitude),"lon":\#(jitter.longitude),"eph":4.5,"speed":12.0}"#
                    )
                    time = time.addingTimeInterval(1)
                }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    @Test("SIGKILL at random points of a replay: the store opens, no region is lost, printed events are stored")
    func killReplay() throws {
        try withCLI { cli in
            let hub = Coordinate(latitude: 48.2, longitude: 16.37)
            let centres = (0..<8).map { i in
                offset(hub, north: 600 * cos(Double(i) * .pi / 4), east: 600 * sin(Double(i) * .pi / 4))
            }
            for (i, c) in centres.enumerated() {
                let r = try cli.run(
                    "add", "--id", "stop-\(i)", "--lat", String(c.latitude), "--lon", String(c.longitude), "--radius",
                    "80")
                #expect(r.status == 0, "\(r.stderr)")
            }
            let file = cli.dir.file("drive.json")
            try Self.drive(laps: 200, regions: centres, start: Date(timeIntervalSince1970: 1_790_000_000)).write(
                toFile: file, atomically: true, encoding: .utf8)

            var rng = SeededGenerator(seed: 7)
            var printedTotal = 0
            var kills = 0
            for round in 0..<25 {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: GeofenceBinary.path)
                process.arguments = ["replay", file, "--state-dir", cli.stateDir]
                let out = Pipe()
                process.standardOutput = out
                process.standardError = FileHandle.nullDevice
                try process.run()
                // A kill at a random moment is the test: there is nothing to wait for.
                usleep(UInt32.random(in: 20_000...400_000, using: &rng))
                if process.isRunning {
                    kill(process.processIdentifier, SIGKILL)
                    kills += 1
                }
                process.waitUntilExit()
                let printed = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                // Only whole lines were printed by the process; a torn last line would be a bug of its own.
                let lines = printed.split(separator: "\n", omittingEmptySubsequences: true)
                #expect(printed.isEmpty || printed.hasSuffix("\n"), "round \(round): a torn line was printed")

                let store = try StateStore(directory: cli.stateDir)
                #expect(try store.integrityCheck().isEmpty, "round \(round)")
                #expect(try store.regions.all().map(\.region.id).sorted() == (0..<8).map { "stop-\($0)" })
                for line in lines {
                    let id = try #require(try JSON.parse(String(line))["id"]?.stringValue)
                    #expect(
                        try store.outbox.contains(id: id), "round \(round): printed event \(id) is not in the outbox")
                }
                printedTotal += lines.count
            }
            #expect(kills >= 15, "the replay finished too fast for the kills to land mid-stream (\(kills) kills)")
            #expect(printedTotal > 50, "too few events were printed to prove anything (\(printedTotal))")
        }
    }
}
