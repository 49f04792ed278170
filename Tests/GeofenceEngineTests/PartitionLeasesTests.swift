import Foundation
import GeofenceEngine
import GeofenceTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Partition ownership by leases in a replicated key-value bucket (issue 26, Docs/cluster.md), against a
/// real 3-server JetStream cluster shared by the suite: first the guard single ownership rests on (a lease
/// write is compare-and-set on the revision and carries `Nats-Msg-Id = lease-p-N-after-REV`), then the
/// lease managers of several engines sharing, taking over and giving back partitions through crashes, a
/// late joiner, a network cut and the loss of a NATS server.
@Suite(
    "Partition leases on a 3-server JetStream cluster", .serialized, .sharedNATSCluster,
    .enabled(if: NATSCluster.isAvailable, "\(NATSCluster.unavailableReason)"))
struct PartitionLeasesTests {
    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// What one writer's update of a race came to.
    enum Outcome: Equatable, Sendable {
        case won(UInt64)
        case wrongRevision
        case duplicate
        case failed(String)
    }

    /// `writers` updates of `key` from the same read revision, released at once from threads of their own
    /// (each writer connected to a server of its own); every writer's outcome.
    static func race(_ writers: [NATSKeyValue], key: String, round: Int, messageID: Bool) throws -> [Outcome] {
        let revision = try #require(try writers[0].latest(key)).revision
        let outcomes = Mutex<[Outcome]>([])
        let gate = StartGate(parties: writers.count)
        let threads = writers.enumerated().map { index, store in
            Thread {
                gate.arriveAndWait()
                let outcome: Outcome
                do {
                    let value = Self.bytes("writer-\(index) round-\(round)")
                    let stored =
                        messageID
                        ? try store.update(key, value, revision: revision, messageID: "lease-\(key)-after-\(revision)")
                        : try store.update(key, value, revision: revision)
                    outcome = .won(stored)
                } catch let error as NATSError {
                    outcome =
                        switch error.kind {
                        case .wrongRevision: .wrongRevision
                        case .duplicate: .duplicate
                        default: .failed("\(error)")
                        }
                } catch {
                    outcome = .failed("\(error)")
                }
                outcomes.withLock { $0.append(outcome) }
            }
        }
        for thread in threads { thread.start() }
        gate.openWhenAllArrived()
        #expect(Wait.blocking(timeout: 20) { outcomes.withLock { $0.count } == writers.count })
        return outcomes.withLock { $0 }
    }

    /// The decisive experiment of Docs/cluster.md: on nats-server 2.9.10 compare-and-set alone lets two
    /// writers that read the same revision of an R3 key both win (nats-server#4320); with the message id
    /// `lease-KEY-after-REV` as well, exactly one wins every round, the others are told `.duplicate` or
    /// `.wrongRevision`, and the key holds the winner's value at the winner's revision.
    @Test("writers racing from one revision of an R3 key: one winner a round with the message id", arguments: [2, 3])
    func raceFromOneRevision(writerCount: Int) throws {
        let cluster = try SharedNATSCluster.cluster()
        let connections = try (0..<writerCount).map {
            try NATSConnection(urls: cluster.serverURLs[$0 % 3], name: "racer-\($0)")
        }
        let rounds = 40
        for guarded in [true, false] {
            let bucket = "race-\(writerCount)-\(guarded ? "msgid" : "cas")"
            let stores = try connections.map { try $0.ensureKeyValue(bucket: bucket, replicas: 3) }
            try stores[0].create("p-0", Self.bytes("start"))
            var winnersPerRound: [Int] = []
            var duplicates = 0
            var wrongRevisions = 0
            for round in 0..<rounds {
                let outcomes = try Self.race(stores, key: "p-0", round: round, messageID: guarded)
                let won = outcomes.compactMap { if case .won(let revision) = $0 { revision } else { nil } }
                let failed = outcomes.filter { if case .failed = $0 { true } else { false } }
                #expect(failed.isEmpty, "round \(round): \(failed)")
                duplicates += outcomes.filter { $0 == .duplicate }.count
                wrongRevisions += outcomes.filter { $0 == .wrongRevision }.count
                winnersPerRound.append(won.count)
                if guarded {
                    #expect(won.count == 1, "round \(round): \(outcomes)")
                    let stored = try #require(try stores[0].latest("p-0"))
                    #expect(won == [stored.revision], "round \(round): \(outcomes), stored \(stored.revision)")
                }
            }
            let doubled = winnersPerRound.filter { $0 > 1 }.count
            let none = winnersPerRound.filter { $0 == 0 }.count
            print(
                "NATS lease race, \(writerCount) writers, \(guarded ? "compare-and-set + message id" : "compare-and-set alone"): \(rounds) rounds, more than one winner in \(doubled), none in \(none); losers told duplicate \(duplicates), wrong revision \(wrongRevisions)"
            )
            if guarded {
                #expect(doubled == 0 && none == 0)
            } else {
                withKnownIssue(
                    "nats-server < 2.9.21 (#4320): the expected sequence is not part of the Raft proposal",
                    isIntermittent: true
                ) {
                    #expect(doubled == 0)
                }
            }
        }
    }

