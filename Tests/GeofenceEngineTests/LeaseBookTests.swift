import Foundation
import GeofenceEngine
import Testing

/// The rules of partition ownership with the times given (no NATS, no clock): shares, when an owner's
/// validity ends and it is told, when another engine may take a lease over, and the settings' bounds.
@Suite("Lease book: shares, deadlines and take-over times")
struct LeaseBookTests {
    @Test("the live engines share the partitions evenly, the first in id order one more")
    func shares() {
        let three = ["engine-c", "engine-a", "engine-b"]
        #expect(three.map { LeaseSettings.target(for: $0, live: three, partitions: 12) } == [4, 4, 4])
        let five = ["e1", "e2", "e3", "e4", "e5"]
        #expect(five.map { LeaseSettings.target(for: $0, live: five, partitions: 12) } == [3, 3, 2, 2, 2])
        // An engine not yet in the list counts itself.
        #expect(LeaseSettings.target(for: "e0", live: ["e1"], partitions: 3) == 2)
        #expect(LeaseSettings.target(for: "e9", live: ["e1", "e2", "e3"], partitions: 2) == 0)
    }

    @Test("settings out of bounds and a bad engine id are refused with one clear line")
    func badSettings() throws {
        for (partitions, ttl) in [(0, 6.0), (100_001, 6.0), (12, 0.1), (12, .nan), (12, .infinity), (12, 4000)] {
            #expect(throws: NATSError.self) { try LeaseSettings(partitions: partitions, ttl: ttl) }
        }
        #expect(
            throws: NATSError(
                kind: .invalidArgument, operation: "lease settings", text: "lease TTL nan s: not 0.5 to 3600 s")
        ) { try LeaseSettings(partitions: 12, ttl: .nan) }
        #expect(throws: NATSError.self) { try PartitionLeases.validate(engineID: "engine a") }
        #expect(throws: NATSError.self) { try PartitionLeases.validate(engineID: "") }
        try PartitionLeases.validate(engineID: "engine-a.host_1")
        #expect(LeaseSettings.messageID(3, after: 41) == "lease-p-3-after-41")
    }

    @Test("a lease record round-trips as JSON; one that cannot be read is an unknown owner's")
    func records() {
        let record = LeaseRecord(owner: "engine-a", term: 42, renewal: 7)
        #expect(String(decoding: record.bytes, as: UTF8.self) == #"{"owner":"engine-a","renewal":7,"term":42}"#)
        #expect(LeaseRecord(bytes: record.bytes) == record)
        #expect(LeaseRecord(bytes: Array("not json".utf8)) == LeaseRecord(owner: "", term: 0, renewal: 0))
    }

    /// A book of one engine that has seen the buckets, started at 0.
    static func book(_ engine: String = "engine-a", ttl: Double = 6) throws -> LeaseBook {
        var book = LeaseBook(settings: try LeaseSettings(partitions: 2, ttl: ttl), engineID: engine, now: 0)
        book.markLeasesCaughtUp(now: 0)
        book.markEnginesCaughtUp()
        return book
    }

    static func claims(_ actions: [LeaseBook.Action]) -> [Int: UInt64] {
        var claims: [Int: UInt64] = [:]
        for case .claim(let partition, let from, _) in actions { claims[partition] = from }
        return claims
    }

    @Test("an owner whose renewals get no answer is told lost before its validity ends, and is not valid after")
    func ownerDeadline() throws {
        var book = try Self.book()
        // Claims wait one heartbeat interval (2 s) after start; then both partitions are free.
        #expect(Self.claims(book.plan(now: 1.9)).isEmpty)
        #expect(Self.claims(book.plan(now: 2)) == [0: 0, 1: 0])
        let record = LeaseRecord(owner: "engine-a", term: 1, renewal: 0)
        book.claimed(0, record: record, revision: 5, sentAt: 2, now: 2.01)
        #expect(book.events == [.acquired(partition: 0, term: 1, leaseRevision: 5)])
        book.events.removeAll()
        // Valid until the send time + ttl - margin = 2 + 6 - 1 = 7; told lost margin / 2 before.
        #expect(book.isValid(0, at: 6.99) && !book.isValid(0, at: 7))
        #expect(book.expire(now: 6.4) == 6.5)
        #expect(book.events.isEmpty)
        book.renewalUncertain(0, now: 4, error: "timeout")
        _ = book.expire(now: 6.5)
        #expect(book.events == [.lost(partition: 0)])
        #expect(!book.isValid(0, at: 6.5))
        // A renewal stored after that brings nothing back.
        book.renewed(0, record: LeaseRecord(owner: "engine-a", term: 1, renewal: 1), revision: 9, sentAt: 6, now: 6.6)
        #expect(!book.isValid(0, at: 6.7))
    }

    @Test("another engine's lease is taken over only a TTL after its last revision was seen here")
    func takeOverAfterTTL() throws {
        var book = try Self.book(ttl: 6)
        let other = LeaseRecord(owner: "engine-b", term: 1, renewal: 0)
        book.observeLease(key: "p-0", revision: 3, record: other, now: 1)
        book.observeLease(key: "p-1", revision: 4, record: other, now: 1)
        book.observeEngine("engine-b", revision: 1, alive: true, now: 1)
        // engine-b's heartbeat is seen again at 3.5; its leases are not renewed.
        book.observeEngine("engine-b", revision: 2, alive: true, now: 3.5)
        #expect(Self.claims(book.plan(now: 6.99)).isEmpty)
        // Seen 6 s ago: expired. engine-a is below its share (1 of 2): it takes one.
        #expect(Self.claims(book.plan(now: 7)) == [0: 3])
        // engine-b's heartbeat is older than the TTL at 9.5: engine-a alone, its share is both.
        book.claimRefused(0, from: 3, now: 7.1)
        #expect(Self.claims(book.plan(now: 9.5)) == [1: 4])
        // A renewal seen meanwhile starts the count again.
        book.observeLease(key: "p-1", revision: 8, record: other, now: 9.6)
        #expect(Self.claims(book.plan(now: 15.5)).isEmpty)
        #expect(Self.claims(book.plan(now: 15.7)) == [1: 8])
    }
}
