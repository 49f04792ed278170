import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension CLI {
    /// A private broker in this CLI's directory (removed with it), started on a free loopback port.
    func broker(
        users: [String: String] = [:], tls: Bool = false, clientCertificates: Bool = false, settings: [String] = []
    ) throws -> MosquittoBroker {
        let directory = dir.file("broker")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return try MosquittoBroker(
            directory: directory, users: users, tls: tls, clientCertificates: clientCertificates, settings: settings)
    }
}

/// `--source mqtt://...` against a real, private Mosquitto broker: events from TPV and OwnTracks messages,
/// a persistent session that delivers what was published while the engine was down, reconnection after
/// the broker restarts, and the source's own answers in `status`.
@Suite(
    "MQTT source against a private broker", .serialized,
    .enabled(if: MosquittoBroker.isAvailable, "\(MosquittoBroker.unavailableReason)"))
struct MQTTSourceTests {
    /// Metres east of the depot (48.85, 2.35) as degrees of longitude there.
    static func longitude(_ metresEast: Double) -> Double { 2.35 + metresEast / (111_320 * cos(48.85 * .pi / 180)) }

    static func time(_ seconds: Int) -> String {
        TimestampParser.format(Date(timeIntervalSince1970: 1_796_000_000 + Double(seconds)))
    }

    /// A vehicle driving west through the depot at 10 m/s, one fix every 5 s: `step` 0 is 400 m east.
    static func x(_ step: Int) -> Double { 400 - 50 * Double(step) }

