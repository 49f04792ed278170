import Foundation
import GeofenceTestSupport
import Testing

/// An engine of a cluster started before JetStream can answer (a new cluster electing its leaders, engines
/// starting together, a quorum lost for a moment) waits for it and joins: it does not exit and leave its
/// partitions to the others (a clean CI run saw one of three engines started together exit 69 this way).
@Suite(
    "Cluster engine start", .serialized,
    .enabled(if: NATSCluster.isAvailable, "\(NATSCluster.unavailableReason)"))
struct ClusterStartTests {
    @Test("an engine started while the cluster has no quorum waits, then joins and takes the partitions")
    func startsBeforeQuorum() async throws {
        try await withCLI { cli in
            let cluster = try NATSCluster(directory: cli.dir.path, partitions: 4)
            defer { try? cluster.stop() }
            // Two of three servers down: a stream can be neither made nor read.
            try cluster.kill(server: 2)
            try cluster.kill(server: 3)
            let engine = try cli.daemon(
                ["--source", cluster.urls, "--partitions", "4", "--engine-id", "early", "--lease-ttl", "3"])
            #expect(await engine.waitForLog("trying again", timeout: 30), "\(engine.log)")
            try await Task.sleep(for: .seconds(2))
            #expect(engine.isRunning, "\(engine.log)")
            #expect(!engine.log.contains("joined the cluster"), "\(engine.log)")

            try cluster.restart(server: 2)
            try cluster.restart(server: 3)
            #expect(await engine.waitForLog("joined the cluster", timeout: 60), "\(engine.log)")
            for partition in 0..<4 {
                #expect(await engine.waitForLog("partition \(partition): taken", timeout: 30), "\(engine.log)")
            }
            #expect(await engine.stop(timeout: 20) != nil)
        }
    }
}
