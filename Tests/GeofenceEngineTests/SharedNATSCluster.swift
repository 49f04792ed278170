import Foundation
import GeofenceTestSupport
import Testing

/// One 3-server NATS cluster for every test of a suite (starting one takes about 3 s): a suite trait that
/// starts it before the suite's first test and stops it after its last. Each test reads it from
/// `SharedNATSCluster.current` and keeps to buckets and streams of its own names.
struct SharedNATSCluster: SuiteTrait, TestScoping {
    @TaskLocal static var current: NATSCluster?

    /// The suite's cluster; a test outside such a suite fails here.
    static func cluster() throws -> NATSCluster {
        try #require(current, "the suite has no .sharedNATSCluster trait")
    }

    var isRecursive: Bool { false }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // Without nats-server the suite is disabled (its .enabled trait); start nothing then.
        guard NATSCluster.isAvailable else { return try await function() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "geofence-nats-shared-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let cluster = try NATSCluster(directory: directory.path)
        defer { try? cluster.stop() }
        try await Self.$current.withValue(cluster) { try await function() }
    }
}

extension Trait where Self == SharedNATSCluster {
    /// One 3-server NATS cluster shared by the suite's tests (`SharedNATSCluster.current`).
    static var sharedNATSCluster: Self { SharedNATSCluster() }
}
