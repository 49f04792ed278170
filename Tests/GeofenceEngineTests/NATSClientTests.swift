import Foundation
import GeofenceEngine
import GeofenceTestSupport
import Synchronization
import Testing

/// The NATS wrapper against a real 3-server JetStream cluster on loopback (`Scripts/nats-cluster.sh`, through
/// `NATSCluster`): what issue 26's ownership and delivery will stand on. Compare-and-set on a key-value
/// revision, a lease that expires by the bucket's TTL, a publish fenced by the expected last subject sequence,
/// de-duplication by `Nats-Msg-Id`, and publishing through the loss of the stream's leader.
@Suite(
    "NATS client against a 3-server JetStream cluster", .serialized,
    .enabled(if: NATSCluster.isAvailable, "\(NATSCluster.unavailableReason)"))
struct NATSClientTests {
    /// Runs `body` with a fresh cluster in a fresh directory, stopped and removed afterwards.
    static func withCluster(_ body: (NATSCluster) throws -> Void) throws {
        try withTemporaryDirectory("geofence-nats") { directory in
            let cluster = try NATSCluster(directory: directory.path)
            defer { try? cluster.stop() }
            try body(cluster)
        }
    }

    static func pause(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) / 1e18)
    }

    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// The error `body` throws, which must be a `NATSError`.
    static func natsError(_ body: () throws -> Void) -> NATSError? {
        do {
            try body()
            return nil
        } catch {
            return error as? NATSError
        }
    }

    @Test("compare-and-set: of two writers with the same revision one wins, the other gets .wrongRevision")
    func compareAndSet() throws {
        try Self.withCluster { cluster in
            // Two engines, each connected to a server of its own.
            let a = try NATSConnection(urls: cluster.serverURLs[0], name: "writer-a")
            let b = try NATSConnection(urls: cluster.serverURLs[1], name: "writer-b")
            let leasesA = try a.ensureKeyValue(bucket: "leases", replicas: 3)
            let leasesB = try b.ensureKeyValue(bucket: "leases", replicas: 3)

            let created = try leasesA.create("partition-1", Self.bytes("a"))
            let exists = Self.natsError { try leasesB.create("partition-1", Self.bytes("b")) }
            #expect(exists?.kind == .keyExists)

            let seenByA = try #require(try leasesA.get("partition-1"))
            let seenByB = try #require(try leasesB.get("partition-1"))
            #expect(seenByA.revision == created && seenByB.revision == created)
            let renewed = try leasesA.update("partition-1", Self.bytes("a, renewed"), revision: seenByA.revision)
            let lost = Self.natsError { try leasesB.update("partition-1", Self.bytes("b"), revision: seenByB.revision) }
            #expect(lost?.kind == .wrongRevision)
            #expect(lost?.jetStreamCode == 10071)
            #expect(lost?.text.contains("wrong last sequence") == true, "\(String(describing: lost))")
            let now = try #require(try leasesB.get("partition-1"))
            #expect(now.value == Self.bytes("a, renewed") && now.revision == renewed && now.operation == .put)

            // A release with a stale revision is refused; with the right one the key is gone, and can be
            // created again over its delete marker.
            #expect(Self.natsError { try leasesB.delete("partition-1", revision: created) }?.kind == .wrongRevision)
            try leasesA.delete("partition-1", revision: renewed)
            #expect(try leasesB.get("partition-1") == nil)
            let taken = try leasesB.create("partition-1", Self.bytes("b"))
            #expect(taken > renewed)
            #expect(try leasesA.get("partition-1")?.value == Self.bytes("b"))

        }
    }

    /// Both writers at once, from the same revision, 20 rounds. With one replica JetStream checks the expected
    /// revision under the stream's lock: one winner each round. With three, nats-server before 2.9.21 checks it
    /// before the Raft proposal, not in it (nats-server#4320): both may win. Debian's 2.9.10 does; issue 26's
    /// leases cannot rest on a replicated bucket's compare-and-set there (Docs/cluster.md).
    @Test(
        "compare-and-set at once: one winner a round with one replica; with three see nats-server#4320",
        arguments: [1, 3])
    func compareAndSetAtOnce(replicas: Int) throws {
        try Self.withCluster { cluster in
            let a = try NATSConnection(urls: cluster.serverURLs[0], name: "writer-a")
            let b = try NATSConnection(urls: cluster.serverURLs[1], name: "writer-b")
            let leasesA = try a.ensureKeyValue(bucket: "leases", replicas: replicas)
            let leasesB = try b.ensureKeyValue(bucket: "leases", replicas: replicas)
            try leasesA.create("partition-1", Self.bytes("a"))
            var doubled = 0
            for round in 0..<20 {
                // The key's revision from the stream's leader: a bucket's get may be answered by a replica that has
                // not applied the last round yet (a loaded CI run read no key at all right after its create).
                let revision = try #require(
                    try a.lastMessage(stream: "KV_leases", subject: "$KV.leases.partition-1")
                ).sequence
                let outcomes = Mutex<[String]>([])
                let threads = [(leasesA, "a"), (leasesB, "b")].map { store, name in
                    Thread {
                        let outcome: String
                        do {
                            _ = try store.update("partition-1", Self.bytes("\(name)\(round)"), revision: revision)
                            outcome = "won"
                        } catch let error as NATSError {
                            outcome = error.kind == .wrongRevision ? "lost" : "\(error)"
                        } catch {
                            outcome = "\(error)"
                        }
                        outcomes.withLock { $0.append(outcome) }
                    }
                }
                for thread in threads { thread.start() }
                #expect(Wait.blocking(timeout: 20) { outcomes.withLock { $0.count } == 2 })
                let sorted = outcomes.withLock { $0.sorted() }
                #expect(sorted == ["lost", "won"] || sorted == ["won", "won"], "round \(round): \(sorted)")
                if sorted == ["won", "won"] { doubled += 1 }
            }
            print("NATS compare-and-set at once, replicas \(replicas): both won in \(doubled) of 20 rounds")
            if replicas == 1 {
                #expect(doubled == 0)
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

    @Test("a lease renewed stays; not renewed, it expires by the bucket's TTL, never before, and can be taken")
    func leaseExpiresByTTL() throws {
        try Self.withCluster { cluster in
            let connection = try NATSConnection(urls: cluster.urls)
            let ttl = Duration.seconds(2)
            let leases = try connection.ensureKeyValue(bucket: "leases-ttl", replicas: 3, ttl: ttl)
            let clock = ContinuousClock()
            var revision = try leases.create("partition-7", Self.bytes("engine-1"))
            var lastWrite = clock.now

            // Renewed every half TTL for twice the TTL: it is there at every look.
            let renewing = clock.now
            while clock.now - renewing < ttl * 2 {
                Self.pause(ttl / 4)  // a renewal interval: nothing to wait for
                #expect(try leases.get("partition-7")?.revision == revision)
                Self.pause(ttl / 4)
                lastWrite = clock.now
                revision = try leases.update("partition-7", Self.bytes("engine-1"), revision: revision)
            }

            // Not renewed: gone after the TTL (counted from before the last write was sent), and not before.
            let watcher = try leases.watch("partition-7")
            #expect(try watcher.next(timeout: .seconds(5)).map { if case .entry = $0 { true } else { false } } == true)
            #expect(try watcher.next(timeout: .seconds(5)) == .caughtUp)
            #expect(Wait.blocking(timeout: 10) { (try? leases.get("partition-7")) == nil })
            let gone = clock.now - lastWrite
            print("NATS lease with TTL \(ttl): gone \(gone) after the last renewal was sent")
            #expect(gone >= ttl, "expired \(gone) after the last renewal, TTL \(ttl)")
            #expect(gone < ttl + .seconds(3), "expired \(gone) after the last renewal, TTL \(ttl)")

            // Another engine takes it over with a create; the watcher sees that, and saw no marker for the
            // expiry (JetStream 2.9 removes the message by age and writes none).
            let other = try NATSConnection(urls: cluster.urls)
            let taken = try other.ensureKeyValue(bucket: "leases-ttl", replicas: 3).create(
                "partition-7", Self.bytes("engine-2"))
            let update = try #require(try watcher.next(timeout: .seconds(5)))
            guard case .entry(let entry) = update else {
                Issue.record("expected the take-over, got \(update)")
                return
            }
            #expect(entry.revision == taken && entry.value == Self.bytes("engine-2") && entry.operation == .put)
        }
    }

    @Test("a publish with a stale expected last subject sequence is refused and leaves the stream unchanged")
    func fencedPublish() throws {
        try Self.withCluster { cluster in
            let owner = try NATSConnection(urls: cluster.urls, name: "owner")
            let stale = try NATSConnection(urls: cluster.urls, name: "stale-owner")
            let stream = try owner.ensureStream(
                name: "EVENTS", subjects: ["geofence.event.>"], replicas: 3, duplicateWindow: .seconds(120))
            #expect(stream.replicas == 3 && stream.subjects == ["geofence.event.>"])
            #expect(stream.duplicateWindow == .seconds(120))

            let subject = "geofence.event.3"
            let first = try owner.jetStreamPublish(
                subject: subject, payload: Self.bytes("first"), expectedLastSubjectSequence: 0)
            // The stale owner read the subject's sequence before the new owner published again.
            let second = try owner.jetStreamPublish(
                subject: subject, payload: Self.bytes("second"), expectedLastSubjectSequence: first.sequence)
            #expect(second.sequence > first.sequence && !second.duplicate)
            let before = try #require(try owner.streamInfo(name: "EVENTS"))

            let fenced = Self.natsError {
                _ = try stale.jetStreamPublish(
                    subject: subject, payload: Self.bytes("stale"), expectedLastSubjectSequence: first.sequence)
            }
            #expect(fenced?.kind == .wrongLastSequence)
            #expect(fenced?.jetStreamCode == 10071)
            #expect(fenced?.text.isEmpty == false)
            let noneYet = Self.natsError {
                _ = try stale.jetStreamPublish(
                    subject: subject, payload: Self.bytes("stale"), expectedLastSubjectSequence: 0)
            }
            #expect(noneYet?.kind == .wrongLastSequence)

            let after = try #require(try owner.streamInfo(name: "EVENTS"))
            #expect(after.messages == before.messages && after.lastSequence == before.lastSequence)
            let last = try #require(try stale.lastMessage(stream: "EVENTS", subject: subject))
            #expect(last.sequence == second.sequence && last.payload == Self.bytes("second"))

            // Headers go through a core publish and are stored with the message.
            try owner.publish(
                subject: "geofence.event.4", payload: Self.bytes("with headers"),
                headers: [("Geofence-Vehicle", "van-1"), ("Geofence-Fix", "a"), ("Geofence-Fix", "b")])
            let stored = try #require(
                try Wait.blocking(timeout: 5) {
                    (try? owner.lastMessage(stream: "EVENTS", subject: "geofence.event.4")) != nil
                }
                    ? owner.lastMessage(stream: "EVENTS", subject: "geofence.event.4") : nil)
            #expect(stored.headers["Geofence-Vehicle"] == ["van-1"] && stored.headers["Geofence-Fix"] == ["a", "b"])
            #expect(stored.payload == Self.bytes("with headers"))
        }
    }

    @Test("a Nats-Msg-Id seen within the duplicate window is acknowledged as a duplicate and not stored")
    func deduplication() throws {
        try Self.withCluster { cluster in
            let connection = try NATSConnection(urls: cluster.urls)
            let window = Duration.seconds(1)
            _ = try connection.ensureStream(
                name: "DEDUP", subjects: ["dedup.>"], replicas: 3, duplicateWindow: window)
            let clock = ContinuousClock()
            let sent = clock.now
            let first = try connection.jetStreamPublish(
                subject: "dedup.a", payload: Self.bytes("1"), messageID: "van-1/depot/enter/42")
            let again = try connection.jetStreamPublish(
                subject: "dedup.a", payload: Self.bytes("1 again"), messageID: "van-1/depot/enter/42")
            #expect(!first.duplicate && again.duplicate && again.sequence == first.sequence)
            let other = try connection.jetStreamPublish(
                subject: "dedup.a", payload: Self.bytes("2"), messageID: "van-1/depot/exit/43")
            #expect(!other.duplicate && other.sequence == first.sequence + 1)
            #expect(try connection.streamInfo(name: "DEDUP")?.messages == 2)

            // Past the window the same id is new again: each try before that is a duplicate that stores
            // nothing, so trying is how the end of the window is observed.
            var stored: NATSConnection.PublishAck?
            _ = try Wait.blocking(timeout: 10, every: .milliseconds(100)) {
                let ack = try connection.jetStreamPublish(
                    subject: "dedup.a", payload: Self.bytes("1 later"), messageID: "van-1/depot/enter/42")
                if !ack.duplicate { stored = ack }
                return !ack.duplicate
            }
            let elapsed = clock.now - sent
            print("NATS de-duplication window \(window): the id was new again \(elapsed) after it was first sent")
            #expect(stored != nil)
            #expect(elapsed >= window, "the id was forgotten \(elapsed) after it was sent, window \(window)")
            #expect(try connection.streamInfo(name: "DEDUP")?.messages == 3)
        }
    }

    @Test("with replicas 3, publishing goes on after the stream leader's server is killed, nothing doubled")
    func survivesServerKill() throws {
        try Self.withCluster { cluster in
            let connection = try NATSConnection(urls: cluster.urls, requestTimeout: .seconds(2))
            _ = try connection.ensureStream(
                // What the servers map geofence.fix.VEHICLE to (Packaging/nats/nats-server.conf.in).
                name: "FIXES", subjects: ["geofence.fixp.*.*"], replicas: 3, duplicateWindow: .seconds(120))
            var acknowledged: [UInt64] = []
            func publish(_ n: Int) throws {
                let ack = try connection.jetStreamPublish(
                    subject: "geofence.fix.van-\(n % 7)", payload: Self.bytes("fix \(n)"), messageID: "fix-\(n)")
                acknowledged.append(ack.sequence)
            }
            for n in 0..<50 { try publish(n) }
            let leader = try #require(try connection.streamInfo(name: "FIXES")).leader
            let server = try #require(Int(leader.dropFirst()), "leader \(leader)")
            try cluster.kill(server: server)

            // Each fix is published again (same id) until acknowledged, as an engine would.
            let clock = ContinuousClock()
            let killed = clock.now
            var failures: [NATSError.Kind] = []
            var firstAfterKill: Duration?
            for n in 50..<100 {
                let done = try Wait.blocking(timeout: 30, every: .milliseconds(50)) {
                    do {
                        try publish(n)
                        return true
                    } catch let error as NATSError {
                        failures.append(error.kind)
                        return false
                    }
                }
                #expect(done, "fix \(n) not acknowledged within 30 s; failures \(failures)")
                if firstAfterKill == nil { firstAfterKill = clock.now - killed }
            }
            let info = try #require(try connection.streamInfo(name: "FIXES"))
            #expect(info.messages == 100 && Set(acknowledged).count == 100)
            #expect(info.replicas == 3 && !info.leader.isEmpty && info.leader != leader)
            print(
                "NATS fail-over: first publish acknowledged \(firstAfterKill ?? .zero) after killing \(leader); \(failures.count) failed tries, \(Set(failures.map { "\($0)" }).sorted())"
            )

            // The killed server comes back and the stream takes it as a replica again.
            try cluster.restart(server: server)
            try publish(100)
            #expect(try connection.streamInfo(name: "FIXES")?.messages == 101)
        }
    }
}
