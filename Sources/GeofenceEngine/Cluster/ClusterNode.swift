import Foundation
import GeofenceCore
import GeofenceSystem
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence run --source nats://…`: one engine of a cluster, wired together. The region bucket is loaded
/// first (a partition judged before its regions are would say `determined` where `enter` was due), then the
/// engine's thread starts, then the leases: from then on the leases tell the engine which partitions it owns,
/// the region bucket what changed, and the partitions' consumers their fixes (Docs/cluster.md).
///
/// A clean stop (SIGTERM) checkpoints every partition owned, then gives the leases back, so that the engines
/// left take the partitions over at once and replay nothing.
package final class ClusterNode: Sendable {
    package let kind: NATSSourceKind
    package let engineID: String
    private let filter: FixFilterConfiguration
    private let monitor: MonitorConfiguration
    private let logger: Logger

    package init(kind: NATSSourceKind, filter: FixFilterConfiguration, monitor: MonitorConfiguration, logger: Logger) {
        self.kind = kind
        self.filter = filter
        self.monitor = monitor
        self.logger = logger
        engineID = kind.engineID ?? ClusterNode.defaultEngineID()
    }

    /// The host name and the process id: unique among live engines, and readable in `status`.
    static func defaultEngineID() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        gethostname(&buffer, buffer.count - 1)
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let host = name.map { $0.isLetter || $0.isNumber || $0 == "-" ? $0 : "-" }
        return "\(String(host.prefix(64)))-\(getpid())"
    }

    /// Runs until SIGTERM or SIGINT. Throws `NATSError` when the cluster cannot be reached or set up at start.
    package func run() async throws {
        let signals = ShutdownSignals()
        let layout = ClusterLayout(partitions: kind.partitions)
        // No call may keep the engine past a lease's deadline: nats.c holds every call while it tries a server,
        // so a try is kept short, and nothing published while reconnecting is kept to be sent after (it fails).
        let connectTimeout = Duration.milliseconds(Int(min(2, kind.leaseTTL / 12) * 1000))
        let connection = try NATSConnection(
            kind.servers, name: "geofence \(engineID)", connectTimeout: connectTimeout,
            ignoreDiscoveredServers: kind.ignoreDiscoveredServers, buffersWhileReconnecting: false)
        let status = try await settingUp("the streams and the status bucket") {
            try layout.ensureStreams(connection)
            return try connection.ensureKeyValue(
                bucket: layout.statusBucket, replicas: layout.replicas, ttl: .seconds(60))
        }

        // The leases' own connection, with a short request timeout: a renewal waits for nothing else.
        let leaseConnection = try NATSConnection(
            kind.servers, name: "geofence \(engineID) leases", connectTimeout: connectTimeout,
            requestTimeout: .milliseconds(Int(kind.leaseTTL * 1000 / 4)),
            ignoreDiscoveredServers: kind.ignoreDiscoveredServers, buffersWhileReconnecting: false)
        let leasesBox = LeasesBox()
        let clock: @Sendable () -> Double = { MonotonicClock.seconds() }
        var configuration = ClusterEngine.Configuration(layout: layout, engineID: engineID)
        configuration.checkpointInterval = kind.checkpointInterval
        configuration.filter = filter
        configuration.monitor = monitor
        let engine = ClusterEngine(
            configuration: configuration, connection: connection, logger: logger,
            remaining: { partition in leasesBox.remaining(partition, at: clock()) }, monotonic: clock)
        engine.statusBucket = status
        // Under systemd (Type=notify, WatchdogSec): WATCHDOG=1 from the engine's own loop, READY=1 once joined.
        let service = ServiceManager()
        if let interval = service.watchdogInterval {
            let seconds = Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18
            let last = Mutex(-Double.infinity)
            engine.heartbeat = {
                let now = clock()
                let due = last.withLock { previous in
                    guard now - previous >= seconds else { return false }
                    previous = now
                    return true
                }
                if due { service.watchdog() }
            }
        }
        let inbox = engine.inbox

        let logger = self.logger
        let apply: @Sendable (ClusterRegions.Batch) -> Void = { batch in
            for change in batch.changes {
                switch change {
                case .put(let region, let seq): inbox.post(.regionPut(region, seq: seq))
                case .remove(let id): inbox.post(.regionRemoved(id: id))
                }
            }
            inbox.post(.regionsTaken(upTo: batch.revision))
            if batch.initial {
                logger.notice("regions: \(batch.changes.count) loaded from the cluster")
            } else {
                for change in batch.changes {
                    switch change {
                    case .put(let region, let seq): logger.info("region \(region.id): put (revision \(seq))")
                    case .remove(let id): logger.info("region \(id): removed")
                    }
                }
            }
        }
        let regions = ClusterRegions(connection: connection, log: { logger.warning($0) }, apply: apply)
        try await settingUp("the region bucket") { try regions.start() }
        guard regions.waitUntilLoaded(timeout: .seconds(600)) else {
            regions.stop()
            throw NATSError(
                kind: .timeout, operation: "load the regions", text: "the region bucket did not load in 10 minutes")
        }

        let finished = DispatchSemaphore(value: 0)
        let thread = Thread {
            nameThisThread("geofence.cluster")
            engine.run()
            finished.signal()
        }
        thread.name = "geofence.cluster"
        thread.start()

        let leases = try PartitionLeases(
            engineID: engineID,
            settings: try LeaseSettings(partitions: kind.partitions, ttl: kind.leaseTTL, replicas: layout.replicas),
            connection: leaseConnection, clock: clock
        ) { event in
            switch event {
            case .acquired(let partition, let term, _): inbox.post(.acquired(partition: partition, term: term))
            case .lost(let partition):
                logger.info("partition \(partition): lease lost")
                inbox.post(.lost(partition: partition))
            }
        }
        leasesBox.set(leases)
        try await settingUp("the lease buckets") { try leases.start() }
        service.ready(status: "engine \(engineID) of a cluster of \(kind.partitions) partitions")
        logger.notice(
            "engine \(engineID) joined the cluster at \(connection.connectedURL ?? kind.urls): \(kind.partitions) partitions, lease \(kind.leaseTTL) s"
        )

        for await _ in signals.signals { break }
        logger.notice("stopping: checkpointing the partitions owned, then giving their leases back")
        service.stopping("checkpointing the partitions owned")
        inbox.stop()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                finished.wait()
                done.resume()
            }
        }
        leases.stop()
        regions.stop()
        _ = try? status.delete(engineID)
        logger.notice("stopped")
    }

    /// How long the engine tries its setup again while JetStream answers late or not at all: a new cluster
    /// electing its leaders, or engines starting together and creating the same streams (a stream's first
    /// info request then goes unanswered for the request timeout). After this the engine exits 69 and
    /// systemd's `Restart=on-failure` starts it again.
    package static let setupPatience: Double = 60

    /// Runs `step` until it succeeds, trying it again every few seconds while JetStream's failure is one
    /// that passes (no answer, no responders, no leader for now), for `setupPatience` at most; each failure
    /// logged. Anything else is thrown at once.
    private func settingUp<T>(_ what: String, _ step: () throws -> T) async throws -> T {
        let start = MonotonicClock.seconds()
        var pause = 0.5
        while true {
            do {
                return try step()
            } catch let error as NATSError where Self.passes(error) {
                let waited = MonotonicClock.seconds() - start
                guard waited + pause < Self.setupPatience else { throw error }
                logger.warning("setting up \(what): \(error); trying again in \(pause) s")
                try await Task.sleep(for: .milliseconds(Int(pause * 1000)))
                pause = min(pause * 2, 4)
            }
        }
    }

    /// A JetStream failure that a cluster getting ready, or a server coming back, ends by itself.
    static func passes(_ error: NATSError) -> Bool {
        switch error.kind {
        case .timeout, .noResponders, .notConnected: return true
        case .other:
            // No suitable peers for now, JetStream temporarily unavailable, no leader to take the request.
            return [10005, 10008, 10009].contains(error.jetStreamCode)
        default: return false
        }
    }

    /// The leases, once made (the engine is made first and asks them through this).
    private final class LeasesBox: Sendable {
        private let leases = Mutex<PartitionLeases?>(nil)
        func set(_ leases: PartitionLeases) { self.leases.withLock { $0 = leases } }
        func remaining(_ partition: Int, at time: Double) -> Double {
            leases.withLock { $0 }?.remaining(partition, at: time) ?? 0
        }
    }
}
