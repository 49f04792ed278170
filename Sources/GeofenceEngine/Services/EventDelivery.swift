import Foundation
import GeofenceStore

/// What delivers the events of a state directory's outbox: the hook runner (`geofence hook add`, and the
/// regions' own hooks) and the sinks (`geofence sink add`). The same for every engine that fills an outbox:
/// `geofence run`, whose monitor commits the events, and `geofence deliver`, which commits a cluster's.
package struct EventDelivery: Sendable {
    package let hooks: HookRunner
    package let sinks: SinkSupervisor

    package init(store: StateStore, hooks configuration: HookConfiguration, logger: Logger) {
        hooks = HookRunner(store: store, configuration: configuration, logger: logger)
        sinks = SinkSupervisor(
            store: store, logger: logger,
            factory: SinkSupervisor.factory(
                stateDirectory: store.directory, environment: ProcessInfo.processInfo.environment, logger: logger))
    }

    /// Events were committed: the hooks' dispatch and the sinks look at the outbox now, not at their next poll.
    package func wake() {
        hooks.wake()
        sinks.wake()
    }

    /// Location Services were switched off (true) or on.
    package func setLocationPaused(_ paused: Bool) {
        hooks.setLocationPaused(paused)
        sinks.setLocationPaused(paused)
    }

    /// The two as services of a group, in the order they start (so stopped last): the hook runner, stopped
    /// gracefully (running hooks get their grace), then the sinks, stopped by cancellation (each closes: an
    /// MQTT sink publishes `offline`).
    package var services: [any Service] {
        let hooks = self.hooks
        let sinks = self.sinks
        return [
            ClosureService("hooks", run: { await hooks.run() }, stop: { hooks.finish() }),
            ClosureService("sinks") { await sinks.run() },
        ]
    }
}
