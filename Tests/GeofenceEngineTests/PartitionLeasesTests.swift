import Foundation
import GeofenceEngine
import GeofenceTestSupport
import Synchronization
import Testing

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
        let revision = try #require(try writers[0].get(key)).revision
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
                    let stored = try #require(try stores[0].get("p-0"))
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
