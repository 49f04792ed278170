import Foundation
import GeofenceStore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence deliver`: a state directory whose outbox is filled from a cluster's event stream
/// (`ClusterEventReader`) and delivered by its hooks and sinks (`EventDelivery`, as `geofence run` delivers),
/// under one service group, stopped by SIGTERM or SIGINT.
package final class DeliverEngine: Sendable {
    package let stateDirectory: String
    package let source: ClusterEventSource
    package let hooks: HookConfiguration
    private let logger: Logger

    package init(stateDirectory: String, source: ClusterEventSource, hooks: HookConfiguration, logger: Logger) {
        self.stateDirectory = stateDirectory
        self.source = source
        self.hooks = hooks
        self.logger = logger
    }

    /// Runs until SIGTERM or SIGINT. Throws only for what prevents starting: another engine on the state
    /// directory (`DaemonLock.Held`), a store that cannot be opened, a cluster that cannot be read
    /// (`DeliverStartError`).
    package func run() async throws {
        let signals = ShutdownSignals()
        let signalStream = signals.signals
        let store = try StateStore(directory: stateDirectory)
        let lock = try DaemonLock(directory: stateDirectory)
        defer { withExtendedLifetime(lock) {} }
        let delivery = EventDelivery(store: store, hooks: hooks, logger: logger)
        let reader = ClusterEventReader(source: source, store: store, logger: logger) { delivery.wake() }
        let reading = try await reader.start()
        // Under systemd (Type=notify), started once it reads; a unit without the notify socket ignores this.
        let manager = ServiceManager()
        manager.ready(status: "delivering \(source.stream) through consumer \(source.consumer)")
        let stopped = Mutex<String?>(nil)
        let group = ServiceGroup(
            delivery.services + [
                reading,
                ClosureService("signals") {
                    for await number in signalStream {
                        stopped.withLock {
                            $0 = number == SIGTERM ? "SIGTERM" : number == SIGINT ? "SIGINT" : "a signal"
                        }
                        return
                    }
                },
            ], deadline: .seconds(min(7, hooks.shutdownGrace * 2 + 5)))
        let logger = self.logger
        let ending = await group.run { ending in
            let why =
                ending.service == "signals"
                ? stopped.withLock { $0 } ?? "signals ended" : "the \(ending.service) stopped"
            manager.stopping(why)
            logger.notice("deliver: stopping (\(why)\(ending.error.map { ": \($0)" } ?? ""))")
        }
        if !ending.cancelled.isEmpty {
            logger.warning("deliver: did not stop in time, cancelled: \(ending.cancelled.joined(separator: ", "))")
        }
        let counts = reader.statistics
        logger.notice(
            "deliver: stopped: \(counts.appended) events taken into the outbox, \(counts.duplicates) already there, "
                + "\(counts.markers) markers, \(counts.invalid) not events")
        withExtendedLifetime(signals) {}
    }
}
