import Foundation

/// The names and settings of everything a cluster of engines keeps in JetStream (Docs/cluster.md, "Streams
/// and buckets"): one place, so that the engine, the CLI and the tests agree. The engine creates what is
/// missing with these settings and leaves what exists as it is.
package struct ClusterLayout: Sendable, Equatable {
    /// The first token of every subject (`geofence`).
    package var prefix: String = "geofence"
    /// Partitions of the fleet: the server's subject mapping spreads vehicles over this many.
    package var partitions: Int
    /// Replicas of every stream and bucket (3 in a 3-server cluster; 1 for a single server).
    package var replicas: Int = 3
    /// How long the fix stream keeps fixes: a checkpoint older than this cannot be replayed from.
    package var fixRetention: Duration = .seconds(7 * 86_400)
    /// How long the event stream remembers an event's id to drop a replay's copy of it. Longer than the
    /// checkpoint interval plus a take-over, by far.
    package var eventDuplicateWindow: Duration = .seconds(600)

    package init(partitions: Int, prefix: String = "geofence", replicas: Int = 3) {
        self.partitions = partitions
        self.prefix = prefix
        self.replicas = replicas
    }

    /// Where producers publish a vehicle's fixes: `geofence.fix.VEHICLE`.
    package var fixSubjects: String { "\(prefix).fix.*" }
    /// Where the server's mapping puts them: `geofence.fixp.P.VEHICLE`.
    package var partitionedFixSubjects: String { "\(prefix).fixp.*.*" }
    package func fixSubject(partition: Int) -> String { "\(prefix).fixp.\(partition).*" }
    package var fixStream: String { streamName("FIXES") }

    package var eventStream: String { streamName("EVENTS") }
    package var eventSubjects: String { "\(prefix).event.*" }
    /// The one subject of a partition's events: one subject, so that each publish can be fenced on the last.
    package func eventSubject(partition: Int) -> String { "\(prefix).event.\(partition)" }

    /// The subject of a region's `expired` events: one token of its own under the event subjects, named by a
    /// hash of the region id (ids may hold characters a subject token may not), so that its last message tells
    /// an engine whether another stored the expiry already.
    package func expirySubject(region: String) -> String {
        "\(prefix).event.expiry-" + StableHash.hex(region)
    }

    /// Whether `subject` is a partition's event subject (not a region's expiry subject).
    package func isPartitionEventSubject(_ subject: String) -> Bool {
        guard let last = subject.split(separator: ".").last else { return false }
        return subject.hasPrefix("\(prefix).event.") && Int(last) != nil
    }

    package var checkpointStream: String { streamName("CHECKPOINTS") }
    package var checkpointSubjects: String { "\(prefix).checkpoint.>" }
    package func checkpointDataSubject(partition: Int) -> String { "\(prefix).checkpoint.\(partition).data" }
    package func checkpointHeadSubject(partition: Int) -> String { "\(prefix).checkpoint.\(partition).head" }

    package var leaseBucket: String { "\(prefix)-leases" }
    package var engineBucket: String { "\(prefix)-engines" }
    package var regionBucket: String { "\(prefix)-regions" }
    /// Each engine's status (`geofence status --nats`), by engine id.
    package var statusBucket: String { "\(prefix)-status" }

    /// The server's account mapping that spreads vehicles over the partitions (Docs/cluster.md gives it).
    package var mapping: (from: String, to: String) {
        ("\(prefix).fix.*", "\(prefix).fixp.{{partition(\(partitions),1)}}.{{wildcard(1)}}")
    }

    /// The partition and the vehicle of a partitioned fix subject (`geofence.fixp.3.truck-7`), or nil.
    package func partitionAndVehicle(of subject: String) -> (partition: Int, vehicle: String)? {
        let tokens = subject.split(separator: ".", maxSplits: 3, omittingEmptySubsequences: false)
        guard tokens.count == 4, tokens[1] == "fixp", let p = Int(tokens[2]), p >= 0, p < partitions,
            !tokens[3].isEmpty
        else { return nil }
        return (p, String(tokens[3]))
    }

    private func streamName(_ suffix: String) -> String {
        prefix.uppercased().map { $0.isLetter || $0.isNumber ? String($0) : "_" }.joined() + "_" + suffix
    }

    /// Creates the fix, event and checkpoint streams where missing. **Blocks** for a few JetStream requests.
    package func ensureStreams(_ connection: NATSConnection) throws {
        _ = try connection.ensureStream(
            name: fixStream, subjects: [partitionedFixSubjects], replicas: replicas, duplicateWindow: .seconds(120),
            maxAge: fixRetention)
        _ = try connection.ensureStream(
            name: eventStream, subjects: [eventSubjects], replicas: replicas, duplicateWindow: eventDuplicateWindow)
        _ = try connection.ensureStream(
            name: checkpointStream, subjects: [checkpointSubjects], replicas: replicas,
            duplicateWindow: .seconds(120))
    }
}
