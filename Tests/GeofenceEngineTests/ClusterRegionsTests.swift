import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore
import GeofenceTestSupport
import Synchronization
import Testing

/// The cluster's regions as an engine sees them (`ClusterRegions`), against a real 3-server JetStream cluster:
/// the whole bucket at start, then every change within a second, the same seqs on every engine, and entries
/// that are not regions skipped with a log line.
@Suite(
    "Cluster regions: load and follow the bucket", .serialized,
    .enabled(if: NATSCluster.isAvailable, "\(NATSCluster.unavailableReason)"))
struct ClusterRegionsTests {
    /// What a follower was given, recorded on its thread.
    final class Recorded: Sendable {
        let batches = Mutex<[ClusterRegions.Batch]>([])
        let logged = Mutex<[String]>([])
        let arrivals = Mutex<[(ClusterRegionChange, ContinuousClock.Instant)]>([])
    }

    /// One follower's view: every batch applied, and the log lines.
    final class Follower: Sendable {
        let recorded = Recorded()
        let regions: ClusterRegions

        init(urls: String) throws {
            let connection = try NATSConnection(urls: urls, name: "follower")
            let recorded = self.recorded
            regions = ClusterRegions(
                connection: connection, log: { line in recorded.logged.withLock { $0.append(line) } },
                apply: { batch in
                    let now = ContinuousClock.now
                    recorded.batches.withLock { $0.append(batch) }
                    recorded.arrivals.withLock { $0 += batch.changes.map { ($0, now) } }
                })
            try regions.start()
        }

        /// When `change` arrived (a put by its id and seq: the region is read back with the entry's time as
        /// its creation), waiting up to `timeout` for it.
        func arrival(of change: ClusterRegionChange, timeout: Duration = .seconds(5)) -> ContinuousClock.Instant? {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                if let found = recorded.arrivals.withLock({ $0.first { Self.same($0.0, change) }?.1 }) { return found }
                Thread.sleep(forTimeInterval: 0.005)
            }
            return nil
        }

        static func same(_ a: ClusterRegionChange, _ b: ClusterRegionChange) -> Bool {
            switch (a, b) {
            case (.put(let x, let i), .put(let y, let j)):
                i == j && x.id == y.id && x.radius == y.radius && x.center == y.center
            case (.remove(let x), .remove(let y)): x == y
            default: false
            }
        }

        var changes: [ClusterRegionChange] { recorded.batches.withLock { $0.flatMap(\.changes) } }

        /// The regions (id and seq) after every change applied so far.
        var state: [String: Int64] {
            var regions: [String: Int64] = [:]
            for change in changes {
                switch change {
                case .put(let region, let seq): regions[region.id] = seq
                case .remove(let id): regions[id] = nil
                }
            }
            return regions
        }

