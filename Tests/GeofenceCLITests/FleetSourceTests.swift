import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A fleet source (`--source json:PATH`) answers the four questions in its own terms: open or not, lines
/// read, usable fixes, the last one and its age; and its silence is reported as gpsd's is.
@Suite("fleet source: status, silence, a missing file")
struct FleetSourceTests {
    /// A fleet line at the depot `seconds` after a fixed start; without `position` it spells `lat` and `lon`
    /// out (`latitude`), as a producer that gets the format wrong does.
    static func line(_ seconds: Int, device: String = "truck-1", position: Bool = true) -> String {
        let time = TimestampParser.format(Date(timeIntervalSince1970: 1_796_000_000 + Double(seconds)))
        let key = position ? ("lat", "lon") : ("latitude", "longitude")
        return
            #"{"class":"TPV","device":"\#(device)","mode":3,"time":"\#(time)","\#(key.0)":48.85,"\#(key.1)":2.35,"eph":5}"#
    }

    /// An address where nothing listens, so that a `status` that still asked gpsd would never reach a
    /// gpsd of the system's.
    static func deadGPSD() throws -> [String: String] {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        return ["GEOFENCE_GPSD": "127.0.0.1:\(UInt16(bigEndian: address.sin_port))"]
    }

    /// `status --json` until `done` holds for it (the engine writes its source's account every 0.5 s).
    static func status(_ cli: CLI, until done: (JSONValue) -> Bool) async throws -> JSONValue {
        var last = JSONValue.null
        _ = try await Wait.until(timeout: 45, every: .milliseconds(100)) {
            let result = try cli.run(["status", "--json", "--wait", "1s"], environment: try deadGPSD())
            last = (try? JSON.parse(result.stdout)) ?? .null
            return done(last)
        }
        return last
    }

    @Test("status answers for a JSON fleet stream: open, lines read, usable fixes, unusable by reason, last fix")
    func statusAnswersForTheStream() async throws {
        try await withCLI { cli in
            try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100")
            let fifo = cli.dir.file("fleet.fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            let daemon = try cli.daemon(["--source", "json:" + fifo])
            let feed = try FleetFeed(fifo: fifo)
            defer { feed.close() }
            feed.send((0..<5).map { Self.line($0) } + (5..<8).map { Self.line($0, position: false) } + ["not json"])

            let json = try await Self.status(cli) { $0["data"]?["lines"]?.intValue == 9 }
            #expect(json["hardware"]?["source"]?.stringValue == "json", "\(json)")
            #expect(json["hardware"]?["path"]?.stringValue == fifo)
            #expect(json["hardware"]?["open"] == true)
            #expect(json["hardware"]?["ok"] == true)
            #expect(json["data"]?["ok"] == true, "\(json)")
            #expect(json["data"]?["usableFixes"]?.intValue == 5)
            #expect(json["data"]?["unusable"]?["no-position"]?.intValue == 3)
            #expect(json["data"]?["unusable"]?["not-json"]?.intValue == 1)
            #expect(json["data"]?["lastFixTime"]?.stringValue == "2026-11-30T00:53:24.000Z")
            #expect((json["data"]?["age"]?.doubleValue ?? 99) < 10)

            let text = try cli.run(["status", "--wait", "1s"], environment: try Self.deadGPSD())
            #expect(!text.stdout.contains("gpsd"), "\(text.stdout)")
            #expect(
                text.stdout.contains("4 Data        ok       fixes arriving: 9 lines read, 5 usable fixes"),
                "\(text.stdout)")
            #expect(text.stdout.contains("3 no-position, 1 not-json"))
            #expect(text.stdout.contains("\(fifo): open"))
            // The first unusable line of each kind is logged, the others only counted.
            #expect(daemon.log.components(separatedBy: "skipped a line (no-position)").count == 2, "\(daemon.log)")
            #expect(daemon.log.contains("skipped a line (not-json)"))
            feed.close()
            _ = await daemon.stop()
        }
    }

