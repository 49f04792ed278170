import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceTestSupport
import Synchronization
import Testing

/// The cluster engine against a real 3-server JetStream cluster: fixes published to the partitioned fix
/// stream, events read back from the event stream and compared, event for event, with what the filter and the
/// monitor make of the same fixes in one process (what `geofence replay` does). Ownership is given by the test
/// here (the leases have their own tests): one engine owning every partition, then a second taking them over
/// from the first's checkpoints, then the first publishing again after the take-over (fenced).
@Suite(
    "Cluster engine against a 3-server JetStream cluster", .serialized,
    .enabled(if: NATSCluster.isAvailable, "\(NATSCluster.unavailableReason)"))
struct ClusterEngineTests {
    static let partitions = 12

    /// A small fleet: `vehicles` vehicles driving east at 15 m/s, one fix a second, through a row of circles
    /// 500 m apart (radius 150 m), so that each enters and leaves several; fix times end a minute ago.
    struct Fleet {
        var regions: [Region] = []
        /// Every fix, in the order published: (vehicle, partition, TPV JSON).
        var fixes: [(vehicle: String, partition: Int, payload: String)] = []

        init(vehicles: Int, seconds: Int) throws {
            let start = Date().addingTimeInterval(-Double(seconds) - 60).timeIntervalSince1970.rounded()
            let metresPerDegree = 111_320 * cos(52.0 * .pi / 180)
            for r in 0..<8 {
                regions.append(
                    try Region(
                        id: "stop-\(r)",
                        center: Coordinate(latitude: 52.0, longitude: 13.0 + Double(r * 500 + 300) / metresPerDegree),
                        radius: 150))
            }
            for t in 0..<seconds {
                for v in 0..<vehicles {
                    let name = "truck-\(v)"
                    let lat = 52.0 + Double(v % 10) * 0.0002
                    let lon = 13.0 + (15 * Double(t) + Double(v) * 7) / metresPerDegree
                    let time = TimestampParser.format(Date(timeIntervalSince1970: start + Double(t)))
                    let payload =
                        #"{"class":"TPV","device":"\#(name)","mode":3,"time":"\#(time)","lat":\#(lat),"lon":\#(lon),"eph":5}"#
                    fixes.append((name, ClusterEngineTests.partition(of: name), payload))
                }
            }
        }
    }

    /// A stable spread of vehicles over the partitions (the server's mapping does this in production).
    static func partition(of vehicle: String) -> Int {
        var h: UInt32 = 2_166_136_261
        for byte in vehicle.utf8 { h = (h ^ UInt32(byte)) &* 16_777_619 }
        return Int(h % UInt32(partitions))
    }

    /// The events the filter and the monitor make of the fleet's fixes in one process: (subject, region,
    /// type, fix time) of each, as `geofence replay` would print them.
    static func expected(_ fleet: Fleet) -> [String] {
        var filter = FixFilter()
        var monitor = RegionMonitor()
        for (i, region) in fleet.regions.enumerated() { monitor.insert(region, seq: Int64(i + 1)) }
        var events: [String] = []
        for fix in fleet.fixes {
            guard case .tpv(let decoded) = FleetPayload.decode(topic: fix.vehicle, payload: Array(fix.payload.utf8)),
                case .accepted(let weighted) = filter.evaluate(decoded)
            else { continue }
            for event in monitor.process(weighted, now: weighted.time).events where event.subject != nil {
                events.append(key(event.subject ?? "", event.region, event.type.rawValue, event.time))
            }
        }
        return events.sorted()
    }

    static func key(_ subject: String, _ region: String, _ type: String, _ time: Date) -> String {
        "\(subject) \(region) \(type) \(TimestampParser.format(time))"
    }

    /// The events in the event stream (take-over markers left out), as `expected` keys, with their ids.
    static func stored(_ connection: NATSConnection, _ layout: ClusterLayout) throws -> [(key: String, id: String)] {
        guard let info = try connection.streamInfo(name: layout.eventStream), info.lastSequence > 0 else { return [] }
        var out: [(String, String)] = []
        for sequence in 1...info.lastSequence {
            guard let message = try connection.message(stream: layout.eventStream, sequence: sequence),
                message.headers[PartitionEventLog.kindHeader] == nil,
                case .object(let o)? = try? JSON.parse(message.payload),
                case .string(let subject)? = o["subject"], case .string(let region)? = o["region"],
                case .string(let type)? = o["type"], case .string(let timeText)? = o["time"],
                case .string(let id)? = o["id"], let time = try? TimestampParser.parse(timeText)
            else { continue }
            out.append((key(subject, region, type, time), id))
        }
        return out
    }

