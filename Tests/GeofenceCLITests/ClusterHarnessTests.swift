import Foundation
import GeofenceClusterSupport
import GeofenceCore
import GeofenceEngine
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The pieces issue 26's acceptance runs stand on: the fleet scenario, the expected events from one
/// `geofence replay`, the comparison with the events stream, and the supervisor that kills and restarts
/// engines.
@Suite("cluster harness: fleet, replay comparison, events stream, process supervision", .serialized)
struct ClusterHarnessTests {
    /// A fleet whose fixes are all in the past (a replay refuses fixes from the future).
    static func pastFleet(vehicles: Int, rounds: Int, seed: UInt64 = 26) -> ClusterFleet {
        var configuration = ClusterFleet.Configuration(
            vehicles: vehicles, rounds: rounds, start: Date().addingTimeInterval(-Double(rounds) * 10 - 60))
        configuration.seed = seed
        configuration.circles = 30
        configuration.polygons = 6
        configuration.halfSide = 3000
        return ClusterFleet(configuration)
    }

    @Test("the fleet is the same for the same seed, names are subject tokens, fixes are time-ordered and even")
    func fleetIsDeterministic() throws {
        let a = Self.pastFleet(vehicles: 50, rounds: 20)
        var b = a.configuration
        let again = ClusterFleet(b).fixes.map(\.json)
        #expect(a.fixes.map(\.json) == again)
        #expect(a.regionsJSON == ClusterFleet(b).regionsJSON)
        b.seed = 27
        #expect(ClusterFleet(b).fixes.map(\.json) != again)

        let fixes = Array(a.fixes)
        #expect(fixes.count == a.fixCount && fixes.count == 1000)
        #expect(zip(fixes, fixes.dropFirst()).allSatisfy { $0.time < $1.time })
        #expect(fixes.last?.time == a.end)
        let names = Set(fixes.map(\.vehicle))
        #expect(names.count == 50 && names.contains("v00") && names.contains("v49"))
        for name in names {
            #expect(!name.isEmpty && name.allSatisfy { $0.isLetter || $0.isNumber }, "\(name)")
        }
        // Each vehicle one fix per interval.
        let v7 = fixes.filter { $0.vehicle == "v07" }
        #expect(zip(v7, v7.dropFirst()).allSatisfy { $1.time.timeIntervalSince($0.time) == 10 })
        #expect(fixes[0].subject == "geofence.fix.v00" && fixes[0].messageID.hasPrefix("fix-v00-"))
    }