    /// The error `body` throws, which must be a `NATSError`.
    static func natsError(_ body: () throws -> Void) -> NATSError? {
        do {
            try body()
            return nil
        } catch {
            return error as? NATSError
        }
    }

    @Test("guarded writes: a message id already stored loses; a create over a delete marker uses the marker's revision")
    func guardedWrites() throws {
        let cluster = try SharedNATSCluster.cluster()
        let connection = try NATSConnection(urls: cluster.urls)
        let store = try connection.ensureKeyValue(bucket: "guarded", replicas: 3)
        let id: (UInt64) -> String = { LeaseSettings.messageID(0, after: $0) }
        let created = try store.create("p-0", Self.bytes("a"), messageID: id)
        let again = Self.natsError { try store.create("p-0", Self.bytes("b"), messageID: id) }
        #expect(again?.kind == .duplicate, "\(String(describing: again))")
        let updated = try store.update("p-0", Self.bytes("a2"), revision: created, messageID: id(created))
        let repeated = Self.natsError {
            try store.update("p-0", Self.bytes("b2"), revision: created, messageID: id(created))
        }
        // Not racing, the revision is checked first: either answer means another writer won.
        #expect(repeated?.kind == .wrongRevision || repeated?.kind == .duplicate, "\(String(describing: repeated))")
        // A fresh id does not get around the revision.
        let stale = Self.natsError { try store.update("p-0", Self.bytes("b3"), revision: created, messageID: "other") }
        #expect(stale?.kind == .wrongRevision)
        #expect(try store.latest("p-0")?.value == Self.bytes("a2"))

        try store.delete("p-0", revision: updated, messageID: id(updated))
        #expect(try store.latest("p-0")?.operation == .delete)
        let marker = try #require(try connection.lastMessage(stream: "KV_guarded", subject: "$KV.guarded.p-0"))
        let recreated = try store.create("p-0", Self.bytes("c"), messageID: id)
        let stored = try #require(try connection.lastMessage(stream: "KV_guarded", subject: "$KV.guarded.p-0"))
        #expect(stored.sequence == recreated && stored.headers["Nats-Msg-Id"] == [id(marker.sequence)])
        #expect(try store.latest("p-0")?.value == Self.bytes("c"))
    }