    @Test(
        "a granted user who cannot read the store gets the stream's answers from the engine",
        .enabled(if: getuid() == 0, "needs root to run status as another user"))
    func statusThroughTheSocket() async throws {
        try await withCLI { cli in
            chmod(cli.dir.path, 0o755)  // the socket's directory; the state directory stays 0700
            let fifo = cli.dir.file("fleet.fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            let daemon = try cli.daemon(["--source", "json:" + fifo])
            let feed = try FleetFeed(fifo: fifo)
            defer { feed.close() }
            feed.send((0..<3).map { Self.line($0) } + [Self.line(3, position: false)])
            #expect(try cli.run("permission", "grant", String(ControlSocketTests.stranger)).status == 0)
            _ = try await Self.status(cli) { $0["data"]?["lines"]?.intValue == 4 }

            let result = try GeofenceBinary.runAs(
                uid: ControlSocketTests.stranger, ["status", "--json", "--wait", "1s", "--socket", cli.socket],
                environment: try Self.deadGPSD().merging(["HOME": "/tmp", "GEOFENCE_STATE_DIR": cli.stateDir]) { $1 })
            let json = try JSON.parse(result.stdout)
            #expect(json["hardware"]?["source"]?.stringValue == "json", "\(result.stdout) \(result.stderr)")
            #expect(json["hardware"]?["ok"] == true)
            #expect(json["data"]?["ok"] == true, "\(json)")
            #expect(json["data"]?["usableFixes"]?.intValue == 3)
            #expect(json["data"]?["unusable"]?["no-position"]?.intValue == 1)
            feed.close()
            _ = await daemon.stop()
        }
    }

    @Test("a stream of only unusable lines is silent at its deadline; usable ones restore it; their end is lost")
    func silenceIsReported() async throws {
        try await withCLI { cli in
            try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100")
            let fifo = cli.dir.file("fleet.fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            let daemon = try cli.daemon([
                "--source", "json:" + fifo, "--first-fix-deadline", "1s", "--stale-after", "1s",
            ])
            let feed = try FleetFeed(fifo: fifo)
            defer { feed.close() }
            feed.send((0..<4).map { Self.line($0, position: false) })
            #expect(await daemon.waitForLog("source silent", timeout: 5), "\(daemon.log)")
            #expect(
                daemon.log.contains("4 line(s) read from \(fifo), none a usable fix (4 no-position)"), "\(daemon.log)")
            let silent = try await Self.status(cli) { $0["data"]?["liveness"]?.stringValue == "silent" }
            #expect(silent["data"]?["ok"] == false, "\(silent)")
            #expect(silent["data"]?["unusable"]?["no-position"]?.intValue == 4)
            let regions = try cli.regions()
            #expect(regions.first?["status"]?.stringValue == "failed", "\(regions)")

            feed.send((4..<6).map { Self.line($0) })
            #expect(await daemon.waitForLog("source restored", timeout: 5), "\(daemon.log)")
            #expect(await daemon.waitForLog("source lost", timeout: 5), "\(daemon.log)")
            feed.close()
            _ = await daemon.stop()
            let store = try StateStore(directory: cli.stateDir)
            let states = try store.outbox.events(after: 0, limit: 100).filter { $0.type == "source" }.map {
                try JSON.parse($0.body)["state"]?.stringValue ?? ""
            }
            #expect(states == ["silent", "restored", "lost"])
        }
    }

    @Test("a fleet source that cannot be opened at start: exit 66, one line naming the file, not gpsd")
    func missingFile() throws {
        try withCLI { cli in
            let missing = cli.dir.file("no-such.fifo")
            let result = try cli.run("run", "--source", "json:" + missing)
            #expect(result.status == 66, "\(result.stderr)")
            #expect(result.stderr == "Error: cannot open the fleet source \(missing): No such file or directory\n")
        }
    }

    @Test("gpsd unreachable at start: silent says the daemon is unreachable, not that the sky is hidden")
    func silentBecauseGPSDIsUnreachable() async throws {
        try await withCLI { cli in
            let gpsd = try Self.deadGPSD()["GEOFENCE_GPSD"]!
            let daemon = try cli.daemon(["--gpsd", gpsd, "--first-fix-deadline", "1s"])
            #expect(await daemon.waitForLog("source silent", timeout: 5), "\(daemon.log)")
            _ = await daemon.stop()
            let store = try StateStore(directory: cli.stateDir)
            let reason = try store.outbox.events(after: 0, limit: 100).first { $0.type == "source" }.map {
                try JSON.parse($0.body)["reason"]?.stringValue ?? ""
            }
            #expect(reason?.contains("gpsd is not reachable at \(gpsd)") == true, "\(reason ?? "no source event")")
            #expect(reason?.contains("view of the sky") == false)
        }
    }
}

