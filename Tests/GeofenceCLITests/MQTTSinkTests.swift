import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence sink add --mqtt ...` against a real, private Mosquitto broker: events, retained states and the
/// engine's status published; nothing lost across broker restarts and engine kills; no password shown.
@Suite(
    "MQTT sink against a private broker", .serialized,
    .enabled(if: MosquittoBroker.isAvailable, "\(MosquittoBroker.unavailableReason)"))
struct MQTTSinkTests {
    static func setUp(users: [String: String] = [:]) throws -> (CLI, MosquittoBroker) {
        let cli = try CLI()
        // The persistent subscribers of these tests may be sent thousands of messages while away.
        let broker = try cli.broker(users: users, settings: ["max_queued_messages 0"])
        return (cli, broker)
    }

    /// A daemon reading TPV lines from a FIFO, and the feed into it.
    static func fifoDaemon(_ cli: CLI, log: String = "run.log") throws -> (DaemonProcess, FleetFeed) {
        let fifo = cli.dir.file("fleet.fifo")
        if !FileManager.default.fileExists(atPath: fifo) { #expect(mkfifo(fifo, 0o600) == 0) }
        let daemon = try cli.daemon(["--source", "json:" + fifo], log: log)
        return (daemon, try FleetFeed(fifo: fifo))
    }

    /// `sink list --json`, polled until `done` holds (or about 20 s).
    static func sinks(_ cli: CLI, until done: ([JSONValue]) -> Bool) async throws -> [JSONValue] {
        var last: [JSONValue] = []
        _ = try await Wait.until(timeout: 30, every: .milliseconds(100)) {
            let result = try cli.run("sink", "list", "--json")
            last = (try? JSON.parse(result.stdout))?.arrayValue ?? []
            return done(last)
        }
        return last
    }

    static func drained(_ sinks: [JSONValue]) -> Bool {
        !sinks.isEmpty && sinks.allSatisfy { $0["waiting"]?.intValue == 0 && $0["connected"] == true }
    }

    /// `topic payload` lines as (topic, payload).
    static func split(_ lines: [String]) -> [(topic: String, payload: String)] {
        lines.compactMap { line in
            guard let space = line.firstIndex(of: " ") else { return nil }
            return (String(line[..<space]), String(line[line.index(after: space)...]))
        }
    }

    static func outbox(_ cli: CLI) throws -> [StoredEvent] {
        try StateStore(directory: cli.stateDir).outbox.events(after: 0, limit: 100_000)
    }

    @Test("events, retained states and the engine's status (online, offline at a stop and as the last will)")
    func publishes() async throws {
        let (cli, broker) = try Self.setUp()
        defer { cli.dir.remove() }
        #expect(try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100").status == 0)
        let url = "mqtt://127.0.0.1:\(broker.port)"
        let added = try cli.run("sink", "add", "--id", "bus", "--mqtt", url)
        #expect(added.status == 0, "\(added.stderr)")
        #expect(added.stdout == "Added sink \"bus\": all events to \(url) on geofence/{subject}/{region}/event\n")
        let ownTracks = try cli.run(
            "sink", "add", "--id", "phones", "--mqtt", url, "--format", "owntracks", "--on", "enter,exit",
            "--topic", "owntracks/{subject}/event", "--state-topic", "none", "--status-topic", "none")
        #expect(ownTracks.status == 0, "\(ownTracks.stderr)")
        try broker.makeSession(clientID: "watcher", topic: "#")

        let (daemon, feed) = try Self.fifoDaemon(cli)
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        feed.send((0...16).map { MQTTSourceTests.tpv($0) })
        #expect(await daemon.waitForLog("event exit", timeout: 15), "\(daemon.log)")
        let listed = try await Self.sinks(cli, until: Self.drained)
        #expect(Self.drained(listed), "\(listed)")
        #expect(listed.map { $0["id"]?.stringValue } == ["bus", "phones"])

        // The sinks' health (what each delivered) is written by the engine a moment after the cursor moves.
        let status = try await FleetSourceTests.status(cli) {
            $0["sinks"]?.arrayValue?.count == 2 && $0["sinks"]?.arrayValue?.first?["delivered"]?.intValue == 3
        }
        let bus = status["sinks"]?.arrayValue?.first
        #expect(bus?["connected"] == true, "\(status)")
        #expect(bus?["waiting"]?.intValue == 0)
        #expect(bus?["delivered"]?.intValue == 3)
        let text = try cli.run(["status", "--wait", "1s"], environment: try FleetSourceTests.deadGPSD())
        #expect(
            text.stdout.contains("Sink          ok       bus to \(url): connected, 0 events waiting"), "\(text.stdout)")

        let messages = Self.split(try broker.receive(clientID: "watcher", topic: "#", seconds: 2))
        let outbox = try Self.outbox(cli)
        #expect(outbox.map(\.type) == ["determined", "enter", "exit"])
        let published = messages.filter { $0.topic == "geofence/truck-1/depot/event" }.map(\.payload)
        #expect(published == outbox.map(\.body), "\(messages)")
        // The states as published, then the retained one again (a subscription's first message). Events that
        // the sink took in one batch have one state message, the last (Docs/mqtt.md): so the states, repeats
        // aside, are the end of outside, inside, outside.
        let states = messages.filter { $0.topic == "geofence/truck-1/depot/state" }.map(\.payload)
        let changes = states.enumerated().filter { $0.offset == 0 || states[$0.offset - 1] != $0.element }.map(
            \.element)
        #expect(
            !changes.isEmpty && ["outside", "inside", "outside"].suffix(changes.count) == changes[...], "\(states)")
        #expect(states.last == "outside")
        #expect(messages.contains { $0 == ("geofence/engine/status", "online") }, "\(messages)")
        let transitions = messages.filter { $0.topic == "owntracks/truck-1/event" }.compactMap {
            try? JSON.parse($0.payload)
        }
        #expect(transitions.map { $0["_type"]?.stringValue } == ["transition", "transition"], "\(messages)")
        #expect(transitions.map { $0["event"]?.stringValue } == ["enter", "leave"])
        #expect(transitions.first?["rid"]?.stringValue == "depot")
        #expect(transitions.first?["id"]?.stringValue == outbox[1].id)
        #expect(transitions.first?["acc"]?.doubleValue == 5)

        // A dashboard that connects later sees where the truck is, and that the engine is up.
        let late = Self.split(try broker.receive(clientID: "late", topic: "geofence/#", persistent: false, seconds: 1))
        #expect(late.contains { $0 == ("geofence/truck-1/depot/state", "outside") }, "\(late)")
        #expect(late.contains { $0 == ("geofence/engine/status", "online") })
        #expect(late.filter { $0.topic.hasSuffix("/event") }.isEmpty, "events are not retained")

        feed.close()
        #expect(await daemon.stop() != nil)
        let stopped = Self.split(
            try broker.receive(clientID: "late", topic: "geofence/engine/status", persistent: false, seconds: 1))
        #expect(stopped.map(\.payload) == ["offline"], "\(stopped)")

        // Killed: the broker says so for it (the last will).
        let (again, feed2) = try Self.fifoDaemon(cli, log: "again.log")
        defer { feed2.close() }
        #expect(await again.waitForLog("sink bus: connected", timeout: 10), "\(again.log)")
        let up = Self.split(
            try broker.receive(clientID: "late", topic: "geofence/engine/status", persistent: false, seconds: 1))
        #expect(up.map(\.payload) == ["online"], "\(up)")
        #expect(await again.stop(signal: SIGKILL) != nil)
        try await Task.sleep(for: .milliseconds(300))
        let will = Self.split(
            try broker.receive(clientID: "late", topic: "geofence/engine/status", persistent: false, seconds: 1))
        #expect(will.map(\.payload) == ["offline"], "\(will)")
    }

    @Test("bad input is one line and changes nothing; list, remove; help says what is guaranteed")
    func commands() throws {
        try withCLI { cli in
            for (arguments, status, message) in [
                (
                    ["--mqtt", "mqtt://u:hunter2@127.0.0.1"], Int32(64),
                    "a sink's URL is stored, so it takes no password"
                ),
                (["--mqtt", "http://127.0.0.1"], 64, "it does not start with mqtt:// or mqtts://"),
                (["--mqtt", "mqtt://127.0.0.1/fleet"], 64, "it has a path"),
                (["--mqtt", "mqtt://127.0.0.1", "--topic", "fleet/#"], 64, "contains + or #"),
                (["--mqtt", "mqtt://127.0.0.1", "--topic", "fleet/{vehicle}"], 64, "has {vehicle}"),
                (
                    ["--mqtt", "mqtt://127.0.0.1", "--format", "xml"], 64,
                    "\"xml\" is not event, owntracks or homeassistant"
                ),
                (
                    ["--mqtt", "mqtt://127.0.0.1", "--discovery-prefix", "ha"], 64,
                    "--discovery-prefix is for --format homeassistant"
                ),
                (
                    ["--mqtt", "mqtt://127.0.0.1", "--format", "homeassistant", "--discovery-prefix", "ha/"], 64,
                    "invalid value for --discovery-prefix: has an empty topic level"
                ),
                (
                    ["--mqtt", "mqtt://127.0.0.1", "--format", "homeassistant", "--topic", "fleet/{region}"], 65,
                    "a Home Assistant tracker's topic is per vehicle"
                ),
                (["--mqtt", "mqtt://127.0.0.1", "--on", "enter,arrive"], 64, "\"arrive\" is not an event type"),
                (
                    ["--mqtt", "mqtt://u@127.0.0.1", "--password-file", "/no/such/file"], 65,
                    "cannot read the password file"
                ),
                (["--mqtt", "mqtt://127.0.0.1", "--password-env", "PW"], 65, "a password needs a user name"),
                (["--mqtt", "mqtt://127.0.0.1", "--ca", "/etc/hostname"], 65, "a CA file is for TLS"),
            ] as [([String], Int32, String)] {
                let result = try cli.run(["sink", "add"] + arguments)
                #expect(result.status == status, "\(arguments): \(result.stderr)")
                #expect(
                    result.stderr.hasPrefix("Error: ") && result.stderr.contains(message),
                    "\(arguments): \(result.stderr)")
                #expect(!result.stderr.contains("hunter2"))
            }
            let empty = try cli.run("sink", "list")
            #expect(empty.status == 0)
            #expect(empty.stderr.contains("No sinks."), "\(empty.stderr)")
            #expect(try cli.run("sink", "list", "--json").stdout == "[]\n", "nothing was stored")

            #expect(try cli.run("sink", "add", "--id", "a", "--mqtt", "mqtt://127.0.0.1").status == 0)
            let twice = try cli.run("sink", "add", "--id", "a", "--mqtt", "mqtt://127.0.0.1")
            #expect(twice.status == 65)
            #expect(twice.stderr == "Error: a sink with id \"a\" already exists (remove it first)\n")
            let generated = try cli.run(
                "sink", "add", "--mqtt", "mqtts://127.0.0.1:8884", "--on", "exit,enter", "--json")
            let made = try JSON.parse(generated.stdout)
            #expect(made["id"]?.stringValue?.hasPrefix("sink-") == true, "\(generated.stdout)")
            #expect(made["on"] == ["enter", "exit"])
            #expect(made["url"]?.stringValue == "mqtts://127.0.0.1:8884")
            #expect(made["stateTopic"]?.stringValue == "geofence/{subject}/{region}/state")

            let missing = try cli.run("sink", "remove", "a", "nope")
            #expect(missing.status == 66)
            #expect(missing.stderr == "Error: no sink with id \"nope\"\n")
            #expect(try cli.run("sink", "list", "--json").stdout.contains("\"id\":\"a\""), "all or nothing")
            let removed = try cli.run("sink", "remove", "a")
            #expect(removed.stdout == "Removed sink \"a\"\n")
            #expect(try cli.run("sink", "list").stdout.contains("sink-"))

            let help = try cli.run("sink", "add", "--help")
            #expect(help.stdout.contains("--password-file") && help.stdout.contains("{subject}"))
            #expect(try cli.run("help", "sink").stdout.contains("at least once"))
        }
    }

    @Test("added and removed while the engine runs: through its socket, started and stopped at once")
    func runningEngine() async throws {
        let (cli, broker) = try Self.setUp()
        defer { cli.dir.remove() }
        #expect(try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100").status == 0)
        let (daemon, feed) = try Self.fifoDaemon(cli)
        defer { feed.close() }
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        try broker.makeSession(clientID: "watcher", topic: "geofence/+/+/event")
        let added = try cli.run("sink", "add", "--id", "late", "--mqtt", "mqtt://127.0.0.1:\(broker.port)")
        #expect(added.status == 0, "\(added.stderr)")
        #expect(await daemon.waitForLog("sink late: connected", timeout: 3), "\(daemon.log)")
        feed.send((0...16).map { MQTTSourceTests.tpv($0) })
        let listed = try await Self.sinks(cli, until: { $0.first?["delivered"]?.intValue == 3 })
        #expect(listed.first?["connected"] == true, "\(listed)")
        #expect(listed.first?["waiting"]?.intValue == 0)
        let removed = try cli.run("sink", "remove", "late")
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(await daemon.waitForLog("sink late: stopped (removed)", timeout: 3), "\(daemon.log)")
        let offline = Self.split(
            try broker.receive(clientID: "late", topic: "geofence/engine/status", persistent: false, seconds: 1))
        #expect(offline.map(\.payload) == ["offline"], "a removed sink says goodbye: \(offline)")
        let received = Self.split(try broker.receive(clientID: "watcher", topic: "geofence/+/+/event", seconds: 1))
        #expect(received.count == 3, "\(received)")
        #expect(await daemon.stop() != nil)
    }

    @Test("a broker that does not answer: the engine runs, the sink says so, and a stop is not held up")
    func unreachable() async throws {
        try await withCLI { cli in
            // Unroutable: a connect that hangs (or fails at once where there is no route at all).
            #expect(try cli.run("sink", "add", "--id", "far", "--mqtt", "mqtt://10.255.255.1:1883").status == 0)
            let (daemon, feed) = try Self.fifoDaemon(cli)
            defer { feed.close() }
            #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
            let listed = try await Self.sinks(cli) { $0.first?["problem"] != nil }
            #expect(listed.first?["connected"] == false, "\(listed)")
            #expect(listed.first?["problem"]?.stringValue?.isEmpty == false)
            let took = await daemon.stop()
            #expect(took != nil && took! < 2, "\(String(describing: took)) s: \(daemon.log)")
            #expect(daemon.process.terminationStatus == 0)
        }
    }

    @Test("a broker that wants a client certificate: a sink with --cert and --key connects, one without says why")
    func clientCertificate() async throws {
        try await withCLI { cli in
            let broker = try cli.broker(tls: true, clientCertificates: true)
            let url = "mqtts://127.0.0.1:\(broker.port)"
            let ca = broker.caFile!
            let alone = try cli.run("sink", "add", "--mqtt", url, "--ca", ca, "--cert", broker.clientCertificate)
            #expect(alone.status != 0)
            #expect(alone.stderr.contains("a client certificate and its key go together"), "\(alone.stderr)")
            let relative = try cli.run("sink", "add", "--mqtt", url, "--cert", "client.crt", "--key", "client.key")
            #expect(relative.status == 64)
            #expect(
                relative.stderr.hasPrefix("Error: invalid value for --cert: give an absolute path"),
                "\(relative.stderr)")
            let plain = try cli.run(
                "sink", "add", "--mqtt", "mqtt://127.0.0.1:\(broker.port)", "--cert", broker.clientCertificate, "--key",
                broker.clientKey)
            #expect(plain.stderr.contains("a client certificate is for TLS"), "\(plain.stderr)")
            #expect(
                try JSON.parse(cli.run("sink", "list", "--json").stdout).arrayValue?.isEmpty == true, "nothing added")

            let with = try cli.run(
                "sink", "add", "--id", "with", "--mqtt", url, "--ca", ca, "--cert", broker.clientCertificate, "--key",
                broker.clientKey)
            #expect(with.status == 0, "\(with.stderr)")
            #expect(try cli.run("sink", "add", "--id", "without", "--mqtt", url, "--ca", ca).status == 0)
            let (daemon, feed) = try Self.fifoDaemon(cli)
            defer { feed.close() }
            let listed = try await Self.sinks(cli) { sinks in
                // (Its first problem is "connecting to ...", until the broker has answered.)
                sinks.first { $0["id"]?.stringValue == "with" }?["connected"] == true
                    && sinks.first { $0["id"]?.stringValue == "without" }?["problem"]?.stringValue
                        .map { !$0.hasPrefix("connecting") } == true
            }
            let byID = Dictionary(uniqueKeysWithValues: listed.map { ($0["id"]?.stringValue ?? "", $0) })
            #expect(byID["with"]?["connected"] == true, "\(listed)\n\(daemon.log)")
            #expect(byID["with"]?["certFile"]?.stringValue == broker.clientCertificate)
            #expect(byID["with"]?["keyFile"]?.stringValue == broker.clientKey)
            #expect(byID["without"]?["connected"] == false)
            #expect(byID["without"]?["problem"]?.stringValue?.contains("certificate") == true, "\(listed)")
            // The sink that connected said so on the retained status topic.
            let status = try broker.receive(
                clientID: "watcher", topic: "geofence/engine/status", persistent: false, seconds: 1)
            #expect(status == ["geofence/engine/status online"], "\(status)")
            #expect(await daemon.stop() != nil)
        }
    }

    @Test("a password from a file or the environment: connected, and never in the log, status, list or store")
    func credentials() async throws {
        let (cli, broker) = try Self.setUp(users: ["engine": "s3cret-sink"])
        defer { cli.dir.remove() }
        let file = cli.dir.file("sink.pw")
        try "s3cret-sink\n".write(toFile: file, atomically: true, encoding: .utf8)
        let url = "mqtt://engine@127.0.0.1:\(broker.port)"
        #expect(try cli.run("sink", "add", "--id", "filed", "--mqtt", url, "--password-file", file).status == 0)
        #expect(try cli.run("sink", "add", "--id", "env", "--mqtt", url, "--password-env", "SINK_PW").status == 0)
        #expect(try cli.run("sink", "add", "--id", "wrong", "--mqtt", url, "--password-env", "WRONG_PW").status == 0)
        let fifo = cli.dir.file("fleet.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let daemon = try DaemonProcess(
            ["run", "--source", "json:" + fifo, "--state-dir", cli.stateDir], logPath: cli.dir.file("run.log"),
            environment: cli.environment.merging(["SINK_PW": "s3cret-sink", "WRONG_PW": "guess"]) { $1 })
        let feed = try FleetFeed(fifo: fifo)
        defer { feed.close() }
        let listed = try await Self.sinks(cli) { sinks in
            sinks.filter { $0["connected"] == true }.count == 2
                && sinks.first { $0["id"]?.stringValue == "wrong" }?["problem"] != nil
        }
        let byID = Dictionary(uniqueKeysWithValues: listed.map { ($0["id"]?.stringValue ?? "", $0) })
        #expect(byID["filed"]?["connected"] == true, "\(listed)\n\(daemon.log)")
        #expect(byID["env"]?["connected"] == true)
        #expect(byID["wrong"]?["connected"] == false)
        #expect(byID["wrong"]?["problem"]?.stringValue?.contains("not authorised") == true, "\(listed)")
        #expect(byID["filed"]?["passwordFile"]?.stringValue == file)
        #expect(byID["env"]?["passwordEnv"]?.stringValue == "SINK_PW")
        let status = try cli.run(["status", "--json", "--wait", "1s"], environment: try FleetSourceTests.deadGPSD())
        let text = try cli.run(["status", "--wait", "1s"], environment: try FleetSourceTests.deadGPSD())
        #expect(await daemon.stop() != nil)
        let commandLine = (try? String(contentsOfFile: "/proc/\(daemon.pid)/cmdline", encoding: .utf8)) ?? ""
        var stored = Data()
        for name in ["geofence.db", "geofence.db-wal"] {
            stored += FileManager.default.contents(atPath: cli.stateDir + "/" + name) ?? Data()
        }
        for (what, haystack) in [
            ("log", daemon.log), ("status --json", status.stdout), ("status", text.stdout), ("list", "\(listed)"),
            ("cmdline", commandLine), ("store", String(decoding: stored, as: UTF8.self)),
        ] {
            #expect(!haystack.contains("s3cret-sink") && !haystack.contains("guess"), "\(what) shows a password")
        }
    }

    @Test("the broker stopped and restarted 10 times during a drive: every event published, in order per region")
    func brokerRestarts() async throws {
        let (cli, broker) = try Self.setUp()
        defer { cli.dir.remove() }
        // Fifty small regions along a road east, 100 m apart.
        let regions = (0..<50).map { i in
            #"{"id":"r\#(i)","lat":48.85,"lon":\#(MQTTSourceTests.longitude(Double(100 * i))),"radius":20}"#
        }
        let file = cli.dir.file("regions.json")
        try (#"{"regions":["# + regions.joined(separator: ",") + "]}").write(
            toFile: file, atomically: true, encoding: .utf8)
        #expect(try cli.run("import", file).status == 0)
        #expect(try cli.run("sink", "add", "--id", "bus", "--mqtt", "mqtt://127.0.0.1:\(broker.port)").status == 0)
        try broker.makeSession(clientID: "counter", topic: "geofence/+/+/event")
        let (daemon, feed) = try Self.fifoDaemon(cli)
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")

        // Four vehicles east at 20 m/s, a fix a second of fix time, a second every 30 ms.
        let steps = 260
        let driving = Task.detached {
            for step in 0..<steps {
                feed.send(
                    (0..<4).map { v in
                        let x = -60 - 25 * Double(v) + 20 * Double(step)
                        let time = MQTTSourceTests.time(step)
                        return
                            #"{"class":"TPV","device":"v\#(v)","mode":3,"time":"\#(time)","lat":48.85,"lon":\#(MQTTSourceTests.longitude(x)),"eph":3,"speed":20,"track":90}"#
                    })
                // The fleet's pace, not a wait.
                try? await Task.sleep(for: .milliseconds(30))
            }
        }
        var restarts = 0
        while restarts < 10 {
            // Restarts at random moments are the test: there is nothing to wait for.
            try await Task.sleep(for: .milliseconds(Int.random(in: 150...600)))
            broker.stop()
            try await Task.sleep(for: .milliseconds(Int.random(in: 50...400)))
            try broker.start()
            restarts += 1
        }
        await driving.value
        feed.close()
        let listed = try await Self.sinks(cli, until: Self.drained)
        #expect(Self.drained(listed), "\(listed)\n\(daemon.log)")
        #expect(await daemon.stop() != nil)

        let outbox = try Self.outbox(cli)
        let received = Self.split(try broker.receive(clientID: "counter", topic: "geofence/+/+/event", seconds: 3))
            .compactMap { try? JSON.parse($0.payload)["id"]?.stringValue }
        let report = Self.compare(outbox: outbox, received: received)
        print(
            "sink broker restarts: \(restarts) restarts, \(outbox.count) events, \(received.count) received, "
                + "\(report.lost) lost, \(report.duplicates) duplicates, order per region kept: \(report.ordered)")
        #expect(outbox.count > 300, "a drive with events")
        #expect(report.lost == 0, "\(daemon.log)")
        #expect(report.ordered)
        #expect(daemon.log.contains("reconnecting"), "the sink saw the broker go")
    }

    /// Which outbox events never arrived, how many arrived more than once, and whether the first arrival of
    /// each region's events is in outbox order.
    static func compare(outbox: [StoredEvent], received: [String]) -> (lost: Int, duplicates: Int, ordered: Bool) {
        let counts = Dictionary(received.map { ($0, 1) }, uniquingKeysWith: +)
        let lost = outbox.filter { counts[$0.id] == nil }.count
        let duplicates = counts.values.reduce(0) { $0 + $1 - 1 }
        let regionOf = Dictionary(uniqueKeysWithValues: outbox.map { ($0.id, $0.region ?? "-" + $0.type) })
        var firstSeen: [String: [String]] = [:]
        var seen = Set<String>()
        for id in received where seen.insert(id).inserted {
            if let region = regionOf[id] { firstSeen[region, default: []].append(id) }
        }
        var expected: [String: [String]] = [:]
        for event in outbox { expected[event.region ?? "-" + event.type, default: []].append(event.id) }
        return (lost, duplicates, firstSeen == expected)
    }

    @Test("the engine SIGKILLed 10 times while fixes are published at QoS 1: no fix of its downtime, no event lost")
    func engineKills() async throws {
        let (cli, broker) = try Self.setUp()
        defer { cli.dir.remove() }
        #expect(try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100").status == 0)
        #expect(try cli.run("sink", "add", "--id", "bus", "--mqtt", "mqtt://127.0.0.1:\(broker.port)").status == 0)
        try broker.makeSession(clientID: "counter", topic: "geofence/+/+/event")
        let source = ["--source", "mqtt://127.0.0.1:\(broker.port)/fleet/#"]
        // Each fix is a new vehicle inside the depot: one `determined` each, so a lost fix is a missing event.
        let engineUp = Atomic(false)
        let publishing = Atomic(true)
        let published = Mutex<[String]>([])
        // The engine's session must exist before anything published while it is down can be kept for it.
        let first = try cli.daemon(source, log: "first.log")
        #expect(await first.waitForLog("running:", timeout: 10), "\(first.log)")
        #expect(await first.stop() != nil)
        let publisher = Task.detached {
            var batch = 0
            while publishing.load(ordering: .acquiring) {
                let phase = engineUp.load(ordering: .acquiring) ? "up" : "down"
                let names = (0..<10).map { "\(phase)-\(batch)-\($0)" }
                if (try? broker.publish("fleet/x", names.map { MQTTSourceTests.tpv(8, device: $0) })) == 0 {
                    published.withLock { $0 += names }
                }
                batch += 1
                // The fleet's pace, not a wait.
                try? await Task.sleep(for: .milliseconds(60))
            }
        }
        var kills = 0
        while kills < 10 {
            let daemon = try cli.daemon(source, log: "run-\(kills).log")
            #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
            engineUp.store(true, ordering: .releasing)
            // Kills at random moments are the test: there is nothing to wait for.
            try await Task.sleep(for: .milliseconds(Int.random(in: 500...1200)))
            engineUp.store(false, ordering: .releasing)
            #expect(await daemon.stop(signal: SIGKILL) != nil)
            kills += 1
            try await Task.sleep(for: .milliseconds(Int.random(in: 200...600)))
        }
        let last = try cli.daemon(source, log: "last.log")
        #expect(await last.waitForLog("running:", timeout: 10), "\(last.log)")
        publishing.store(false, ordering: .releasing)
        await publisher.value
        let sent = published.withLock { $0 }
        // Until every fix of a downtime is judged (or 30 s), and then as long as more keep coming.
        var determined = Set<String>()
        var settled = 0
        _ = try await Wait.until(timeout: 30, every: .milliseconds(100)) {
            let now = Set(try Self.outbox(cli).compactMap { $0.type == "determined" ? $0.subject : nil })
            settled = now.count == determined.count ? settled + 1 : 0
            determined = now
            let downSeen = sent.allSatisfy { !$0.hasPrefix("down-") || determined.contains($0) }
            return determined.count >= sent.count || (downSeen && settled >= 10)
        }
        let listed = try await Self.sinks(cli, until: Self.drained)
        #expect(await last.stop() != nil)

        let downSent = sent.filter { $0.hasPrefix("down-") }
        let lostDown = downSent.filter { !determined.contains($0) }
        let lostUp = sent.filter { $0.hasPrefix("up-") && !determined.contains($0) }
        let outbox = try Self.outbox(cli)
        let received = Self.split(try broker.receive(clientID: "counter", topic: "geofence/+/+/event", seconds: 4))
            .compactMap { try? JSON.parse($0.payload)["id"]?.stringValue }
        let report = Self.compare(outbox: outbox, received: received)
        print(
            "engine kills: \(kills) SIGKILLs, \(sent.count) fixes published (\(downSent.count) while the engine was "
                + "down), \(lostDown.count) of those lost, \(lostUp.count) published while up lost (taken from the "
                + "broker, not yet committed); events: \(outbox.count) stored, \(received.count) received by the "
                + "subscriber, \(report.lost) lost, \(report.duplicates) duplicates")
        #expect(!downSent.isEmpty)
        #expect(lostDown.isEmpty, "\(lostDown.prefix(20))")
        // Acknowledged only once committed (`--mqtt-ack commit`, the default): a kill loses none of them either.
        #expect(lostUp.isEmpty, "\(lostUp.prefix(20))")
        #expect(Self.drained(listed), "\(listed)")
        #expect(report.lost == 0)
        #expect(report.ordered)
        let determinedEvents = outbox.filter { $0.type == "determined" }
        #expect(Set(determinedEvents.compactMap(\.subject)).count == determinedEvents.count, "none determined twice")
    }
}