    /// What a fresh TCP connection to `127.0.0.1:port` is told within `timeout` seconds (a NATS server starts
    /// with `INFO {…}` at once); empty when nothing came.
    static func greeting(port: UInt16, timeout: Double) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(connected == 0, "connect: \(String(cString: strerror(errno)))")
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&ready, 1, Int32(timeout * 1000)) > 0 else { return "" }
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = read(fd, &buffer, buffer.count)
        return count > 0 ? String(decoding: buffer.prefix(count), as: UTF8.self) : ""
    }

    @Test("the fault proxy forwards; cut, it accepts and answers nothing; healed, it forwards again")
    func faultProxy() throws {
        let cluster = try SharedNATSCluster.cluster()
        let proxy = try FaultProxy(targetPort: try #require(cluster.clientPort(server: 1)))
        defer { proxy.stop() }
        #expect(try Self.greeting(port: proxy.port, timeout: 5).hasPrefix("INFO {"))
        let connection = try NATSConnection(
            urls: "nats://\(proxy.address)", connectTimeout: .milliseconds(500), requestTimeout: .milliseconds(300),
            ignoreDiscoveredServers: true)
        try connection.publish(subject: "proxy.test", payload: [1])

        proxy.cut()
        // Nothing can be observed of a blackhole but silence: each look waits its whole time.
        #expect(try Self.greeting(port: proxy.port, timeout: 0.5) == "")
        #expect(Self.natsError { try connection.publish(subject: "proxy.test", payload: [2]) } != nil)

        proxy.heal()
        #expect(try Self.greeting(port: proxy.port, timeout: 5).hasPrefix("INFO {"))
        #expect(Wait.blocking(timeout: 10) { (try? connection.publish(subject: "proxy.test", payload: [3])) != nil })
    }

    // MARK: Lease managers

    /// One monotonic clock for every manager and the log: all run in this process, so times compare.
    static let origin = ContinuousClock.now
    static let clock: @Sendable () -> Double = {
        let (seconds, attoseconds) = (ContinuousClock.now - origin).components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    static let partitions = 12
    static let ttl = 2.0

    static func settings(_ name: String) throws -> LeaseSettings {
        try LeaseSettings(
            partitions: partitions, ttl: ttl, leaseBucket: "\(name)-leases", engineBucket: "\(name)-engines")
    }

    /// A started manager for `engine` with a connection of its own to `urls`, logging its events to `log`.
    static func manager(
        _ engine: String, settings: LeaseSettings, urls: String, log: OwnershipLog,
        ignoreDiscoveredServers: Bool = false
    ) throws -> PartitionLeases {
        let connection = try NATSConnection(
            urls: urls, name: engine, connectTimeout: .milliseconds(500), requestTimeout: .milliseconds(500),
            ignoreDiscoveredServers: ignoreDiscoveredServers)
        let leases = try PartitionLeases(
            engineID: engine, settings: settings, connection: connection, clock: clock
        ) { log.record(engine, $0) }
        try leases.start()
        return leases
    }

    /// Whether `managers` hold `counts` partitions each (in order), all different, every one valid now.
    static func holds(_ managers: [PartitionLeases], _ counts: [Int]) -> Bool {
        let now = clock()
        let held = managers.map { manager in manager.held().filter { $0.validUntil > now }.map(\.partition) }
        return held.map(\.count) == counts && Set(held.joined()).count == counts.reduce(0, +)
    }

    static func describe(_ managers: [PartitionLeases]) -> String {
        managers.map { "\($0.engineID): \($0.held().map(\.partition))" }.joined(separator: "; ")
    }

    static func seconds(_ value: Double) -> String { String(format: "%.2f s", value) }

    @Test("three engines share 12 partitions 4/4/4; one crashes and the others take its partitions after its deadline")
    func shareAndTakeOverFromCrash() throws {
        let cluster = try SharedNATSCluster.cluster()
        let settings = try Self.settings("crash")
        let log = OwnershipLog(clock: Self.clock)
        let started = Self.clock()
        let managers = try ["engine-a", "engine-b", "engine-c"].enumerated().map { index, engine in
            try Self.manager(engine, settings: settings, urls: cluster.serverURLs[index], log: log)
        }
        defer { for manager in managers { manager.stop() } }
        #expect(Wait.blocking(timeout: 10) { Self.holds(managers, [4, 4, 4]) }, "\(Self.describe(managers))")
        let shared = Self.clock() - started
        print(
            "NATS leases: 3 engines hold 4/4/4 of 12 partitions \(Self.seconds(shared)) after start (TTL \(Self.ttl) s)"
        )
        #expect(shared < 3, "4/4/4 after \(shared) s")

        // engine-c stops renewing and writes nothing more, as if its process died.
        let crashed = managers[2]
        let halted = Self.clock()
        crashed.halt()
        let orphans = crashed.held()
        #expect(orphans.count == 4)
        #expect(
            Wait.blocking(timeout: 10) { Self.holds(Array(managers.prefix(2)), [6, 6]) }, "\(Self.describe(managers))")
        var takeOvers: [Double] = []
        for lease in orphans {
            let taken = try #require(
                log.entries().first {
                    $0.engine != "engine-c" && $0.time > halted && $0.event.partition == lease.partition
                        && $0.event.isAcquired
                })
            // Never before the crashed owner's validity ended, nor before a TTL after its last renewal was sent.
            #expect(
                taken.time > lease.validUntil,
                "p-\(lease.partition) taken at \(taken.time), valid until \(lease.validUntil)")
            #expect(taken.time >= lease.renewedAt + Self.ttl)
            let lost = try #require(
                log.entries().first { $0.engine == "engine-c" && $0.event == .lost(partition: lease.partition) })
            #expect(lost.time < lease.validUntil, "lost told at \(lost.time), valid until \(lease.validUntil)")
            takeOvers.append(taken.time - lease.renewedAt)
        }
        let slowest = try #require(takeOvers.max())
        print(
            "NATS leases: crashed engine's 4 partitions taken \(Self.seconds(takeOvers.min() ?? 0))-\(Self.seconds(slowest)) after its last renewal was sent (TTL \(Self.ttl) s); at most \(Self.seconds(Self.clock() - halted)) after the crash"
        )
        // The bound Docs/cluster.md states: a TTL after the last renewal, then a claim round (a third of a TTL)
        // and its round trip, which a loaded machine stretches (3.01 s once in a clean CI run, TTL 2 s).
        #expect(slowest < Self.ttl * 1.5 + 0.5, "take-over \(slowest) s after the last renewal")
        #expect(log.overlaps().isEmpty, "\(log.overlaps())")
    }

    @Test("a late engine joins two: the partitions move from 6/6 to 4/4/4, never two valid owners")
    func lateJoinerRebalances() throws {
        let cluster = try SharedNATSCluster.cluster()
        let settings = try Self.settings("join")
        let log = OwnershipLog(clock: Self.clock)
        var managers = try ["engine-a", "engine-b"].map {
            try Self.manager($0, settings: settings, urls: cluster.urls, log: log)
        }
        defer { for manager in managers { manager.stop() } }
        #expect(Wait.blocking(timeout: 10) { Self.holds(managers, [6, 6]) }, "\(Self.describe(managers))")
        let joined = Self.clock()
        managers.append(try Self.manager("engine-c", settings: settings, urls: cluster.urls, log: log))
        #expect(Wait.blocking(timeout: 10) { Self.holds(managers, [4, 4, 4]) }, "\(Self.describe(managers))")
        let rebalanced = Self.clock() - joined
        let moved = log.entries().filter { $0.engine == "engine-c" && $0.event.isAcquired }.count
        print("NATS leases: a third engine joined; 4/4/4 \(Self.seconds(rebalanced)) later, \(moved) partitions moved")
        #expect(moved == 4)
        #expect(rebalanced < Self.ttl * 2, "rebalanced after \(rebalanced) s")
        #expect(log.overlaps().isEmpty, "\(log.overlaps())")
        // Each given-back partition was lost by its old owner before the new one acquired it.
        #expect(managers.allSatisfy { $0.statistics().usurped == 0 })
    }

    @Test(
        "a network cut between one engine and NATS: it reports lost for all its partitions before another acquires them"
    )
    func networkCut() throws {
        let cluster = try SharedNATSCluster.cluster()
        let settings = try Self.settings("cut")
        let log = OwnershipLog(clock: Self.clock)
        let port = try #require(cluster.clientPort(server: 3))
        let proxy = try FaultProxy(targetPort: port)
        defer { proxy.stop() }
        var managers = try ["engine-a", "engine-b"].enumerated().map { index, engine in
            try Self.manager(engine, settings: settings, urls: cluster.serverURLs[index], log: log)
        }
        managers.append(
            try Self.manager(
                "engine-c", settings: settings, urls: "nats://\(proxy.address)", log: log, ignoreDiscoveredServers: true
            ))
        defer {
            proxy.heal()
            for manager in managers { manager.stop() }
        }
        #expect(Wait.blocking(timeout: 10) { Self.holds(managers, [4, 4, 4]) }, "\(Self.describe(managers))")
        let cutOff = managers[2].held()

        let cut = Self.clock()
        proxy.cut()
        #expect(
            Wait.blocking(timeout: 10) { Self.holds(Array(managers.prefix(2)), [6, 6]) }, "\(Self.describe(managers))")
        #expect(managers[2].held().isEmpty)
        let entries = log.entries()
        var told: [Double] = []
        var taken: [Double] = []
        for lease in cutOff {
            let lost = try #require(
                entries.first { $0.engine == "engine-c" && $0.event == .lost(partition: lease.partition) })
            let acquired = try #require(
                entries.first { $0.engine != "engine-c" && $0.time > cut && $0.event.partition == lease.partition })
            #expect(acquired.event.isAcquired)
            #expect(lost.time < acquired.time, "p-\(lease.partition): lost at \(lost.time), taken at \(acquired.time)")
            #expect(lost.time < lease.validUntil)
            told.append(lost.time - cut)
            taken.append(acquired.time - cut)
        }
        print(
            "NATS leases: network cut; the cut engine told lost \(Self.seconds(told.min() ?? 0))-\(Self.seconds(told.max() ?? 0)) after the cut, the others acquired \(Self.seconds(taken.min() ?? 0))-\(Self.seconds(taken.max() ?? 0)) after it"
        )
        #expect(log.overlaps().isEmpty, "\(log.overlaps())")

        // Healed: the cut engine is back and gets its share again.
        let healed = Self.clock()
        proxy.heal()
        #expect(Wait.blocking(timeout: 15) { Self.holds(managers, [4, 4, 4]) }, "\(Self.describe(managers))")
        print("NATS leases: healed; 4/4/4 again \(Self.seconds(Self.clock() - healed)) later")
        #expect(log.overlaps().isEmpty, "\(log.overlaps())")
        #expect(managers.allSatisfy { $0.statistics().usurped == 0 })
    }

    @Test("killing the NATS server that leads the lease bucket keeps ownership single, and it recovers")
    func serverKill() throws {
        let cluster = try SharedNATSCluster.cluster()
        let settings = try Self.settings("kill")
        let log = OwnershipLog(clock: Self.clock)
        let managers = try ["engine-a", "engine-b", "engine-c"].map {
            try Self.manager($0, settings: settings, urls: cluster.urls, log: log)
        }
        defer { for manager in managers { manager.stop() } }
        #expect(Wait.blocking(timeout: 10) { Self.holds(managers, [4, 4, 4]) }, "\(Self.describe(managers))")
        let observer = try NATSConnection(urls: cluster.urls, name: "observer")
        let leader = try #require(try observer.streamInfo(name: "KV_\(settings.leaseBucket)")).leader
        let server = try #require(Int(leader.dropFirst()), "leader \(leader)")

        let killed = Self.clock()
        try cluster.kill(server: server)
        defer { try? cluster.restart(server: server) }
        // Wait until the leases were all renewed after the kill, 4/4/4.
        #expect(
            Wait.blocking(timeout: 20) {
                Self.holds(managers, [4, 4, 4])
                    && managers.allSatisfy { $0.held().allSatisfy { $0.renewedAt > killed } }
            }, "\(Self.describe(managers))")
        let recovered = Self.clock() - killed
        let lost = log.entries().filter { $0.time > killed && !$0.event.isAcquired }.count
        print(
            "NATS leases: killed \(leader) (the lease bucket's leader); 4/4/4 renewed again \(Self.seconds(recovered)) later, \(lost) leases lost meanwhile"
        )
        #expect(log.overlaps().isEmpty, "\(log.overlaps())")
        #expect(managers.allSatisfy { $0.statistics().usurped == 0 })
        try cluster.restart(server: server)
        #expect(Wait.blocking(timeout: 10) { Self.holds(managers, [4, 4, 4]) }, "\(Self.describe(managers))")
        #expect(log.overlaps().isEmpty, "\(log.overlaps())")
    }
}