    /// Publishes fixes to the partitioned fix stream, as the server's mapping would put them.
    static func publish(_ fixes: ArraySlice<(vehicle: String, partition: Int, payload: String)>, _ c: NATSConnection)
        throws
    {
        for fix in fixes {
            _ = try c.jetStreamPublish(
                subject: "geofence.fixp.\(fix.partition).\(fix.vehicle)", payload: Array(fix.payload.utf8))
        }
    }

    /// An engine on its own thread, owning `partitions` from the start (term `term`), with the fleet's regions.
    final class Running: @unchecked Sendable {
        let engine: ClusterEngine
        let thread: Thread
        let done = Flag(false)
        let valid = Flag(true)

        final class Flag: Sendable {
            let value: Mutex<Bool>
            init(_ value: Bool) { self.value = Mutex(value) }
            func get() -> Bool { value.withLock { $0 } }
            func set(_ new: Bool) { value.withLock { $0 = new } }
        }

        init(
            _ connection: NATSConnection, fleet: Fleet, id: String, term: UInt64, interval: Double = 0.5,
            regionChanges: [ClusterInput] = [], partitions: Range<Int> = 0..<ClusterEngineTests.partitions,
            configure: (ClusterEngine) -> Void = { _ in }
        ) {
            var configuration = ClusterEngine.Configuration(
                layout: ClusterLayout(partitions: ClusterEngineTests.partitions), engineID: id)
            configuration.checkpointInterval = interval
            let valid = self.valid
            let engine = ClusterEngine(
                configuration: configuration, connection: connection,
                logger: Logger(minimum: .warning, sink: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }),
                remaining: { _ in valid.get() ? 3600 : 0 })
            configure(engine)
            for (i, region) in fleet.regions.enumerated() { engine.inbox.post(.regionPut(region, seq: Int64(i + 1))) }
            for change in regionChanges { engine.inbox.post(change) }
            for p in partitions { engine.inbox.post(.acquired(partition: p, term: term)) }
            self.engine = engine
            let done = self.done
            thread = Thread {
                engine.run()
                done.set(true)
            }
            thread.start()
        }

        /// Vehicles restored so far (read while the engine runs: a test's rough look, exact once it stopped).
        func restored() -> Int { engine.statistics.restoredVehicles }

