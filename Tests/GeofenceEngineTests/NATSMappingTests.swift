import Foundation
import GeofenceClusterSupport
import GeofenceCore
import GeofenceEngine
import GeofenceTestSupport
import Testing

/// The servers' subject mapping (`Packaging/nats/nats-server.conf.in`, P from `Scripts/nats-cluster.sh up`):
/// a fix published to `geofence.fix.VEHICLE` is stored by `GEOFENCE_FIXES` as `geofence.fixp.N.VEHICLE`, N
/// the same for a vehicle every time, every partition in use, and N what `NATSPartition.of` computes. Also
/// the fleet publisher (pipelined, acknowledged) and reading a stream back in order, which the mapping is
/// observed through.
@Suite(
    "NATS subject mapping over partitions", .serialized,
    .enabled(if: NATSCluster.isAvailable, "\(NATSCluster.unavailableReason)"))
struct NATSMappingTests {
    /// Publishes two rounds of `vehicles` vehicles into a fresh cluster mapping over `partitions`, reads the
    /// fix stream back; each vehicle's partitions seen, and the stream's subjects in order.
    static func publishAndRead(vehicles: Int, partitions: Int) throws -> [String: [Int]] {
        try withTemporaryDirectory("geofence-nats-mapping") { directory in
            let cluster = try NATSCluster(directory: directory.path, partitions: partitions)
            defer { try? cluster.stop() }
            var configuration = ClusterFleet.Configuration(
                vehicles: vehicles, rounds: 2, start: Date().addingTimeInterval(-60))
            configuration.circles = 3
            configuration.polygons = 1
            let fleet = ClusterFleet(configuration)
            let publisher = try FleetPublisher(urls: cluster.urls)
            try publisher.ensureFixStream()
            let statistics = try publisher.publish(fleet.fixes, pacing: .asFastAsPossible)
            #expect(statistics.stored == fleet.fixCount && statistics.duplicates == 0, "\(statistics)")

            var seen: [String: [Int]] = [:]
            var previous: UInt64 = 0
            let read = try publisher.connection.readStream(FleetPublisher.fixStream) { message in
                #expect(message.sequence == previous + 1)
                previous = message.sequence
                let tokens = message.subject.split(separator: ".", omittingEmptySubsequences: false)
                guard tokens.count == 4, tokens[0] == "geofence", tokens[1] == "fixp", let n = Int(tokens[2]) else {
                    Issue.record("unexpected subject \(message.subject)")
                    return
                }
                let vehicle = String(tokens[3])
                #expect((try? JSON.parse(message.payload))?["device"]?.stringValue == vehicle)
                seen[vehicle, default: []].append(n)
            }
            #expect(read == fleet.fixCount)
            return seen
        }
    }

    @Test("1000 vehicles over 12 partitions: each always on one, FNV-1a of its name, all 12 used")
    func twelvePartitions() throws {
        let seen = try Self.publishAndRead(vehicles: 1000, partitions: 12)
        #expect(seen.count == 1000)
        var perPartition = [Int](repeating: 0, count: 12)
        for (vehicle, partitions) in seen {
            #expect(partitions.count == 2 && Set(partitions).count == 1, "\(vehicle): \(partitions)")
            guard let n = partitions.first, (0..<12).contains(n) else {
                Issue.record("\(vehicle): partition \(partitions) out of range")
                continue
            }
            #expect(n == NATSPartition.of(vehicle, partitions: 12), "\(vehicle)")
            perPartition[n] += 1
        }
        #expect(perPartition.allSatisfy { $0 > 0 }, "\(perPartition)")
        print("NATS mapping: 1000 vehicles over 12 partitions: \(perPartition)")
    }

    @Test("GEOFENCE_PARTITIONS sets the count: 200 vehicles over 5")
    func fivePartitions() throws {
        let seen = try Self.publishAndRead(vehicles: 200, partitions: 5)
        let partitions = Set(seen.values.flatMap { $0 })
        #expect(partitions == Set(0..<5), "\(partitions)")
        for (vehicle, list) in seen {
            #expect(list.allSatisfy { $0 == NATSPartition.of(vehicle, partitions: 5) }, "\(vehicle): \(list)")
        }
    }
}

/// The fleet publisher through the loss of the fix stream's leader: every fix stored once, each vehicle's in
/// time order (a failed publish is sent again before the vehicle's next fix).
@Suite(
    "fleet publisher through a server's loss", .serialized,
    .enabled(if: NATSCluster.isAvailable, "\(NATSCluster.unavailableReason)"))
struct FleetPublisherFaultTests {
    @Test("SIGKILL of the fix stream's leader mid-run: every fix stored once, each vehicle's in order")
    func leaderKilled() throws {
        try withTemporaryDirectory("geofence-nats-publisher") { directory in
            let cluster = try NATSCluster(directory: directory.path)
            defer { try? cluster.stop() }
            var configuration = ClusterFleet.Configuration(
                vehicles: 300, rounds: 20, start: Date().addingTimeInterval(-300))
            configuration.circles = 5
            configuration.polygons = 0
            let fleet = ClusterFleet(configuration)
            // The publisher connected to the leader's server, which is killed after a few batches: its
            // publishes in flight are lost with it, and it reconnects to another server (the cluster announced
            // them).
            let leaderName = try FleetPublisher(urls: cluster.urls).ensureFixStream().leader
            let leader = try #require(Int(leaderName.dropFirst()))
            // A reader connected before the kill to the server killed: it reads after reconnecting to another
            // (which the cluster announced to it).
            let reader = try NATSConnection(urls: cluster.serverURLs[leader - 1])
            let publisher = try FleetPublisher(urls: cluster.serverURLs[leader - 1], maxPending: 300)
            var batches = 0
            var killed: Date?
            let statistics = try publisher.publish(
                fleet.fixes, pacing: .asFastAsPossible,
                stop: {
                    batches += 1
                    if batches == 5 {
                        try? cluster.kill(server: leader)
                        killed = Date()
                    }
                    return false
                })
            print("NATS fleet publisher, leader n\(leader) killed after 4 batches: \(statistics)")
            #expect(killed != nil)
            #expect(statistics.resends > 0, "the kill cost nothing: \(statistics)")
            #expect(statistics.stored + statistics.duplicates == fleet.fixCount, "\(statistics)")

            var last: [String: String] = [:]
            var ids = Set<String>()
            // Eight tries of the reader's consumer, not the default four: its subscription goes through the server
            // killed, and on a loaded machine the reconnect and the stream's new leader took longer than four
            // tries of 5 s once in CI (`read stream GEOFENCE_FIXES: Timeout`, with all 6000 stored).
            try reader.readStream(FleetPublisher.fixStream, attempts: 8) { message in
                guard let fix = try? JSON.parse(message.payload), let vehicle = fix["device"]?.stringValue,
                    let time = fix["time"]?.stringValue
                else {
                    Issue.record("not a fix: \(message.subject)")
                    return
                }
                #expect(ids.insert("\(vehicle) \(time)").inserted, "\(vehicle) \(time) stored twice")
                if let previous = last[vehicle] { #expect(previous < time, "\(vehicle): \(time) after \(previous)") }
                last[vehicle] = time
            }
            #expect(ids.count == fleet.fixCount)
            try cluster.restart(server: leader)
        }
    }
}
