import Foundation
import GeofenceCore
import Synchronization

/// Fix intake: every report the source hands over goes to the monitor, in order. Stopped gracefully: the
/// source is stopped and its stream finished, and what it handed over before is still judged, not dropped
/// with the stream's buffer (an MQTT broker has been told those messages arrived); the service ends once
/// its last report is handled. The same service in `geofence run` and in `GeofenceMonitor`'s session.
package final class FixIntakeService: Service {
    package let name = "source"
    private let source: any LocationSource
    private let monitor: MonitorService
    private let stopping = Atomic(false)

    init(source: any LocationSource, monitor: MonitorService) {
        self.source = source
        self.monitor = monitor
    }

    package func run() async {
        for await report in source.reports {
            await monitor.handle(report)
            // The store refuses writes and much waits for it: the producer waits (a FIFO, a broker), not the
            // engine's memory, until the store takes them or the engine stops.
            while await monitor.holdsSource, !stopping.load(ordering: .acquiring), !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(200))
                await monitor.retryStore()
            }
        }
    }

    package var isGraceful: Bool { true }

    /// Stops the source, once (the group tells a graceful service that ended by itself too).
    package func stop() async {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        await source.stop()
    }
}

/// The monitor's clockwork (`MonitorService.runTicks`): reports held for the rest of their epoch, region
/// changes, expiry, retries of failed regions, bookkeeping, the metrics, and (under systemd) the watchdog's
/// heartbeat. Stopped by cancellation.
package struct TickService: Service {
    package let name = "monitor"
    let monitor: MonitorService
    /// Seconds between ticks.
    let interval: Double
    let heartbeat: MonitorHeartbeat?

    package func run() async { await monitor.runTicks(interval: interval, heartbeat: heartbeat) }
}

extension MonitorService {
    /// The monitor's services, in the order a `ServiceGroup` starts them (and stops them in reverse: the
    /// source's reports are all judged before the ticks stop).
    nonisolated func services(
        source: any LocationSource, interval: Double, heartbeat: MonitorHeartbeat? = nil
    ) -> (ticks: TickService, intake: FixIntakeService) {
        (
            TickService(monitor: self, interval: interval, heartbeat: heartbeat),
            FixIntakeService(source: source, monitor: self)
        )
    }
}