        func stop() throws {
            engine.inbox.stop()
            guard Wait.blocking(timeout: 30, { done.get() }) else { throw EngineDidNotStop() }
        }
    }

    struct EngineDidNotStop: Error {}

    static func withCluster(_ body: (NATSCluster, NATSConnection, ClusterLayout) throws -> Void) throws {
        try withTemporaryDirectory("geofence-cluster-engine") { directory in
            let cluster = try NATSCluster(directory: directory.path)
            defer { try? cluster.stop() }
            let connection = try NATSConnection(urls: cluster.urls, name: "test")
            let layout = ClusterLayout(partitions: partitions)
            try layout.ensureStreams(connection)
            try body(cluster, connection, layout)
        }
    }

    @Test("one engine owning every partition stores exactly the events one replay of the fixes makes")
    func oneEngine() throws {
        let fleet = try Fleet(vehicles: 20, seconds: 120)
        let expected = Self.expected(fleet)
        #expect(expected.count > 100, "the scenario makes enough events to compare (\(expected.count))")
        try Self.withCluster { _, connection, layout in
            let engine = Running(connection, fleet: fleet, id: "a", term: 1)
            try Self.publish(fleet.fixes[...], connection)
            #expect(
                Wait.blocking(timeout: 60) {
                    (try? Self.stored(connection, layout).count) ?? 0 >= expected.count
                }, "every event is stored")
            try engine.stop()
            let stored = try Self.stored(connection, layout)
            Self.expectSame(stored.map(\.key), expected)
            // Each event's id is its identity: the same on any engine that judges the same fixes.
            for (key, id) in stored.prefix(20) {
                let parts = key.split(separator: " ")
                let time = try TimestampParser.parse(String(parts[3]))
                #expect(
                    id
                        == EventIdentity.id(
                            subject: String(parts[0]), region: String(parts[1]),
                            type: try #require(RegionEventType(rawValue: String(parts[2]))), time: time))
            }
            #expect(engine.engine.statistics.fenced == 0)
        }
    }

    @Test("a second engine takes over from the first's checkpoints: no event lost, none stored twice")
    func takeOver() throws {
        let fleet = try Fleet(vehicles: 20, seconds: 120)
        let expected = Self.expected(fleet)
        try Self.withCluster { _, connection, layout in
            let half = fleet.fixes.count / 2
            let a = Running(connection, fleet: fleet, id: "a", term: 1, interval: 0.2)
            try Self.publish(fleet.fixes[..<half], connection)
            // The first engine judged the first half and checkpointed some of it; then it "dies": its lease is
            // no longer valid and it stops without a last checkpoint.
            let firstHalf = Set(Self.expectedKeys(fleet, upTo: half))
            #expect(
                Wait.blocking(timeout: 60) {
                    Set(((try? Self.stored(connection, layout)) ?? []).map(\.key)).isSuperset(of: firstHalf)
                }, "the first half's events are stored")
            a.valid.set(false)
            try a.stop()
            let b = Running(connection, fleet: fleet, id: "b", term: 2)
            try Self.publish(fleet.fixes[half...], connection)
            #expect(
                Wait.blocking(timeout: 60) {
                    (try? Self.stored(connection, layout).count) ?? 0 >= expected.count
                }, "every event is stored")
            try b.stop()
            Self.expectSame(try Self.stored(connection, layout).map(\.key), expected)
            #expect(b.engine.statistics.takeOvers == Self.partitions)
            // The second engine started from the first's checkpoints, not from the first fix: every vehicle came
            // back from one (with its state restored wrong, or not at all, its first fixes would make `determined`
            // where `enter` was due), and it judged fewer fixes than were published.
            #expect(b.engine.statistics.restoredVehicles == 20)
            #expect(b.engine.statistics.fixes < fleet.fixes.count, "judged \(b.engine.statistics.fixes)")
        }
    }

    /// The stored events are the expected ones, as multisets: says which are missing and which are extra.
    static func expectSame(_ stored: [String], _ expected: [String], sourceLocation: SourceLocation = #_sourceLocation)
    {
        var counts: [String: Int] = [:]
        for key in stored { counts[key, default: 0] += 1 }
        for key in expected { counts[key, default: 0] -= 1 }
        let extra = counts.filter { $0.value > 0 }.keys.sorted()
        let missing = counts.filter { $0.value < 0 }.keys.sorted()
        #expect(
            extra.isEmpty && missing.isEmpty,
            "\(stored.count) stored, \(expected.count) expected; missing \(missing.count): \(missing.prefix(5)); extra \(extra.count): \(extra.prefix(5))",
            sourceLocation: sourceLocation)
    }

    @Test("a publish whose answer was lost, sent again, is known stored, not taken for a fence")
    func lostAnswer() throws {
        try Self.withCluster { _, connection, layout in
            let log = try PartitionEventLog(connection: connection, layout: layout, partition: 2, owner: "a", term: 1)
            let event = RegionEvent(
                id: "00000000-0000-8000-8000-0000000000aa", type: .enter, region: "stop-0", subject: "truck-1",
                time: Date(), state: .inside, previous: .outside, inferred: false, distance: 1, radius: 150, fix: nil)
            // The first try reached JetStream and was stored; its answer never came back (a leader election).
            _ = try connection.jetStreamPublish(
                subject: layout.eventSubject(partition: 2), payload: [1], messageID: event.id,
                expectedLastSubjectSequence: log.lastSequence)
            // The owner sends it again, expecting the sequence before it: the stream refuses that expectation,
            // and the log finds its own event there.
            #expect(try log.publish(event))
            #expect(log.counts.fenced == 0 && log.counts.stored == 1)
            // A real fence still throws.
            _ = try PartitionEventLog(connection: connection, layout: layout, partition: 2, owner: "b", term: 2)
            var later = event
            later.id = "00000000-0000-8000-8000-0000000000ab"
            #expect(throws: NATSError.self) { try log.publish(later) }
            #expect(log.counts.fenced == 1)
        }
    }

    @Test("checkpoints: the last one read back whole, after others of the same and other partitions, chunked")
    func checkpoints() throws {
        try Self.withCluster { _, connection, layout in
            var log = CheckpointLog(connection: connection, layout: layout)
            log.chunkSize = 1000
            var last: [Int: [UInt8]] = [:]
            for round in 0..<4 {
                for partition in [3, 5] {
                    let bytes = (0..<(round * 700 + 10)).map { UInt8(truncatingIfNeeded: $0 &* (partition + round)) }
                    try log.write(
                        partition: partition, bytes: bytes, covered: UInt64(round * 10 + partition), term: 1, owner: "a"
                    )
                    last[partition] = bytes
                    let read = try #require(try log.read(partition: partition))
                    #expect(read.bytes == bytes && read.covered == UInt64(round * 10 + partition), "round \(round)")
                }
            }
            for partition in [3, 5] { #expect(try log.read(partition: partition)?.bytes == last[partition]) }
            #expect(try log.read(partition: 4) == nil)
        }
    }

    @Test("an engine cut off from NATS gives its partitions up at once when told, whatever its status write waits for")
    func givesUpWhileCut() throws {
        try Self.withCluster { cluster, _, layout in
            let fleet = try Fleet(vehicles: 4, seconds: 10)
            // The engine reaches NATS through a proxy the test cuts; its status goes to a bucket there, every
            // 0.2 s (a put then waits for the request timeout, 5 s).
            let proxy = try FaultProxy(targetPort: try #require(cluster.clientPort(server: 1)))
            defer { proxy.stop() }
            let cutConnection = try NATSConnection(
                urls: "nats://" + proxy.address, name: "cut", connectTimeout: .milliseconds(250),
                ignoreDiscoveredServers: true, buffersWhileReconnecting: false)
            let engine = Running(
                cutConnection, fleet: fleet, id: "cut", term: 1,
                configure: { engine in
                    engine.statusBucket = try? cutConnection.ensureKeyValue(
                        bucket: layout.statusBucket, replicas: 3, ttl: .seconds(60))
                    engine.statusInterval = 0.2
                })
            #expect(Wait.blocking(timeout: 30) { engine.engine.statistics.takeOvers == ClusterEngineTests.partitions })
            proxy.cut()
            Thread.sleep(forTimeInterval: 0.5)
            let told = ContinuousClock.now
            for p in 0..<ClusterEngineTests.partitions { engine.engine.inbox.post(.lost(partition: p)) }
            #expect(
                Wait.blocking(timeout: 10) { engine.engine.statistics.givenUp == ClusterEngineTests.partitions })
            let seconds = (ContinuousClock.now - told) / .seconds(1)
            #expect(seconds < 1, "given up \(seconds) s after the leases were lost")
            try engine.stop()
        }
    }

    @Test("a region's expiry, made by every engine whose fixes pass it, is stored once, even by an engine come later")
    func expiryStoredOnce() throws {
        var fleet = try Fleet(vehicles: 20, seconds: 120)
        // A region that expires halfway through the fleet's fixes, where the vehicles drive.
        let firstFix = try #require(
            fleet.fixes.first.flatMap { try? JSON.parse(Array($0.payload.utf8)) }?["time"]?.stringValue)
        let expires = try TimestampParser.parse(firstFix).addingTimeInterval(60)
        let base = fleet.regions[0]
        fleet.regions.append(try Region(id: "short.lived/1", center: base.center, radius: 400, expires: expires))
        try Self.withCluster { _, connection, layout in
            try Self.publish(fleet.fixes[...], connection)
            // Two engines, each with half of the partitions: both expire the region by their own fixes.
            let a = Running(connection, fleet: fleet, id: "a", term: 1, partitions: 0..<6)
            let b = Running(connection, fleet: fleet, id: "b", term: 1, partitions: 6..<12)
            let subject = layout.expirySubject(region: "short.lived/1")
            func expiries() -> [NATSConnection.StoredMessage] {
                var found: [NATSConnection.StoredMessage] = []
                _ = try? connection.readStream(layout.eventStream, filter: subject) { found.append($0) }
                return found
            }
            #expect(Wait.blocking(timeout: 60) { !expiries().isEmpty })
            let expected = Self.expected(fleet)
            #expect(
                Wait.blocking(timeout: 60) { (try? Self.stored(connection, layout).count) ?? 0 >= expected.count },
                "\((try? Self.stored(connection, layout).count) ?? -1) of \(expected.count)")
            try a.stop()
            try b.stop()
            // An engine that comes later holds the region too (it is still in the bucket) and expires it at its
            // first fix past the time: it finds the event stored.
            let c = Running(connection, fleet: fleet, id: "c", term: 2)
            // One more fix, a second after the last, from the last vehicle to report.
            let last = try #require(fleet.fixes.last)
            var json = try #require(try JSON.parse(Array(last.payload.utf8)).objectValue)
            let lastTime = try TimestampParser.parse(try #require(json["time"]?.stringValue))
            json["time"] = .string(TimestampParser.format(lastTime.addingTimeInterval(1)))
            try Self.publish(
                [(last.vehicle, last.partition, JSONValue.object(json).serialized())][...], connection)
            #expect(Wait.blocking(timeout: 60) { c.engine.statistics.fixes > 0 })
            try c.stop()
            // Each engine made the expiry; one stored it, the others found it.
            let made = [a, b, c].map { $0.engine.expiryCounts }
            #expect(made.map { $0.0 }.reduce(0, +) == 1 && made.map { $0.1 }.reduce(0, +) == 2, "\(made)")
            let stored = expiries()
            #expect(stored.count == 1, "\(stored.map { String(decoding: $0.payload, as: UTF8.self) })")
            let event = try #require(stored.first.flatMap { try? JSON.parse($0.payload) })
            #expect(event["type"]?.stringValue == "expired" && event["region"]?.stringValue == "short.lived/1")
            #expect(event["time"]?.stringValue == TimestampParser.format(expires))
            #expect(stored.first?.headers["Nats-Msg-Id"]?.first == event["id"]?.stringValue)
        }
    }

    @Test(
        "status warns of a take-over's fixes the stream drops soon, owned or orphaned, and not before; it says when engines judge with different settings"
    )
    func retentionWarning() throws {
        try Self.withCluster { _, connection, _ in
            // A layout of its own, whose fix stream keeps fixes for 60 s: two partitions, 0 owned (its checkpoint
            // covers nothing yet), 1 orphaned (its last checkpoint covers the first two fixes).
            let layout = ClusterLayout(partitions: 2, prefix: "ret")
            _ = try connection.ensureStream(
                name: layout.fixStream, subjects: [layout.partitionedFixSubjects], replicas: 3,
                duplicateWindow: .seconds(10), maxAge: .seconds(60))
            try layout.ensureStreams(connection)
            let status = try connection.ensureKeyValue(bucket: layout.statusBucket, replicas: 1, ttl: .seconds(60))
            let settings = ClusterEngine.Configuration(layout: layout, engineID: "e").settingsFingerprint
            func report(after seconds: Double) throws -> ClusterStatusReport {
                let now = Date().addingTimeInterval(seconds)
                let engine = JSONValue.object([
                    "engine": .string("e"), "partitions_total": .number(2), "settings": .string(settings),
                    "updated": .string(TimestampParser.format(now)),
                    "partitions": .array([
                        .object(["partition": .number(0), "checkpoint": .string("0"), "last_fix_age": .number(1)])
                    ]),
                ])
                _ = try status.put("e", Array(engine.serialized().utf8))
                return try ClusterStatusReport.read(connection, prefix: "ret", now: now)
            }
            // Before any fix (the stream's first and last sequence 0): nothing to warn of, and no failure.
            #expect(try report(after: 50).warnings.isEmpty)
            let fix = Array(#"{"class":"TPV","mode":3,"lat":52,"lon":13}"#.utf8)
            for vehicle in ["a", "b", "c"] {
                let partition = vehicle == "a" ? 0 : 1
                _ = try connection.jetStreamPublish(subject: "ret.fixp.\(partition).\(vehicle)", payload: fix)
            }
            try CheckpointLog(connection: connection, layout: layout).write(
                partition: 1, bytes: [1, 2, 3], covered: 2, term: 1, owner: "gone")
            // Now, and 30 s on (30 s left of 60): no warning.
            #expect(try report(after: 0).warnings.isEmpty)
            #expect(try report(after: 30).warnings.isEmpty)
            // 50 s on (10 s left, under a quarter of the max age): both partitions, the owned one's from its first
            // fix, the orphaned one's from the fix after its checkpoint.
            let late = try report(after: 50)
            #expect(late.orphaned == [1])
            #expect(late.warnings.count == 2, "\(late.warnings)")
            #expect(late.warnings.first?.hasPrefix("partition 0: a take-over needs the fixes from 1 on") == true)
            #expect(late.warnings.last?.hasPrefix("partition 1: a take-over needs the fixes from 3 on") == true)
            #expect(late.json["warnings"]?.arrayValue?.count == 2)

            // A second engine with the same settings is no problem; one with a wider filter is.
            func secondEngine(_ configure: (inout ClusterEngine.Configuration) -> Void) throws -> [String] {
                var configuration = ClusterEngine.Configuration(layout: layout, engineID: "f")
                configure(&configuration)
                let engine = JSONValue.object([
                    "engine": .string("f"), "partitions_total": .number(2),
                    "settings": .string(configuration.settingsFingerprint),
                    "updated": .string(TimestampParser.format(Date())), "partitions": .array([]),
                ])
                _ = try status.put("f", Array(engine.serialized().utf8))
                return try report(after: 0).problems.filter { $0.contains("different settings") }
            }
            #expect(try secondEngine { _ in }.isEmpty)
            let mismatch = try secondEngine { $0.filter.maxAccuracy = 100 }
            #expect(mismatch.count == 1 && mismatch.first?.contains("e: \(settings)") == true, "\(mismatch)")
        }
    }

    @Test("a region removed before a take-over holds the new owner back no longer than it takes the removal")
    func removedRegion() throws {
        let fleet = try Fleet(vehicles: 6, seconds: 40)
        let extra = try Region(id: "gone", center: Coordinate(latitude: 10, longitude: 10), radius: 100)
        try Self.withCluster { _, connection, layout in
            // The first owner saw a region added (revision 9) and removed (revision 10); its checkpoints say
            // they were judged against regions up to 10.
            let a = Running(
                connection, fleet: fleet, id: "a", term: 1, interval: 0.2,
                regionChanges: [.regionPut(extra, seq: 9), .regionRemoved(id: "gone"), .regionsTaken(upTo: 10)])
            try Self.publish(fleet.fixes[...], connection)
            #expect(Wait.blocking(timeout: 60) { a.engine.statistics.fixes == fleet.fixes.count }, "every fix judged")
            // A clean stop: a last checkpoint of every partition.
            try a.stop()
            // The next owner started after the removal: the bucket gave it the eight regions and revision 10.
            let b = Running(connection, fleet: fleet, id: "b", term: 2, regionChanges: [.regionsTaken(upTo: 10)])
            #expect(
                Wait.blocking(timeout: 30) { b.engine.inbox.waitingFixes == 0 && b.restored() == 6 },
                "every vehicle restored from the checkpoints: \(b.restored())")
            try b.stop()
            #expect(b.engine.statistics.takeOvers == Self.partitions)
        }
    }

    /// `expected` for the first `count` fixes.
    static func expectedKeys(_ fleet: Fleet, upTo count: Int) -> [String] {
        var head = fleet
        head.fixes = Array(fleet.fixes[..<count])
        return expected(head)
    }

    @Test("a stale owner's publish after a take-over is refused by the fence, and it gives the partition up")
    func fenced() throws {
        let fleet = try Fleet(vehicles: 4, seconds: 60)
        try Self.withCluster { _, connection, layout in
            let partition = fleet.fixes[0].partition
            let first = fleet.fixes.filter { $0.partition == partition }
            let stale = try PartitionEventLog(
                connection: connection, layout: layout, partition: partition, owner: "a", term: 1)
            let event = RegionEvent(
                id: "00000000-0000-8000-8000-000000000001", type: .enter, region: "stop-0",
                subject: first[0].vehicle, time: Date(), state: .inside, previous: .outside, inferred: false,
                distance: 1, radius: 150, fix: nil)
            #expect(try stale.publish(event))
            // Another engine takes the partition over: its marker moves the subject's last sequence.
            _ = try PartitionEventLog(connection: connection, layout: layout, partition: partition, owner: "b", term: 2)
            var later = event
            later.id = "00000000-0000-8000-8000-000000000002"
            later.type = .exit
            let error = #expect(throws: NATSError.self) { try stale.publish(later) }
            #expect(error?.kind == .wrongLastSequence)
            #expect(stale.counts.fenced == 1 && stale.counts.stored == 1)
        }
    }
}