/// Vehicle names: refused and counted when they break the rule, the same text in events, hooks' environment
/// and stdin, and percent-encoded for topics.
@Suite("fleet vehicle names")
struct VehicleNameTests {
    static func line(device: String, _ seconds: Int) -> String {
        let time = TimestampParser.format(Date(timeIntervalSince1970: 1_796_000_000 + Double(seconds)))
        return #"{"class":"TPV","device":\#(device),"mode":3,"time":"\#(time)","lat":48.85,"lon":2.35,"eph":5}"#
    }

    @Test("NUL, newline, ESC and bidi names are refused and counted; a number is refused, not renamed fleet")
    func namesRefusedAndEscapedForTopics() async throws {
        try await withCLI { cli in
            try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100")
            let out = cli.dir.file("hook.out")
            let hook = try cli.run(
                "hook", "add", "--on", "determined", "--command",
                #"printf '%s|%s|%s\n' "$GEOFENCE_SUBJECT" "$GEOFENCE_SUBJECT_TOPIC" "$GEOFENCE_REGION_TOPIC" >> \#(out)"#
            )
            #expect(hook.status == 0, "\(hook.stderr)")
            let fifo = cli.dir.file("fleet.fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            let daemon = try cli.daemon(["--source", "json:" + fifo])
            let feed = try FleetFeed(fifo: fifo)
            defer { feed.close() }
            // Two fixes each: enough for an event, had they been taken.
            let refused = [
                "17", #""a\u0000b""#, #""line\nbreak""#, #""\u001b[31mred""#, #""gpj\u202Eexe""#, #""""#,
            ]
            feed.send(
                refused.enumerated().flatMap { [Self.line(device: $1, 2 * $0), Self.line(device: $1, 2 * $0 + 1)] }
                    + (10..<13).map {
                        Self.line(device: #""fleet/+#1 caf\u00e9""#, $0)
                    })

            let json = try await FleetSourceTests.status(cli) { $0["data"]?["lines"]?.intValue == 15 }
            #expect(json["data"]?["unusable"]?["bad-device"]?.intValue == 10, "\(json)")
            #expect(json["data"]?["unusable"]?["wrong-type"]?.intValue == 2, "\(json)")
            #expect(json["data"]?["usableFixes"]?.intValue == 3)
            #expect(await daemon.waitForLog("event determined", timeout: 10), "\(daemon.log)")
            _ = await Wait.until(timeout: 10) {
                ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").hasSuffix("\n")
            }
            feed.close()
            _ = await daemon.stop()
            #expect(
                (try? String(contentsOfFile: out, encoding: .utf8))
                    == "fleet/+#1 café|fleet%2F%2B%231%20caf%C3%A9|depot\n")
            let store = try StateStore(directory: cli.stateDir)
            let subjects = Set(
                try store.outbox.events(after: 0, limit: 100).compactMap {
                    try JSON.parse($0.body)["subject"]?.stringValue
                }
            )
            #expect(subjects == ["fleet/+#1 café"], "\(subjects)")

            // replay holds lines to the same rule.
            let replay = try cli.run(
                ["replay", "-"],
                stdin: refused.enumerated().flatMap {
                    [Self.line(device: $1, 2 * $0), Self.line(device: $1, 2 * $0 + 1)]
                }
                .joined(separator: "\n") + "\n")
            #expect(replay.stdout.isEmpty, "\(replay.stdout)")
            #expect(replay.stderr.contains(#"TPV "device" contains a control character (U+0000)"#), "\(replay.stderr)")
            #expect(replay.stderr.contains(#"TPV field "device" has the wrong type"#), "\(replay.stderr)")

            // A region's subject filter is held to the same rule.
            let filter = try cli.run(
                "add", "--id", "x", "--lat", "1", "--lon", "2", "--radius", "5", "--subject", "a\u{1B}b")
            #expect(filter.status == 64, "\(filter.stderr)")
            #expect(
                filter.stderr.hasPrefix("Error: invalid value for --subject: contains a control character (U+001B)"))
        }
    }
}
