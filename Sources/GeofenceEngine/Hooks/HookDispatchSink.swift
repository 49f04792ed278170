import Foundation
import GeofenceCore
import GeofenceStore

/// The hooks as a sink of the outbox: what it delivers an event to is the store, as one delivery per
/// matching hook (`dispatchDeliveries(of:)`), and an event is acknowledged once its deliveries are committed.
/// The `HookRunner` then runs them, each with its own retries, in order per region and hook.
///
/// A `SinkRunner` drives it, as it drives the MQTT sink, with the cursor in `hook_dispatch`
/// (`HookDispatchCursor`); the deliveries and the cursor are written in one transaction, so an event gets
/// its deliveries exactly once however the engine stops. It is not held back while Location Services are
/// off: the runner holds the deliveries of region events instead, and lets the others run.
///
/// Its transaction runs on `worker` (a thread of its own, shared with its `SinkRunner`), not on the
/// cooperative pool; `dispatched` is called there too, right after the commit.
package final class HookDispatchSink: EventSink {
    package let id = "hooks"
    private let store: StateStore
    private let runAsCreators: Bool
    private let clock: any GeofenceClock
    private let worker: StoreWorker
    private let dispatched: @Sendable (_ created: [DeliveryHead], _ through: Int64) -> Void

    /// `dispatched` is told, after each commit, the deliveries created and the last event seq dispatched.
    package init(
        store: StateStore, runAsCreators: Bool, clock: any GeofenceClock = SystemClock(), worker: StoreWorker,
        dispatched: @escaping @Sendable (_ created: [DeliveryHead], _ through: Int64) -> Void
    ) {
        self.store = store
        self.runAsCreators = runAsCreators
        self.clock = clock
        self.worker = worker
        self.dispatched = dispatched
    }

    package func accepts(eventType: String) -> Bool { true }

    package func open() async throws {}

    package func deliver(_ events: [StoredEvent]) async throws -> Int {
        guard let last = events.last else { return 0 }
        let (deliveries, runAsCreators, clock, dispatched) = (store.deliveries, self.runAsCreators, clock, dispatched)
        try await worker.run {
            let created = try deliveries.dispatchDeliveries(of: events, now: clock.now(), runAsCreators: runAsCreators)
            dispatched(created, last.seq)
        }
        return events.count
    }

    package func close() async {}

    package var health: SinkHealth { SinkHealth(address: "hooks", connected: true) }
}