    @Test(
        "a replay of the fleet has crossings of every kind; compared with itself it is equal; one removed, one doubled are reported"
    )
    func replayComparison() throws {
        try withTemporaryDirectory("geofence-cluster-replay") { dir in
            let fleet = Self.pastFleet(vehicles: 200, rounds: 40)
            try fleet.regionsJSON.write(toFile: dir.file("regions.json"), atomically: true, encoding: .utf8)
            #expect(try fleet.writeJSONLines(to: dir.file("fixes.jsonl")) == 8000)
            let events = try ExpectedEvents.replay(fixes: dir.file("fixes.jsonl"), regions: dir.file("regions.json"))
            var types: [String: Int] = [:]
            for event in events { types[event.type, default: 0] += 1 }
            print("cluster fleet: 200 vehicles x 40 fixes: \(events.count) events \(types)")
            for type in ["determined", "enter", "exit", "dwell"] { #expect(types[type, default: 0] > 0, "\(types)") }
            #expect(Set(events.map(\.region)).count > 10)

            let same = EventComparison(expected: events, actual: events.reversed())
            #expect(same.isEqual, "\(same.report())")

            let removed = events[events.count / 2]
            var fewer = events
            fewer.remove(at: events.count / 2)
            let short = EventComparison(expected: events, actual: fewer)
            #expect(!short.isEqual && short.extra.isEmpty)
            #expect(short.missing.map(\.key) == [removed] && short.missing.map(\.count) == [1])
            #expect(short.report().contains("missing (1 distinct):\n  \(removed)"), "\(short.report())")

            let doubled = events[events.count / 3]
            let more = events + [doubled]
            let long = EventComparison(expected: events, actual: more)
            #expect(!long.isEqual && long.missing.isEmpty)
            #expect(long.extra.map(\.key) == [doubled] && long.extra.map(\.count) == [1])
            #expect(long.report().contains("extra (1 distinct):\n  \(doubled)"), "\(long.report())")
            // Both ways at once, and an event line that is no region event is no key.
            let both = EventComparison(expected: fewer, actual: more)
            #expect(both.missing.isEmpty && Set(both.extra.map(\.key)) == [removed, doubled])
            #expect(EventKey(line: #"{"type":"source","status":"lost"}"#) == nil)
        }
    }

    @Test(
        "events read back from GEOFENCE_EVENTS: the replay's events published per partition match it; markers skipped",
        .enabled(if: NATSCluster.isAvailable, "\(NATSCluster.unavailableReason)"))
    func eventsStream() throws {
        try withTemporaryDirectory("geofence-cluster-events") { dir in
            let fleet = Self.pastFleet(vehicles: 60, rounds: 30, seed: 5)
            try fleet.regionsJSON.write(toFile: dir.file("regions.json"), atomically: true, encoding: .utf8)
            try fleet.writeJSONLines(to: dir.file("fixes.jsonl"))
            let lines = try ExpectedEvents.replayLines(
                fixes: dir.file("fixes.jsonl"), regions: dir.file("regions.json"))
            let expected = lines.compactMap { EventKey(line: $0) }
            #expect(expected.count == lines.count && !expected.isEmpty)

            try FileManager.default.createDirectory(atPath: dir.file("nats"), withIntermediateDirectories: false)
            let cluster = try NATSCluster(directory: dir.file("nats"))
            defer { try? cluster.stop() }
            let connection = try NATSConnection(urls: cluster.urls)
            _ = try connection.ensureStream(
                name: "GEOFENCE_EVENTS", subjects: ["geofence.event.*"], replicas: 3, duplicateWindow: .seconds(600))
            // As owners would: a take-over marker on each partition first, then the events.
            for p in 0..<12 {
                _ = try connection.jetStreamPublish(
                    subject: "geofence.event.\(p)", payload: Array(#"{"takeover":"engine-1"}"#.utf8),
                    headers: [("Geofence-Kind", "takeover")])
            }
            for line in lines {
                let subject = try JSON.parse(line)["subject"]?.stringValue ?? ""
                _ = try connection.jetStreamPublish(
                    subject: "geofence.event.\(NATSPartition.of(subject, partitions: 12))", payload: Array(line.utf8))
            }
            _ = try connection.jetStreamPublish(subject: "geofence.event.3", payload: Array(#"{"note":1}"#.utf8))

            let read = try ClusterEventsRead(connection: connection)
            #expect(read.messages == lines.count + 13)
            #expect(read.skipped == ["Geofence-Kind: takeover": 12, "not a region event": 1], "\(read.skipped)")
            #expect(read.perSubject.count == 12)
            let comparison = EventComparison(expected: expected, actual: read.events)
            #expect(comparison.isEqual, "\(comparison.report())")
        }
    }

    @Test("the supervisor SIGKILLs and restarts engines on demand and on a schedule, and keeps every start's log")
    func supervisor() async throws {
        try await withTemporaryDirectory("geofence-supervisor") { dir in
            let supervisor = ProcessSupervisor(logDirectory: dir.path)
            for n in 0..<2 {
                let fifo = dir.file("fleet-\(n).fifo")
                #expect(mkfifo(fifo, 0o600) == 0)
                supervisor.add(
                    name: "engine-\(n)",
                    arguments: [
                        "run", "--source", "json:" + fifo, "--state-dir", dir.file("state-\(n)"), "--socket",
                        dir.file("engine-\(n).sock"),
                    ])
            }
            let add = try GeofenceBinary.run([
                "add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100", "--state-dir",
                dir.file("state-0"), "--socket", dir.file("engine-0.sock"),
            ])
            #expect(add.status == 0, "\(add.stderr)")
            try supervisor.startAll()
            for n in 0..<2 {
                #expect(await supervisor.waitForLog(n, "control socket at", timeout: 20), "\(supervisor.log(n))")
            }

            // On demand: a crash and a start; the new engine works (it judges a fix fed to it).
            let first = try #require(supervisor.pid(0))
            let second = try supervisor.restart(0)
            #expect(second != first && supervisor.isRunning(0) && supervisor.starts(0) == 2)
            #expect(await supervisor.waitForLog(0, "control socket at", occurrences: 2, timeout: 20))
            let feed = try FileHandle(forWritingTo: URL(fileURLWithPath: dir.file("fleet-0.fifo")))
            let time = TimestampParser.format(Date())
            feed.write(
                Data(
                    (#"{"class":"TPV","device":"v1","mode":3,"time":"\#(time)","lat":48.85,"lon":2.35,"eph":5}"#
                        + "\n").utf8))
            #expect(
                await supervisor.waitForLog(0, #"event determined region="depot""#, timeout: 20), "\(supervisor.log(0))"
            )
            try? feed.close()

            // On a schedule: every 0.5 s, in turn.
            let killing = supervisor.startKilling(every: .milliseconds(500), downtime: .milliseconds(100))
            #expect(await Wait.until(timeout: 30) { killing.rounds.count >= 3 })
            let rounds = killing.stop()
            #expect(killing.failures.isEmpty, "\(killing.failures)")
            #expect(rounds.count >= 3 && rounds.prefix(3).map(\.member) == [0, 1, 0], "\(rounds.map(\.member))")
            for round in rounds {
                #expect(round.newPID != round.oldPID && round.restartedAt.timeIntervalSince(round.killedAt) >= 0.1)
            }
            #expect(supervisor.isRunning(0) && supervisor.isRunning(1))
            let log = supervisor.log(0)
            #expect(
                log.contains("--- supervisor: start 1 of engine-0")
                    && log.contains("--- supervisor: start 3 of engine-0"))

            supervisor.stopAll()
            #expect(!supervisor.isRunning(0) && !supervisor.isRunning(1))
            // Every exit was the supervisor's doing (SIGKILL, then SIGTERM at the end).
            #expect(supervisor.unexpectedExits.isEmpty, "\(supervisor.unexpectedExits)")
            let starts = supervisor.starts(0) + supervisor.starts(1)
            #expect(
                await Wait.until(timeout: 5) { supervisor.records.filter(\.isExit).count == starts },
                "\(supervisor.records)")
        }
    }
}