/// Lets threads start a step together: each waits in `arriveAndWait` until all have arrived and the test
/// opens the gate.
final class StartGate: @unchecked Sendable {
    // @unchecked: every field is read and written under `condition`.
    private let condition = NSCondition()
    private let parties: Int
    private var arrived = 0
    private var open = false

    init(parties: Int) { self.parties = parties }

    func arriveAndWait() {
        condition.lock()
        arrived += 1
        condition.broadcast()
        while !open { condition.wait() }
        condition.unlock()
    }

    /// Blocks until every party has arrived, then lets them all go.
    func openWhenAllArrived() {
        condition.lock()
        while arrived < parties { condition.wait() }
        open = true
        condition.broadcast()
        condition.unlock()
    }
}

/// Every `acquired` and `lost` of a group of lease managers, with the time on the one clock they share, and
/// the check that no partition ever had two owners between their `acquired` and their `lost`.
final class OwnershipLog: Sendable {
    struct Entry: Sendable {
        let time: Double
        let engine: String
        let event: LeaseEvent
    }

    private let clock: @Sendable () -> Double
    private let log = Mutex<[Entry]>([])

    init(clock: @escaping @Sendable () -> Double) { self.clock = clock }

    func record(_ engine: String, _ event: LeaseEvent) {
        let time = clock()
        log.withLock { $0.append(Entry(time: time, engine: engine, event: event)) }
    }

    func entries() -> [Entry] { log.withLock { $0 } }

    /// Each time a partition was acquired while another engine (or the same) still held it.
    func overlaps() -> [String] {
        var holders: [Int: [String: Double]] = [:]
        var found: [String] = []
        for entry in entries().sorted(by: { $0.time < $1.time }) {
            let partition = entry.event.partition
            if entry.event.isAcquired {
                if let other = holders[partition, default: [:]].first {
                    found.append(
                        "p-\(partition): \(entry.engine) acquired at \(entry.time) while \(other.key) held it since \(other.value)"
                    )
                }
                holders[partition, default: [:]][entry.engine] = entry.time
            } else {
                holders[partition, default: [:]][entry.engine] = nil
            }
        }
        return found
    }
}

extension LeaseEvent {
    var partition: Int {
        switch self {
        case .acquired(let partition, _, _), .lost(let partition): partition
        }
    }

    var isAcquired: Bool { if case .acquired = self { true } else { false } }
}
