import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence deliver` against a real 3-server JetStream cluster: events published to the cluster's event stream
/// (as the engines publish them: one subject per partition, `Nats-Msg-Id` the event's id) reach a real hook of
/// the deliver's state directory through its real SQLite outbox, in order, each once in the outbox, through
/// SIGKILLs of `deliver`.
@Suite(
    "deliver: a cluster's events to local hooks", .serialized,
    .enabled(if: NATSCluster.isAvailable, "\(NATSCluster.unavailableReason)"))
struct DeliverTests {
    static let partitions = 4

    /// An event as an engine of the cluster makes it: vehicle `v`, region `r`, the n-th of the run.
    struct Made {
        let id: String
        let vehicle: Int
        let region: Int
        let type: String
        let n: Int
        var partition: Int { vehicle % DeliverTests.partitions }
        var subject: String { "geofence.event.\(partition)" }
        var body: String {
            let seconds = 1_796_000_000 + n
            let time = TimestampParser.format(Date(timeIntervalSince1970: Double(seconds)))
            let state = type == "enter" ? "inside" : "outside"
            let previous = type == "enter" ? "outside" : "inside"
            return JSONValue.object([
                "id": .string(id), "type": .string(type), "region": .string("r\(region)"),
                "subject": .string("v\(vehicle)"), "time": .string(time), "state": .string(state),
                "previous": .string(previous), "inferred": .bool(false),
            ]).serialized()
        }
    }

    /// `count` events of 12 vehicles over 5 regions, each (vehicle, region) alternating enter and exit.
    static func make(_ count: Int, from start: Int = 0) -> [Made] {
        var made: [Made] = []
        for n in start..<(start + count) {
            let vehicle = n % 12
            let region = (n / 12) % 5
            let type = (n / 60) % 2 == 0 ? "enter" : "exit"
            made.append(
                Made(
                    id: String(format: "0193a4c2-7f1e-7c3a-9d2b-%012x", n), vehicle: vehicle, region: region,
                    type: type, n: n))
        }
        return made
    }

    static func publish(_ events: [Made], to connection: NATSConnection) throws {
        for event in events {
            _ = try connection.jetStreamPublish(
                subject: event.subject, payload: Array(event.body.utf8), messageID: event.id)
        }
    }

    /// A take-over marker, as a new owner of a partition writes it: not an event.
    static func marker(partition: Int, to connection: NATSConnection) throws {
        _ = try connection.jetStreamPublish(
            subject: "geofence.event.\(partition)",
            payload: Array(#"{"partition":\#(partition),"owner":"engine-b","term":2}"#.utf8),
            headers: [("Geofence-Kind", "takeover")])
    }

    /// `geofence deliver` in the background; with `hold`, it holds its first batch before that step (debug
    /// builds' fault injection), for as long as the file `hold.path` is there.
    static func deliver(_ cli: CLI, _ cluster: NATSCluster, log: String, hold: (step: String, path: String)? = nil)
        throws -> DaemonProcess
    {
        var environment = cli.environment
        if let hold { environment["GEOFENCE_TEST_DELIVER_HOLD_BEFORE_\(hold.step)"] = hold.path }
        return try DaemonProcess(
            ["deliver", "--from", cluster.urls, "--state-dir", cli.stateDir, "--hook-retry-initial", "0.1s"],
            logPath: cli.dir.file(log), environment: environment)
    }

    /// The hook's log: one line per run, `ID REGION`.
    static func hookRuns(_ cli: CLI) -> [(id: String, region: String)] {
        (cli.read("hook.log") ?? "").split(separator: "\n").compactMap {
            let parts = $0.split(separator: " ")
            return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
        }
    }

    @Test(
        "events reach a hook once each in the outbox, in stream order, through SIGKILLs; markers and copies skipped"
    )
    func deliverThroughKills() async throws {
        try await withCLI { cli in
            let directory = cli.dir.file("nats")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let cluster = try NATSCluster(directory: directory)
            defer { try? cluster.stop() }
            let producer = try NATSConnection(urls: cluster.urls, name: "engine-a")

            // No engine has made the stream yet: said in one line, exit 69.
            let early = try await offThread {
                try GeofenceBinary.run(
                    ["deliver", "--from", cluster.urls, "--state-dir", cli.stateDir], environment: cli.environment)
            }
            #expect(early.status == 69)
            #expect(early.stderr.contains("no geofence engine of the cluster has created it yet"), "\(early.stderr)")

            _ = try producer.ensureStream(
                name: "GEOFENCE_EVENTS", subjects: ["geofence.event.*"], replicas: 3, duplicateWindow: .seconds(600))
            let hookLog = cli.dir.file("hook.log")
            let hook = try await cli.exec(
                "hook", "add", "--id", "journal", "--on", "all", "--command",
                #"echo "$GEOFENCE_EVENT_ID $GEOFENCE_REGION" >> '\#(hookLog)'"#)
            #expect(hook.status == 0, "\(hook.stderr)")

            let all = Self.make(600)
            for partition in 0..<Self.partitions { try Self.marker(partition: partition, to: producer) }
            try Self.publish(Array(all[0..<300]), to: producer)
            // The same event again with the same Nats-Msg-Id: JetStream drops it.
            let again = try producer.jetStreamPublish(
                subject: all[10].subject, payload: Array(all[10].body.utf8), messageID: all[10].id)
            #expect(again.duplicate)
            // A copy JetStream cannot recognize (another message id, as after the duplicate window): stored,
            // and recognized by the event's id in the outbox.
            _ = try producer.jetStreamPublish(
                subject: all[20].subject, payload: Array(all[20].body.utf8), messageID: "copy-of-\(all[20].id)")
            // Something on an event subject that is not an event at all: logged and skipped.
            _ = try producer.jetStreamPublish(subject: "geofence.event.1", payload: Array("not json".utf8))

            // Killed with its first batch committed to the outbox and not acknowledged: the next start finds
            // the consumer with messages outstanding, makes it again after what is committed, and reads on.
            var kills = 0
            let hold = cli.dir.file("hold")
            _ = FileManager.default.createFile(atPath: hold, contents: nil)
            let first = try Self.deliver(cli, cluster, log: "deliver-0.log", hold: ("ACK", hold))
            #expect(await first.waitForLog("holding a batch before acknowledging", timeout: 20), "\(first.log)")
            kill(first.pid, SIGKILL)
            await waitForExit(first.process)
            kills += 1
            // More events while it is down and after it is back, and a new owner's marker in between.
            let more = Task.detached {
                let connection = try NATSConnection(urls: cluster.urls, name: "engine-b")
                try Self.publish(Array(all[300..<450]), to: connection)
                try Self.marker(partition: 2, to: connection)
                try Self.publish(Array(all[450..<600]), to: connection)
            }
            // Killed with a batch fetched and not committed: it comes again at the next start.
            let second = try Self.deliver(cli, cluster, log: "deliver-1.log", hold: ("COMMIT", hold))
            #expect(await second.waitForLog("holding a batch before committing", timeout: 20), "\(second.log)")
            #expect(second.log.contains("made again from"), "\(second.log)")
            kill(second.pid, SIGKILL)
            await waitForExit(second.process)
            kills += 1
            try FileManager.default.removeItem(atPath: hold)
            try await more.value
            // Killed while hooks run (the hook runner's own at-least-once).
            let third = try Self.deliver(cli, cluster, log: "deliver-2.log")
            #expect(await Wait.until(timeout: 30) { Self.hookRuns(cli).count >= 350 })
            kill(third.pid, SIGKILL)
            await waitForExit(third.process)
            kills += 1

            let last = try Self.deliver(cli, cluster, log: "deliver-3.log")
            var pending = -1
            _ = try await Wait.until(timeout: 40, every: .milliseconds(200)) {
                let delivered = Set(Self.hookRuns(cli).map(\.id)).count
                guard delivered >= all.count else { return false }
                pending = try await cli.events("--pending").count
                return pending == 0
            }
            #expect(pending == 0)
            let stopped = await last.stop()
            #expect(stopped != nil && last.process.terminationStatus == 0, "\(last.log)")
            #expect(last.log.contains("deliver: stopped"), "\(last.log)")

            let logs = (0...3).map { cli.read("deliver-\($0).log") ?? "" }.joined()
            // The outbox: every event once, in the stream's order (which is each partition's order).
            let events = try await cli.events().sorted { ($0["seq"]?.intValue ?? 0) < ($1["seq"]?.intValue ?? 0) }
            let ids = events.compactMap { $0["id"]?.stringValue }
            #expect(ids.count == all.count, "\(ids.count) events in the outbox; \(logs)")
            #expect(ids == all.map(\.id), "the outbox is not in the stream's order; \(logs)")
            #expect(
                events.allSatisfy {
                    $0["deliveries"]?.arrayValue?.count == 1
                        && $0["deliveries"]?.arrayValue?.first?["status"]?.stringValue == "done"
                })

            // The hook: every event; per region in the order made; again only what ran at a kill.
            let runs = Self.hookRuns(cli)
            let ran = Set(runs.map(\.id))
            #expect(all.allSatisfy { ran.contains($0.id) }, "an event never reached the hook")
            for region in 0..<5 {
                var seen = Set<String>()
                let order = runs.filter { $0.region == "r\(region)" }.map(\.id).filter { seen.insert($0).inserted }
                #expect(order == all.filter { $0.region == region }.map(\.id), "region r\(region) out of order")
            }
            let duplicates = runs.count - ran.count
            #expect(duplicates <= kills * 4, "\(duplicates) hooks ran again after \(kills) kills")
            #expect(logs.contains("is not an event"), "the invalid message was not reported")
            print(
                "deliver: \(all.count) events, \(kills) SIGKILLs, outbox exact and in order, \(runs.count) hook runs "
                    + "(\(duplicates) again after a kill); SIGTERM stopped it in "
                    + String(format: "%.2f s", stopped ?? -1))
        }
    }

    /// Publishes `events`, each again with the same message id until it is stored (a server being lost makes
    /// publishes fail for a few seconds; JetStream keeps one copy).
    static func publishRetrying(_ events: [Made], to connection: NATSConnection) throws {
        for event in events {
            var tries = 0
            while true {
                do {
                    _ = try connection.jetStreamPublish(
                        subject: event.subject, payload: Array(event.body.utf8), messageID: event.id)
                    break
                } catch let error as NATSError {
                    tries += 1
                    if tries > 200 { throw error }
                    // Nothing to observe but the cluster electing a new leader: try again shortly.
                    Thread.sleep(forTimeInterval: 0.05)
                }
            }
        }
    }

    /// The newest event's seq in the outbox (0: none).
    static func latestSeq(_ cli: CLI) async throws -> Int {
        let result = try await offThread { try cli.run(["events", "--json", "--limit", "1"]) }
        return try JSON.parse(result.stdout).arrayValue?.first?["seq"]?.intValue ?? 0
    }

    /// The outbox's event ids, oldest first.
    static func outbox(_ cli: CLI) async throws -> [String] {
        try await cli.events().sorted { ($0["seq"]?.intValue ?? 0) < ($1["seq"]?.intValue ?? 0) }
            .compactMap { $0["id"]?.stringValue }
    }

    @Test(
        "a backlog read at speed, then the NATS server deliver reads from killed mid-stream: every event once, in order"
    )
    func throughputAndServerLoss() async throws {
        try await withCLI { cli in
            let directory = cli.dir.file("nats")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let cluster = try NATSCluster(directory: directory)
            defer { try? cluster.stop() }
            let producer = try NATSConnection(urls: cluster.urls, name: "engine-a")
            _ = try producer.ensureStream(
                name: "GEOFENCE_EVENTS", subjects: ["geofence.event.*"], replicas: 3, duplicateWindow: .seconds(600))
            let all = Self.make(4000)
            let publishing = ContinuousClock.now
            try Self.publish(Array(all[0..<3000]), to: producer)
            let published = ContinuousClock.now - publishing

            // No hooks: the reader alone, into the outbox.
            let deliver = try Self.deliver(cli, cluster, log: "deliver.log")
            let started = ContinuousClock.now
            #expect(await deliver.waitForLog("deliver: reading GEOFENCE_EVENTS", timeout: 20), "\(deliver.log)")
            var count = 0
            _ = try await Wait.until(timeout: 30, every: .milliseconds(50)) {
                count = try await Self.latestSeq(cli)
                return count >= 3000
            }
            let read = ContinuousClock.now - started
            #expect(count == 3000)

            // A hook added while it runs (no control socket: on the state directory itself) is taken.
            let lateLog = cli.dir.file("late.log")
            let hook = try await cli.exec(
                "hook", "add", "--id", "late", "--on", "all", "--command",
                #"echo "$GEOFENCE_EVENT_ID" >> '\#(lateLog)'"#)
            #expect(hook.status == 0, "\(hook.stderr)")

            // The server it reads from is killed while more events come.
            let reading = try #require(deliver.log.split(separator: "\n").last { $0.contains("deliver: reading") })
            let address = try #require(reading.range(of: "at nats://127.0.0.1:"))
            let port = try #require(UInt16(reading[address.upperBound...].prefix { $0.isNumber }))
            let server = try #require((1...3).first { cluster.clientPort(server: $0) == port })
            let more = Task.detached {
                let connection = try NATSConnection(urls: cluster.urls, name: "engine-b")
                try Self.publishRetrying(Array(all[3000..<4000]), to: connection)
            }
            try cluster.kill(server: server)
            try await more.value
            try cluster.restart(server: server)
            _ = try await Wait.until(timeout: 40, every: .milliseconds(100)) {
                try await Self.latestSeq(cli) >= 4000
            }
            let ids = try await Self.outbox(cli)
            #expect(ids == all.map(\.id), "\(ids.count) events, or out of order; \(deliver.log)")
            #expect(
                await Wait.until(timeout: 30, every: .milliseconds(100)) {
                    (cli.read("late.log") ?? "").contains(all[3999].id)
                }, "the hook added while deliver ran did not get the later events")
            #expect(await deliver.stop() != nil)
            let seconds = { (d: Duration) in Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
            print(
                String(
                    format: "deliver: 3000 events published one by one in %.2f s; read into the outbox in %.2f s "
                        + "(%.0f events/s, from start); 1000 more through the loss of server n%d, all once, in order",
                    seconds(published), seconds(read), 3000 / seconds(read), server))
        }
    }

    @Test(
        "an MQTT sink of the deliver's state directory publishes every event, in order",
        .enabled(if: MosquittoBroker.isAvailable, "\(MosquittoBroker.unavailableReason)"))
    func mqttSink() async throws {
        try await withCLI { cli in
            let broker = try cli.broker(settings: ["max_queued_messages 0"])
            try broker.makeSession(clientID: "dashboard", topic: "geofence/+/+/event")
            let added = try await cli.exec("sink", "add", "--id", "bus", "--mqtt", "mqtt://127.0.0.1:\(broker.port)")
            #expect(added.status == 0, "\(added.stderr)")
            let directory = cli.dir.file("nats")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let cluster = try NATSCluster(directory: directory)
            defer { try? cluster.stop() }
            let producer = try NATSConnection(urls: cluster.urls, name: "engine-a")
            _ = try producer.ensureStream(
                name: "GEOFENCE_EVENTS", subjects: ["geofence.event.*"], replicas: 3, duplicateWindow: .seconds(600))
            let all = Self.make(200)
            try Self.publish(all, to: producer)
            let deliver = try Self.deliver(cli, cluster, log: "deliver.log")
            // `sink list` shows a sink's health only from an engine with a control socket, which deliver has
            // not: what the subscriber receives is the measure (its session keeps what it has not taken yet).
            var ids: [String] = []
            for _ in 0..<15 where ids.count < all.count {
                let received = try await offThread {
                    try broker.receive(clientID: "dashboard", topic: "geofence/+/+/event", seconds: 2)
                }
                ids += received.compactMap { line -> String? in
                    guard let space = line.firstIndex(of: " ") else { return nil }
                    return try? JSON.parse(String(line[line.index(after: space)...]))["id"]?.stringValue
                }
            }
            #expect(await deliver.stop() != nil)
            #expect(ids == all.map(\.id), "\(ids.count) of \(all.count) received, or out of order")
        }
    }

    @Test("a bad --from or --consumer, and a cluster no server of which answers: one line each")
    func refusals() async throws {
        try await withCLI { cli in
            let credentials = try await cli.exec("deliver", "--from", "nats://user:secret@127.0.0.1:4222")
            #expect(credentials.status == 64)
            #expect(
                credentials.stderr.contains("a password in the URL is seen by `ps`")
                    && !credentials.stderr.contains("secret"), "\(credentials.stderr)")
            let consumer = try await cli.exec("deliver", "--from", "nats://127.0.0.1:9", "--consumer", "a.b")
            #expect(consumer.status == 64)
            #expect(consumer.stderr.contains("--consumer"), "\(consumer.stderr)")
            let unreachable = try await cli.exec("deliver", "--from", "nats://127.0.0.1:9")
            #expect(unreachable.status == 69)
            #expect(unreachable.stderr.contains("cannot reach NATS at nats://127.0.0.1:9"), "\(unreachable.stderr)")
            #expect(unreachable.stderr.split(separator: "\n").count == 1, "\(unreachable.stderr)")
        }
    }
}
