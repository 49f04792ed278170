import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Numbers and lines from outside that once ended or fooled the engine (issue 23, items 1 and 8), through the
/// real binary: an MQTT message on a real broker, TPV lines on a real FIFO.
@Suite("outside numbers and over-long lines: refused and counted, the engine stays up", .serialized)
struct OutsideInputTests {
    /// The resident memory of a process, in KiB.
    static func residentKiB(_ pid: pid_t) -> Int {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        }
        return 0
    }

    @Test(
        "an OwnTracks tst of 1e300 on MQTT is refused as bad-time; the engine stays up and takes the next fix",
        .enabled(if: MosquittoBroker.isAvailable, "\(MosquittoBroker.unavailableReason)"))
    func ownTracksTimeOfTenToThe300() async throws {
        try await withCLI { cli in
            let broker = try cli.broker()
            #expect(
                try cli.run("add", "--id", "depot", "--lat", "48.2", "--lon", "16.3", "--radius", "100").status == 0)
            let daemon = try cli.daemon(["--source", "mqtt://127.0.0.1:\(broker.port)/in/#"])
            #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
            // The message of the issue, as it was published (QoS 1): it once ended the engine with `Double value
            // cannot be converted to Int`, and again at every start, the broker offering it again.
            #expect(try broker.publish("in/a", [#"{"_type":"location","lat":48.2,"lon":16.3,"tst":1e300}"#]) == 0)
            let refused = try await FleetSourceTests.status(cli) { $0["data"]?["unusable"]?["bad-time"]?.intValue == 1 }
            #expect(refused["data"]?["messages"]?.intValue == 1, "\(refused) \(daemon.log)")
            #expect(daemon.isRunning, "\(daemon.log)")
            #expect(daemon.log.contains("(bad-time): OwnTracks \"tst\" 1e+300 is not a Unix time"), "\(daemon.log)")
            // The next good fix is taken: a `determined` inside.
            #expect(
                try broker.publish("in/a", [#"{"_type":"location","lat":48.2,"lon":16.3,"acc":5,"tst":1796000000}"#])
                    == 0)
            #expect(await daemon.waitForLog("event determined", timeout: 10), "\(daemon.log)")
            let taken = try await FleetSourceTests.status(cli) { $0["data"]?["usableFixes"]?.intValue == 1 }
            #expect(taken["data"]?["messages"]?.intValue == 2, "\(taken)")
            #expect(daemon.isRunning)
            #expect(await daemon.stop() != nil, "\(daemon.log)")
            // A restart takes nothing again (the message was acknowledged) and starts cleanly.
            let again = try cli.daemon(["--source", "mqtt://127.0.0.1:\(broker.port)/in/#"], log: "run2.log")
            #expect(await again.waitForLog("running:", timeout: 10), "\(again.log)")
            #expect(again.isRunning)
            #expect(await again.stop() != nil, "\(again.log)")
        }
    }

    @Test("TPV lines with extreme numbers on a FIFO: each refused by reason or judged, none ends the engine")
    func extremeTPVLines() async throws {
        try await withCLI { cli in
            #expect(
                try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100").status == 0)
            let fifo = cli.dir.file("fleet.fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            let daemon = try cli.daemon(["--source", "json:" + fifo])
            let feed = try FleetFeed(fifo: fifo)
            defer { feed.close() }
            func tpv(_ members: String, device: String = "probe") -> String {
                #"{"class":"TPV","device":"\#(device)",\#(members)}"#
            }
            let now = TimestampParser.format(Date())
            let hostile = [
                // Times that parse to the ends of what a date can be, and beyond.
                tpv(#""mode":3,"time":"9999-12-31T23:59:59.999Z","lat":48.85,"lon":2.35"#),  // future-time
                tpv(#""mode":3,"time":"9999-12-31T23:59:59-23:59","lat":48.85,"lon":2.35"#),  // bad-time (year 10000)
                tpv(#""mode":3,"time":"0000-01-01T00:00:00+23:59","lat":48.85,"lon":2.35"#),  // bad-time (year -1)
                tpv(#""mode":3,"time":"99999-01-01T00:00:00Z","lat":48.85,"lon":2.35"#),  // bad-time
                tpv(#""mode":3,"time":"+275760-09-13T00:00:00Z","lat":48.85,"lon":2.35"#),  // bad-time
                // Numbers at and past the ends of a Double.
                tpv(#""mode":1e20,"time":"\#(now)","lat":48.85,"lon":2.35"#),  // no-fix
                tpv(#""mode":-9223372036854775809,"time":"\#(now)","lat":48.85,"lon":2.35"#),  // no-fix
                tpv(#""mode":3,"time":"\#(now)","lat":1e-320,"lon":1.7976931348623157e308"#),  // bad-position
                tpv(#""mode":3,"time":"\#(now)","lat":NaN,"lon":2.35"#),  // not-json
                tpv(#""mode":3,"time":"\#(now)","lat":48.85,"lon":Infinity"#),  // not-json
                tpv(#""mode":3,"time":"\#(now)","lat":-Infinity,"lon":2.35"#),  // not-json
                tpv(#""mode":3,"time":"\#(now)","lat":48.85,"lon":1e999"#),  // not-json
                tpv(#""mode":3,"time":1e300,"lat":48.85,"lon":2.35"#),  // wrong-type
            ]
            // Judged by the filter (refused as too inaccurate, or taken with absurd speed and course), never a trap.
            let judged = [
                tpv(
                    #""mode":3,"time":"2026-11-30T00:00:00Z","lat":48.851,"lon":2.35,"eph":1e308,"epv":1e308,"ept":1e308"#,
                    device: "far"),
                tpv(
                    #""mode":3,"time":"2026-11-30T00:00:01Z","lat":1e-320,"lon":2.35,"speed":-1e300,"track":1e300,"alt":-1e308"#,
                    device: "far"),
            ]
            let good = FleetSourceTests.line(0)
            feed.send(hostile + judged + [good])
            let lines = hostile.count + judged.count + 1
            let json = try await FleetSourceTests.status(cli) { $0["data"]?["lines"]?.intValue == lines }
            let unusable = json["data"]?["unusable"]
            #expect(unusable?["future-time"]?.intValue == 1, "\(json)")
            #expect(unusable?["bad-time"]?.intValue == 4, "\(json)")
            #expect(unusable?["no-fix"]?.intValue == 2, "\(json)")
            #expect(unusable?["bad-position"]?.intValue == 1, "\(json)")
            #expect(unusable?["not-json"]?.intValue == 4, "\(json)")
            #expect(unusable?["wrong-type"]?.intValue == 1, "\(json)")
            #expect(json["data"]?["usableFixes"]?.intValue == 3, "\(json)")
            #expect(await daemon.waitForLog("event determined", timeout: 10), "\(daemon.log)")
            #expect(daemon.isRunning, "\(daemon.log)")
            feed.close()
            #expect(await daemon.stop() != nil, "\(daemon.log)")
            #expect(daemon.log.contains("fixes accepted"), "\(daemon.log)")
        }
    }

    @Test("a fleet fix 30 s ahead of the clock: refused by default (5 s), taken with --max-future-skew 60s")
    func futureSkewIsOneSetting() async throws {
        let ahead = TimestampParser.format(Date().addingTimeInterval(30))
        let line = #"{"class":"TPV","device":"probe","mode":3,"time":"\#(ahead)","lat":48.85,"lon":2.35,"eph":5}"#
        for skew in [nil, "60s"] {
            try await withCLI { cli in
                let file = cli.dir.file("fleet.json")
                try (line + "\n").write(toFile: file, atomically: true, encoding: .utf8)
                let daemon = try cli.daemon(
                    ["--source", "json:" + file] + (skew.map { ["--max-future-skew", $0] } ?? []))
                let json = try await FleetSourceTests.status(cli) { $0["data"]?["lines"]?.intValue == 1 }
                let refused = json["data"]?["unusable"]?["future-time"]?.intValue ?? 0
                let usable = json["data"]?["usableFixes"]?.intValue ?? 0
                #expect((refused, usable) == (skew == nil ? (1, 0) : (0, 1)), "\(skew ?? "default"): \(json)")
                #expect(await daemon.stop() != nil, "\(daemon.log)")
            }
        }
        try withCLI { cli in
            let result = try cli.run(["run", "--max-future-skew", "-1s"])
            #expect(result.status == 64 && result.stderr.hasPrefix("Error: invalid value for --max-future-skew"))
        }
    }

    @Test("a directory as a fleet source is refused at start; a file whose read fails is said, not taken for its end")
    func unreadableFleetSources() async throws {
        try await withCLI { cli in
            let result = try cli.run(["run", "--source", "json:" + cli.dir.path])
            #expect(result.status != 0)
            #expect(result.stderr == "Error: cannot open the fleet source \(cli.dir.path): it is a directory\n")
            // Reading /proc/self/mem at offset 0 fails with EIO: the engine's read of its own memory's first page.
            let daemon = try cli.daemon(["--source", "json:/proc/self/mem"])
            #expect(
                await daemon.waitForLog("cannot read /proc/self/mem: Input/output error", timeout: 10), "\(daemon.log)")
            _ = await daemon.stop()
        }
    }

    @Test("lines of 2 MB and 200 MB on a FIFO are each counted as too-long, in bounded memory; the next is taken")
    func hugeLines() async throws {
        try await withCLI { cli in
            #expect(
                try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100").status == 0)
            let fifo = cli.dir.file("fleet.fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            let daemon = try cli.daemon(["--source", "json:" + fifo])
            #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: fifo))
            defer { try? handle.close() }
            let before = Self.residentKiB(daemon.pid)
            // A TPV padded with spaces, streamed a megabyte at a time: never built whole, here or in the engine.
            let head = Data(#"{"class":"TPV","device":"truck-1","mode":3,"lat":48.85,"lon":2.35,"#.utf8)
            let chunk = Data(repeating: UInt8(ascii: " "), count: 1 << 20)
            var peak = before
            for megabytes in [2, 200] {
                handle.write(head)
                for i in 0..<megabytes {
                    handle.write(chunk)
                    if i % 20 == 0 { peak = max(peak, Self.residentKiB(daemon.pid)) }
                }
                handle.write(Data(#""eph":5}"#.utf8 + [10]))
            }
            handle.write(Data((FleetSourceTests.line(0) + "\n").utf8))
            let json = try await FleetSourceTests.status(cli) { $0["data"]?["lines"]?.intValue == 3 }
            peak = max(peak, Self.residentKiB(daemon.pid))
            #expect(json["data"]?["lines"]?.intValue == 3, "\(json) \(daemon.log)")
            #expect(json["data"]?["unusable"]?["too-long"]?.intValue == 2, "\(json)")
            #expect(json["data"]?["usableFixes"]?.intValue == 1, "\(json)")
            #expect(await daemon.waitForLog("event determined", timeout: 10), "\(daemon.log)")
            // One skipped line is said (the first of its kind), with its length; the second is counted.
            #expect(daemon.log.contains("(too-long): line of 2097"), "\(daemon.log)")
            // Bounded: the reader holds at most about two of its 64 KiB lines, whatever comes; 32 MiB of slack
            // for the rest of the engine's life meanwhile.
            #expect(peak - before < 32 * 1024, "RSS grew from \(before) KiB to \(peak) KiB")
            try? handle.close()
            #expect(await daemon.stop() != nil, "\(daemon.log)")
        }
    }
}