        /// Waits until the regions are exactly `ids`.
        func waitForIDs(_ ids: Set<String>, timeout: Duration = .seconds(5)) -> Bool {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                if Set(state.keys) == ids { return true }
                Thread.sleep(forTimeInterval: 0.005)
            }
            return false
        }

    }

    static func region(_ id: String, radius: Double = 100) throws -> Region {
        try Region(id: id, center: Coordinate(latitude: 51.5, longitude: -0.12), radius: radius)
    }

    @Test("the codec keeps plain ids readable, escapes the rest reversibly, and refuses other keys")
    func keyEncoding() {
        #expect(ClusterRegionCodec.key(for: "depot") == "depot")
        #expect(ClusterRegionCodec.key(for: "customer-42_b") == "customer-42_b")
        #expect(ClusterRegionCodec.key(for: "site.1/a=b") == "site=2E1=2Fa=3Db")
        #expect(ClusterRegionCodec.key(for: "café") == "caf=C3=A9")
        for id in ["depot", "a.b", "..", "x y", "café", "€/=", "=41", "日本", "-"] {
            let key = ClusterRegionCodec.key(for: id)
            #expect(
                key.utf8.allSatisfy {
                    $0 == 61 || $0 == 45 || $0 == 95 || (48...57).contains($0) || (65...90).contains($0)
                        || (97...122).contains($0)
                })
            #expect(ClusterRegionCodec.id(forKey: key) == id)
        }
        // Not a key the codec makes: a dot, lower-case hex, an escaped plain byte, a cut escape, bad UTF-8.
        for key in ["a.b", "caf=c3=a9", "=41", "abc=4", "=FF", ""] {
            #expect(ClusterRegionCodec.id(forKey: key) == nil, "\(key)")
        }
    }

    @Test(
        "two followers load the bucket, skip garbage, and see adds, replaces and removes within 1 s with equal seqs"
    )
    func loadAndFollow() throws {
        try withTemporaryDirectory("geofence-cluster-regions") { directory in
            let cluster = try NATSCluster(directory: directory.path)
            defer { try? cluster.stop() }
            let writer = try ClusterRegionStore(connection: try NATSConnection(urls: cluster.serverURLs[0]))
            #expect(try writer.connection.streamInfo(name: ClusterRegionCodec.stream)?.replicas == 3)
            try writer.importAll(try (0..<50).map { try Self.region("r\($0)") }, replace: false, requestID: "first")
            try writer.remove(ids: ["r7"], requestID: nil)
            // Garbage someone wrote: not JSON, a region under another id's key, a key no id encodes to, and
            // garbage over a region (which removes it).
            try writer.bucket.put("junk", Array("not json".utf8))
            try writer.bucket.put("r8", Array(#"{"id":"r9","lat":1,"lon":2,"radius":3}"#.utf8))
            try writer.bucket.put("bad=zz", ClusterRegionCodec.value(try Self.region("x")))
            try writer.bucket.put("r10", Array(#"{"id":"r10","lat":95,"lon":2,"radius":3}"#.utf8))
            // A re-run's barrier (a delete marker under a key no id makes), skipped without a log line.
            _ = try writer.add(try Self.region("r3"), replace: false, requestID: "first")
            #expect(try writer.scan(values: false)[ClusterRegionCodec.barrierKey]?.live == false)

            let a = try Follower(urls: cluster.serverURLs[1])
            let b = try Follower(urls: cluster.serverURLs[2])
            defer {
                a.regions.stop()
                b.regions.stop()
            }
            #expect(a.regions.waitUntilLoaded(timeout: .seconds(10)))
            #expect(b.regions.waitUntilLoaded(timeout: .seconds(10)))
            let initial = try #require(a.recorded.batches.withLock { $0.first })
            #expect(initial.initial)
            let seqs = initial.changes.compactMap { if case .put(_, let seq) = $0 { seq } else { nil } }
            #expect(seqs == seqs.sorted(), "in revision order")
            // The first batch is the bucket as the server the consumer runs on holds it: a write the quorum
            // acknowledged that this server has not applied yet follows as a change, milliseconds later.
            let expected = Set((0..<50).map { "r\($0)" }).subtracting(["r7", "r8", "r10"])
            for follower in [a, b] { #expect(follower.waitForIDs(expected), "\(follower.state.keys.sorted())") }
            #expect(a.state == b.state, "the same regions with the same seqs")
            for follower in [a, b] {
                let lines = follower.recorded.logged.withLock { $0 }
                #expect(lines.count >= 4, "\(lines)")
                #expect(lines.contains { $0.contains("junk") && $0.contains("not JSON") })
                #expect(lines.contains { $0.contains("r8") && $0.contains("\"r9\"") })
                #expect(lines.contains { $0.contains("bad=zz") && $0.contains("not an encoded region id") })
                #expect(lines.contains { $0.contains("r10") && $0.contains("lat: 95 is out of range") })
                #expect(!lines.contains { $0.contains(ClusterRegionCodec.barrierKey) }, "\(lines)")
            }

            // An add reaches both within a second.
            let sent = ContinuousClock.now
            let added = try writer.add(try Self.region("new"), replace: false, requestID: "first")
            let put = ClusterRegionChange.put(added.region, seq: added.seq)
            let latencies = [a, b].map { $0.arrival(of: put).map { $0 - sent } }
            print("NATS cluster regions: add seen by the followers after \(latencies)")
            for latency in latencies { #expect(latency.map { $0 < .seconds(1) } == true, "\(latencies)") }

            // A replace: same id, a later seq. A remove. Garbage over a region removes it, with a log line.
            let replaced = try writer.add(try Self.region("new", radius: 300), replace: true, requestID: nil)
            #expect(replaced.seq > added.seq)
            let replacement = ClusterRegionChange.put(replaced.region, seq: replaced.seq)
            try writer.remove(ids: ["r1"], requestID: nil)
            try writer.bucket.put("r2", Array("{".utf8))
            for follower in [a, b] {
                #expect(follower.arrival(of: replacement) != nil)
                #expect(follower.arrival(of: .remove("r1")) != nil)
                #expect(follower.arrival(of: .remove("r2")) != nil)
                #expect(follower.recorded.logged.withLock { $0.contains { $0.contains("r2 at revision") } })
            }
            #expect(a.state == b.state, "the same regions with the same seqs on both")
            #expect(a.state["new"] == replaced.seq && a.state["r1"] == nil && a.state["r2"] == nil)
            #expect(a.recorded.batches.withLock { $0.dropFirst().allSatisfy { !$0.initial } })
        }
    }

    @Test("an empty bucket loads at once, and the first region added arrives")
    func emptyBucket() throws {
        try withTemporaryDirectory("geofence-cluster-regions") { directory in
            let cluster = try NATSCluster(directory: directory.path)
            defer { try? cluster.stop() }
            let follower = try Follower(urls: cluster.urls)
            defer { follower.regions.stop() }
            #expect(follower.regions.waitUntilLoaded(timeout: .seconds(5)))
            let first = follower.recorded.batches.withLock { $0.first }
            #expect(first?.initial == true && first?.changes.isEmpty == true)
            let writer = try ClusterRegionStore(connection: try NATSConnection(urls: cluster.urls))
            let added = try writer.add(try Self.region("first"), replace: false, requestID: "first")
            #expect(follower.arrival(of: .put(added.region, seq: added.seq)) != nil)
        }
    }
}