    static func tpv(_ step: Int, device: String? = "truck-1") -> String {
        let name = device.map { #""device":"\#($0)","# } ?? ""
        let position = #""lat":48.85,"lon":\#(longitude(x(step))),"eph":5,"speed":10,"track":270"#
        return #"{"class":"TPV",\#(name)"mode":3,"time":"\#(time(5 * step))",\#(position)}"#
    }

    static func ownTracks(_ step: Int) -> String {
        #"{"_type":"location","tid":"ph","lat":48.85,"lon":\#(longitude(x(step))),"acc":5,"tst":\#(1_796_000_000 + 5 * step),"vel":36,"cog":270}"#
    }

    static func setUp() throws -> (CLI, MosquittoBroker) {
        let cli = try CLI()
        let broker = try cli.broker()
        let added = try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100")
        #expect(added.status == 0, "\(added.stderr)")
        return (cli, broker)
    }

    /// The stored events' (type, subject), in order.
    static func events(_ cli: CLI) throws -> [(type: String, subject: String)] {
        let store = try StateStore(directory: cli.stateDir)
        return try store.outbox.events(after: 0, limit: 1000).compactMap { row in
            let body = try JSON.parse(row.body)
            guard body["region"] != nil else { return nil }
            return (body["type"]?.stringValue ?? "", body["subject"]?.stringValue ?? "")
        }
    }

    @Test("TPV messages on fleet/#: determined, enter and exit are stored, per vehicle (device, else the topic)")
    func tpvEvents() async throws {
        let (cli, broker) = try Self.setUp()
        defer { cli.dir.remove() }
        let daemon = try cli.daemon(["--source", "mqtt://fleet:hunter2@127.0.0.1:\(broker.port)/fleet/#"])
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        // Re-executed for huge pages without the password in its arguments (it goes in the environment).
        let commandLine = (try? String(contentsOfFile: "/proc/\(daemon.pid)/cmdline", encoding: .utf8)) ?? ""
        #expect(commandLine.contains("mqtt://fleet@127.0.0.1") && !commandLine.contains("hunter2"), "\(commandLine)")
        #expect(try broker.publish("fleet/truck-1", (0...16).map { Self.tpv($0) }) == 0)
        // No `device`: the topic names the vehicle.
        #expect(try broker.publish("fleet/van-2", (0...16).map { Self.tpv($0, device: nil) }) == 0)
        #expect(await daemon.waitForLog("event exit", occurrences: 2, timeout: 15), "\(daemon.log)")
        #expect(await daemon.stop() != nil)
        let events = try Self.events(cli)
        #expect(events.filter { $0.subject == "truck-1" }.map(\.type) == ["determined", "enter", "exit"], "\(events)")
        #expect(events.filter { $0.subject == "fleet/van-2" }.map(\.type) == ["determined", "enter", "exit"])
        #expect(daemon.log.contains("34 messages received, 34 usable fixes"), "\(daemon.log)")
    }

    /// Every stored event's JSON but its id (the only part that is not decided by the fixes).
    static func bodies(_ stateDir: String) throws -> [String] {
        let store = try StateStore(directory: stateDir)
        return try store.outbox.events(after: 0, limit: 10_000).compactMap { row in
            guard case .object(var members) = try JSON.parse(row.body), members["region"] != nil else { return nil }
            members["id"] = nil
            return JSONValue.object(members).serialized()
        }
    }

    @Test("a fleet over MQTT, TPV and OwnTracks on one subscription, gives the same events as replay of its fixes")
    func sameEventsAsReplay() async throws {
        let (cli, broker) = try Self.setUp()
        defer { cli.dir.remove() }
        let yard = try cli.run(
            "add", "--id", "yard", "--lat", "48.85", "--lon", "\(Self.longitude(-300))", "--radius", "60")
        #expect(yard.status == 0)
        // Four vehicles, 40 fixes each, 3 s apart: two TPV trucks (one east, one west, with accuracy that
        // varies), two OwnTracks phones (one of them crawling, with poor accuracy). Each message as it would
        // be published, and the same fix as a TPV line for replay.
        struct Drive {
            var topic: String
            var messages: [String] = []
            var lines: [String] = []
        }
        var drives: [Drive] = []
        for (index, name) in ["truck-1", "truck-2"].enumerated() {
            var drive = Drive(topic: "fleet/\(name)")
            for step in 0..<40 {
                let x = index == 0 ? 500 - 25 * Double(step) : -600 + 28 * Double(step)
                let eph = [4.0, 9.0, 15.0, 6.0][step % 4] + Double(index)
                let tpv =
                    #"{"class":"TPV","device":"\#(name)","mode":3,"time":"\#(Self.time(3 * step))","lat":48.85,"#
                    + #""lon":\#(Self.longitude(x)),"eph":\#(eph),"speed":\#(index == 0 ? 8.3 : 9.3),"#
                    + #""track":\#(index == 0 ? 270 : 90)}"#
                drive.messages.append(tpv)
                drive.lines.append(tpv)
            }
            drives.append(drive)
        }
        for (index, name) in ["alice/phone", "bob/phone"].enumerated() {
            var drive = Drive(topic: "owntracks/\(name)")
            for step in 0..<40 {
                let x = index == 0 ? -450 + 30 * Double(step) : 150 - 9 * Double(step)
                let acc = index == 0 ? 8.0 : [20.0, 35.0, 50.0][step % 3]
                let vel = index == 0 ? 36.0 : 10.8
                let tst = 1_796_000_000 + 3 * step
                let longitude = Self.longitude(x)
                drive.messages.append(
                    #"{"_type":"location","tid":"p\#(index)","lat":48.85,"lon":\#(longitude),"acc":\#(acc),"#
                        + #""tst":\#(tst),"vel":\#(vel),"cog":\#(index == 0 ? 90 : 270)}"#)
                drive.lines.append(
                    #"{"class":"TPV","device":"\#(name)","mode":2,"time":"\#(Self.time(3 * step))","lat":48.85,"#
                        + #""lon":\#(longitude),"eph":\#(acc),"speed":\#(vel / 3.6),"track":\#(index == 0 ? 90 : 270)}"#
                )
            }
            drives.append(drive)
        }

        let daemon = try cli.daemon(["--source", "mqtt://127.0.0.1:\(broker.port)/#"])
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        for drive in drives { #expect(try broker.publish(drive.topic, drive.messages) == 0) }
        _ = try await FleetSourceTests.status(cli) { $0["data"]?["usableFixes"]?.intValue == 160 }
        #expect(await daemon.stop() != nil)

        let offline = try CLI()
        defer { offline.dir.remove() }
        for arguments in [
            ["add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100"],
            ["add", "--id", "yard", "--lat", "48.85", "--lon", "\(Self.longitude(-300))", "--radius", "60"],
        ] {
            #expect(try offline.run(arguments).status == 0)
        }
        let replay = try offline.run(["replay", "-"], stdin: drives.flatMap(\.lines).joined(separator: "\n") + "\n")
        #expect(replay.status == 0, "\(replay.stderr)")

        let live = try Self.bodies(cli.stateDir)
        let replayed = try Self.bodies(offline.stateDir)
        #expect(live == replayed, "\(daemon.log)")
        // Not an empty comparison: every vehicle is determined, and enters and leaves a region.
        for subject in ["truck-1", "truck-2", "alice/phone", "bob/phone"] {
            let own = replayed.filter { $0.contains(#""subject":"\#(subject)""#) }
            #expect(own.contains { $0.contains(#""type":"enter""#) }, "\(subject): \(own)")
            #expect(own.contains { $0.contains(#""type":"exit""#) }, "\(subject): \(own)")
        }
    }

    @Test("OwnTracks locations on owntracks/USER/DEVICE: the vehicle is USER/DEVICE, vel in km/h")
    func ownTracksEvents() async throws {
        let (cli, broker) = try Self.setUp()
        defer { cli.dir.remove() }
        let daemon = try cli.daemon(["--source", "mqtt://127.0.0.1:\(broker.port)/owntracks/#"])
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        // A transition and a waypoint are OwnTracks too, but no fix: ignored, not errors.
        let others = [#"{"_type":"transition","event":"enter"}"#, #"{"_type":"lwt","tst":1796000000}"#]
        #expect(try broker.publish("owntracks/alice/phone", others + (0...16).map { Self.ownTracks($0) }) == 0)
        #expect(await daemon.waitForLog("event exit", timeout: 15), "\(daemon.log)")
        let status = try await FleetSourceTests.status(cli) { $0["data"]?["messages"]?.intValue == 19 }
        #expect(status["data"]?["ignored"]?.intValue == 2, "\(status)")
        #expect(status["data"]?["usableFixes"]?.intValue == 17)
        #expect(await daemon.stop() != nil)
        #expect(try Self.events(cli).map(\.type) == ["determined", "enter", "exit"])
        #expect(Set(try Self.events(cli).map(\.subject)) == ["alice/phone"])
        let store = try StateStore(directory: cli.stateDir)
        let enter = try store.outbox.events(after: 0, limit: 100).map { try JSON.parse($0.body) }.first {
            $0["type"]?.stringValue == "enter"
        }
        #expect(enter?["fix"]?["speed"]?.doubleValue == 10, "\(String(describing: enter))")
        #expect(enter?["fix"]?["course"]?.doubleValue == 270)
    }

    @Test("a QoS 1 message published while the engine is stopped is delivered when it returns (persistent session)")
    func persistentSession() async throws {
        let (cli, broker) = try Self.setUp()
        defer { cli.dir.remove() }
        let source = ["--source", "mqtt://127.0.0.1:\(broker.port)/fleet/#"]
        let first = try cli.daemon(source, log: "first.log")
        #expect(await first.waitForLog("running:", timeout: 10), "\(first.log)")
        #expect(try broker.publish("fleet/truck-1", (0...4).map { Self.tpv($0) }) == 0)
        #expect(await first.waitForLog("event determined", timeout: 10), "\(first.log)")
        #expect(await first.stop() != nil, "did not stop in 5 s: \(first.log)")

        // Down: the broker keeps these for the engine's session.
        #expect(try broker.publish("fleet/truck-1", (5...16).map { Self.tpv($0) }) == 0)
        let second = try cli.daemon(source, log: "second.log")
        #expect(await second.waitForLog("event exit", timeout: 15), "\(second.log)")
        #expect(await second.stop() != nil, "did not stop in 5 s: \(second.log)")
        #expect(try Self.events(cli).map(\.type) == ["determined", "enter", "exit"], "\(second.log)")
        #expect(second.log.contains("12 messages received, 12 usable fixes"), "\(second.log)")
    }

    @Test("a backlog stopped half-way: what the engine took from the broker is judged before it exits, none lost")
    func backlogAcrossAStop() async throws {
        let (cli, broker) = try Self.setUp()
        defer { cli.dir.remove() }
        let source = ["--source", "mqtt://127.0.0.1:\(broker.port)/fleet/#"]
        let first = try cli.daemon(source, log: "first.log")
        #expect(await first.waitForLog("running:", timeout: 10), "\(first.log)")
        #expect(await first.stop() != nil, "did not stop in 5 s: \(first.log)")
        // 400 vehicles, one fix each, inside the depot: each must give one `determined`.
        let count = 400
        #expect(try broker.publish("fleet/backlog", (0..<count).map { Self.tpv(8, device: "v\($0)") }) == 0)
        let second = try cli.daemon(source, log: "second.log")
        #expect(await second.waitForLog("event determined", timeout: 10), "\(second.log)")
        #expect(await second.stop() != nil, "did not stop in 5 s: \(second.log)")
        let third = try cli.daemon(source, log: "third.log")
        var subjects = Set<String>()
        _ = try await Wait.until(timeout: 30, every: .milliseconds(200)) {
            subjects = Set(try Self.events(cli).filter { $0.type == "determined" }.map(\.subject))
            return subjects.count == count
        }
        #expect(await third.stop() != nil, "did not stop in 5 s: \(third.log)")
        #expect(subjects.count == count, "\(second.log)\n\(third.log)")
        #expect(try Self.events(cli).count == count, "no vehicle determined twice")
    }

    @Test("the broker killed and restarted: status says disconnected and why, the engine reconnects and receives")
    func brokerRestart() async throws {
        let (cli, broker) = try Self.setUp()
        defer { cli.dir.remove() }
        let daemon = try cli.daemon(["--source", "mqtt://127.0.0.1:\(broker.port)/fleet/#", "--stale-after", "60s"])
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        #expect(try broker.publish("fleet/truck-1", (0...4).map { Self.tpv($0) }) == 0)
        #expect(await daemon.waitForLog("event determined", timeout: 10), "\(daemon.log)")

        broker.stop()
        #expect(await daemon.waitForLog("reconnecting", timeout: 10), "\(daemon.log)")
        let down = try await FleetSourceTests.status(cli) { $0["hardware"]?["connected"] == false }
        #expect(down["hardware"]?["ok"] == false, "\(down)")
        // Lost, then (tried again while the broker is still away) not reachable; libmosquitto's words (for
        // TLS, or with GEOFENCE_MQTT_CLIENT=libmosquitto) are its own.
        let problem = down["hardware"]?["problem"]?.stringValue ?? ""
        #expect(
            problem.contains("not connected (the broker closed the connection)")
                || problem.contains("not connected (the broker cannot be reached: Connection refused)")
                || problem.contains("not connected (the connection was lost)"), "\(problem)")

        try broker.start()
        #expect(await daemon.waitForLog("connected again", timeout: 20), "\(daemon.log)")
        #expect(try broker.publish("fleet/truck-1", (5...16).map { Self.tpv($0) }) == 0)
        #expect(await daemon.waitForLog("event exit", timeout: 15), "\(daemon.log)")
        #expect(daemon.isRunning)
        #expect(await daemon.stop() != nil)
        #expect(try Self.events(cli).map(\.type) == ["determined", "enter", "exit"])
    }

    @Test("status answers for the subscription; malformed payloads are counted by reason, never fatal")
    func statusAndMalformedPayloads() async throws {
        let (cli, broker) = try Self.setUp()
        defer { cli.dir.remove() }
        // Without the re-execution for huge pages: the engine blanks the password in its own command line.
        let daemon = try DaemonProcess(
            [
                "run", "--source", "mqtt://engine:s3cret@127.0.0.1:\(broker.port)/fleet/#", "--first-fix-deadline",
                "3s", "--state-dir", cli.stateDir,
            ], logPath: cli.dir.file("run.log"),
            environment: cli.environment.merging(["GEOFENCE_NO_HUGEPAGES": "1"]) { $1 })
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        // Nor in `ps`.
        let commandLine = (try? String(contentsOfFile: "/proc/\(daemon.pid)/cmdline", encoding: .utf8)) ?? ""
        #expect(commandLine.contains("mqtt://engine:xxxxxx@127.0.0.1"), "\(commandLine)")
        #expect(!commandLine.contains("s3cret"))
        let bad = [
            "not json", #"{"lat":1}"#, #"{"class":"TPV","device":"truck-1","mode":3,"time":"2026-11-30T00:00:00Z"}"#,
            #"{"_type":"location","lat":"north","lon":2.35,"tst":1796000000}"#,
            #"{"class":"TPV","device":"a\u001bb","mode":3,"lat":48.85,"lon":2.35}"#,
        ]
        #expect(try broker.publish("fleet/junk", bad) == 0)
        // A TPV without `device` is named by its topic, and a topic the naming rule refuses is refused.
        #expect(try broker.publish("fleet/gpj\u{202E}exe", [Self.tpv(0, device: nil)]) == 0)
        #expect(await daemon.waitForLog("source silent", timeout: 10), "\(daemon.log)")
        #expect(daemon.log.contains("6 message(s) received from mqtt://engine@127.0.0.1:\(broker.port)/fleet/#"))
        #expect(try broker.publish("fleet/truck-1", (0...2).map { Self.tpv($0) }) == 0)
        #expect(await daemon.waitForLog("source restored", timeout: 10), "\(daemon.log)")

        let json = try await FleetSourceTests.status(cli) { $0["data"]?["messages"]?.intValue == 9 }
        #expect(json["hardware"]?["source"]?.stringValue == "mqtt", "\(json)")
        #expect(json["hardware"]?["broker"]?.stringValue == "mqtt://engine@127.0.0.1:\(broker.port)/fleet/#")
        #expect(json["hardware"]?["connected"] == true)
        #expect(json["data"]?["ok"] == true, "\(json)")
        #expect(json["data"]?["usableFixes"]?.intValue == 3)
        let unusable = json["data"]?["unusable"]
        #expect(unusable?["not-json"]?.intValue == 1, "\(json)")
        #expect(unusable?["no-class"]?.intValue == 1)
        #expect(unusable?["no-position"]?.intValue == 1)
        #expect(unusable?["wrong-type"]?.intValue == 1)
        #expect(unusable?["bad-device"]?.intValue == 2)
        #expect(json["data"]?["lastFixTime"]?.stringValue == Self.time(10))
        #expect((json["data"]?["age"]?.doubleValue ?? 99) < 10)
        let text = try cli.run(["status", "--wait", "1s"], environment: try FleetSourceTests.deadGPSD())
        #expect(
            text.stdout.contains(
                "1 Hardware    ok       MQTT mqtt://engine@127.0.0.1:\(broker.port)/fleet/#: connected"),
            "\(text.stdout)")
        #expect(text.stdout.contains("fixes arriving: 9 messages received, 3 usable fixes, 6 unusable"))
        #expect(daemon.isRunning)
        #expect(await daemon.stop() != nil)
        // The password is in no log line and no answer.
        #expect(!daemon.log.contains("s3cret"))
        #expect(!text.stdout.contains("s3cret") && !"\(json)".contains("s3cret"))
    }

    @Test("a 10 MiB message, NaN, a far-future time, an unknown _type: counted and skipped, one log line each")
    func hostilePayloads() async throws {
        let (cli, broker) = try Self.setUp()
        defer { cli.dir.remove() }
        let daemon = try cli.daemon(["--source", "mqtt://127.0.0.1:\(broker.port)/fleet/#"])
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        // 10 MiB: a TPV padded with spaces, which the engine must neither keep nor choke on.
        let huge = cli.dir.file("huge.json")
        let padding = String(repeating: " ", count: 10 << 20)
        try
            (#"{"class":"TPV","device":"truck-1","mode":3,"time":"\#(Self.time(0))","lat":48.85,"lon":2.35,"#
            + padding + "\"eph\":5}").write(toFile: huge, atomically: true, encoding: .utf8)
        #expect(try broker.publish("fleet/truck-1", file: huge) == 0)
        let hostile = [
            #"{"class":"TPV","device":"truck-1","mode":3,"time":"\#(Self.time(0))","lat":NaN,"lon":2.35}"#,
            #"{"class":"TPV","device":"truck-1","mode":3,"time":"\#(Self.time(0))","lat":1e999,"lon":2.35}"#,
            #"{"class":"TPV","device":"truck-1","mode":3,"time":"2099-01-01T00:00:00Z","lat":48.85,"lon":2.35}"#,
            #"{"_type":"waypoint","desc":"depot","lat":48.85,"lon":2.35,"tst":1796000000}"#,
            #"{"_type":"location","lat":48.85,"lon":2.35,"tst":4102444800}"#,
        ]
        // Each twice: the second of a kind is counted, not logged.
        #expect(try broker.publish("fleet/truck-1", hostile + hostile) == 0)
        #expect(try broker.publish("fleet/truck-1", (0...16).map { Self.tpv($0) }) == 0)
        #expect(await daemon.waitForLog("event exit", timeout: 15), "\(daemon.log)")
        let json = try await FleetSourceTests.status(cli) { $0["data"]?["messages"]?.intValue == 28 }
        let unusable = json["data"]?["unusable"]
        #expect(unusable?["too-long"]?.intValue == 1, "\(json)")
        // NaN and 1e999 are not JSON numbers.
        #expect(unusable?["not-json"]?.intValue == 4, "\(json)")
        // A TPV of 2099 and an OwnTracks location of 2100: neither reaches the monitor (before, each opened
        // its vehicle's track with a false `determined inside`, and an `exit` followed).
        #expect(unusable?["future-time"]?.intValue == 4, "\(json)")
        #expect(json["data"]?["ignored"]?.intValue == 2, "the waypoints: \(json)")
        #expect(json["data"]?["usableFixes"]?.intValue == 17)
        #expect(daemon.isRunning)
        #expect(await daemon.stop() != nil)
        #expect(try Self.events(cli).map(\.type) == ["determined", "enter", "exit"], "\(daemon.log)")
        for kind in ["(too-long)", "(not-json)", "(future-time)", "of class OwnTracks waypoint"] {
            let lines = daemon.log.split(separator: "\n").filter { $0.contains(kind) }
            #expect(lines.count == 1, "\(kind): \(lines)")
        }
    }

    @Test("a broker that wants a password: from the URL, the file or the environment; a wrong one is exit 69")
    func passwords() async throws {
        let cli = try CLI()
        defer { cli.dir.remove() }
        let broker = try cli.broker(users: ["engine": "p@ss:w/rd"])
        let url = "mqtt://engine@127.0.0.1:\(broker.port)/fleet/#"

        let wrong = try cli.run(["run", "--source", url], environment: ["GEOFENCE_MQTT_PASSWORD": "guess"])
        #expect(wrong.status == 69, "\(wrong.stderr)")
        // One line: no warning about reconnecting before it.
        #expect(
            wrong.stderr
                == "Error: the MQTT broker at 127.0.0.1:\(broker.port) refused the connection: Connection Refused: "
                + "not authorised\n", "\(wrong.stderr)")
        let none = try cli.run(["run", "--source", url])
        #expect(none.status == 69, "\(none.stderr)")

        let file = cli.dir.file("mqtt.pw")
        try "p@ss:w/rd\n".write(toFile: file, atomically: true, encoding: .utf8)
        let encoded = "mqtt://engine:p%40ss%3Aw%2Frd@127.0.0.1:\(broker.port)/fleet/#"
        for (arguments, environment) in [
            (["--source", url, "--mqtt-password-file", file], [:]),
            (["--source", url], ["GEOFENCE_MQTT_PASSWORD": "p@ss:w/rd"]),
            (["--source", encoded], [:]),
        ] as [([String], [String: String])] {
            let daemon = try DaemonProcess(
                ["run"] + arguments + ["--state-dir", cli.stateDir], logPath: cli.dir.file("run.log"),
                environment: cli.environment.merging(environment) { $1 })
            #expect(await daemon.waitForLog("running:", timeout: 10), "\(arguments): \(daemon.log)")
            #expect(await daemon.stop() != nil)
            #expect(!daemon.log.contains("p@ss") && !daemon.log.contains("p%40ss"))
        }
    }

    @Test("mqtts:// with --mqtt-ca: events over TLS; a broker whose certificate is not trusted is one line, exit 69")
    func tls() async throws {
        let cli = try CLI()
        defer { cli.dir.remove() }
        let broker = try cli.broker(tls: true)
        #expect(try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100").status == 0)
        let url = "mqtts://127.0.0.1:\(broker.port)/fleet/#"

        // The system's CAs do not know the test's own.
        let untrusted = try cli.run(["run", "--source", url])
        #expect(untrusted.status == 69, "\(untrusted.stderr)")
        #expect(
            untrusted.stderr.hasPrefix("Error: cannot connect to the MQTT broker at 127.0.0.1:\(broker.port): "),
            "\(untrusted.stderr)")
        #expect(untrusted.stderr.contains("certificate verify failed"))
        #expect(untrusted.stderr.components(separatedBy: "\n").count == 2, "one line: \(untrusted.stderr)")
        let plain = try cli.run([
            "run", "--source", "mqtt://127.0.0.1:\(broker.port)/fleet/#", "--mqtt-ca", broker.caFile!,
        ])
        #expect(plain.status == 64)
        #expect(plain.stderr.hasPrefix("Error: --mqtt-ca is for TLS: use mqtts:// in --source"), "\(plain.stderr)")

        let daemon = try cli.daemon(["--source", url, "--mqtt-ca", broker.caFile!])
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        #expect(try broker.publish("fleet/truck-1", (0...16).map { Self.tpv($0) }) == 0)
        #expect(await daemon.waitForLog("event exit", timeout: 15), "\(daemon.log)")
        #expect(await daemon.stop() != nil)
        #expect(try Self.events(cli).map(\.type) == ["determined", "enter", "exit"])
    }

    @Test("mqtts:// with --mqtt-cert and --mqtt-key: a broker that wants a client certificate; without one, exit 69")
    func clientCertificate() async throws {
        let cli = try CLI()
        defer { cli.dir.remove() }
        let broker = try cli.broker(tls: true, clientCertificates: true)
        #expect(try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100").status == 0)
        let url = "mqtts://127.0.0.1:\(broker.port)/fleet/#"
        let ca = broker.caFile!

        let without = try cli.run(["run", "--source", url, "--mqtt-ca", ca])
        #expect(without.status == 69, "\(without.stderr)")
        #expect(without.stderr.hasPrefix("Error: "), "\(without.stderr)")
        #expect(without.stderr.components(separatedBy: "\n").count == 2, "one line: \(without.stderr)")
        let alone = try cli.run(["run", "--source", url, "--mqtt-ca", ca, "--mqtt-cert", broker.clientCertificate])
        #expect(alone.status == 64)
        #expect(alone.stderr.hasPrefix("Error: --mqtt-cert and --mqtt-key go together"), "\(alone.stderr)")
        let plain = try cli.run([
            "run", "--source", "mqtt://127.0.0.1:\(broker.port)/fleet/#", "--mqtt-cert", broker.clientCertificate,
            "--mqtt-key", broker.clientKey,
        ])
        #expect(plain.status == 64)
        #expect(plain.stderr.hasPrefix("Error: --mqtt-cert and --mqtt-key are for TLS"), "\(plain.stderr)")
        let missing = try cli.run([
            "run", "--source", url, "--mqtt-cert", broker.clientCertificate, "--mqtt-key", cli.dir.file("no.key"),
        ])
        #expect(missing.status == 66)
        #expect(missing.stderr.hasPrefix("Error: cannot read the MQTT key file "), "\(missing.stderr)")

        let daemon = try cli.daemon([
            "--source", url, "--mqtt-ca", ca, "--mqtt-cert", broker.clientCertificate, "--mqtt-key", broker.clientKey,
        ])
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        #expect(try broker.publish("fleet/truck-1", (0...16).map { Self.tpv($0) }) == 0)
        #expect(await daemon.waitForLog("event exit", timeout: 15), "\(daemon.log)")
        #expect(await daemon.stop() != nil)
        #expect(try Self.events(cli).map(\.type) == ["determined", "enter", "exit"])
        // OpenSSL's reason when libmosquitto logs it, else what to do about it.
        #expect(
            without.stderr.contains("certificate required")
                || without.stderr.contains("--mqtt-cert and --mqtt-key for a source"),
            "\(without.stderr)")
    }

    @Test(
        "bad input at start: one error line each (an unreachable broker 69, a bad URL 64, a missing password file 66)")
    func startErrors() throws {
        let cli = try CLI()
        defer { cli.dir.remove() }
        let port = try FleetSourceTests.deadGPSD()["GEOFENCE_GPSD"]!.split(separator: ":").last!
        let unreachable = try cli.run(["run", "--source", "mqtt://u:pw1@127.0.0.1:\(port)/fleet/#"])
        #expect(unreachable.status == 69, "\(unreachable.stderr)")
        #expect(
            unreachable.stderr == "Error: cannot connect to the MQTT broker at 127.0.0.1:\(port): Connection refused\n")

        let badPort = try cli.run(["run", "--source", "mqtt://127.0.0.1:99999/fleet/#"])
        #expect(badPort.status == 64)
        #expect(
            badPort.stderr.hasPrefix(
                "Error: invalid value for --source: its port \"99999\" is not a number from 1 to 65535\n"),
            "\(badPort.stderr)")
        let badFilter = try cli.run(["run", "--source", "mqtt://127.0.0.1/fleet/#/x"])
        #expect(badFilter.status == 64)
        #expect(badFilter.stderr.hasPrefix("Error: invalid value for --source: its topic filter has #"))
        let noTopic = try cli.run(["run", "--source", "mqtt://127.0.0.1"])
        #expect(noTopic.stderr.hasPrefix("Error: invalid value for --source: it has no topic filter"))

        let missing = cli.dir.file("no-such.pw")
        let noFile = try cli.run(["run", "--source", "mqtt://u@127.0.0.1/fleet/#", "--mqtt-password-file", missing])
        #expect(noFile.status == 66)
        #expect(noFile.stderr == "Error: cannot read the MQTT password file \(missing): No such file or directory\n")
        let noUser = try cli.run(
            ["run", "--source", "mqtt://127.0.0.1/fleet/#"], environment: ["GEOFENCE_MQTT_PASSWORD": "pw2"])
        #expect(noUser.status == 64)
        #expect(noUser.stderr.hasPrefix("Error: an MQTT password needs a user name"), "\(noUser.stderr)")
        for result in [unreachable, badPort, noFile, noUser] {
            #expect(!result.stderr.contains("pw1") && !result.stderr.contains("pw2"))
        }
    }
}
