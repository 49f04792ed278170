import Foundation
import GeofenceStore

/// A receiver of committed events that acknowledges what it has safely taken: an MQTT broker (PUBACK), and
/// later NATS, a webhook, a library user's own code.
///
/// A `SinkRunner` drives it: it reads the outbox after the sink's durable cursor, in seq order, hands it
/// the events its filter takes, and moves the cursor only over what `deliver` says was acknowledged. So a
/// sink sees every event at least once, in commit order (hence in order per region), across outages of its
/// receiver and restarts of the engine; it never sees the monitor, and cannot hold it back.
///
/// The runner calls one method at a time (`open`, `deliver`, `close`), from one task.
package protocol EventSink: AnyObject, Sendable {
    /// The sink's durable name: its cursor in the store (`sink_cursors.sink`).
    var id: String { get }

    /// Whether it takes events of `type`. Events it does not take are never given to `deliver`; the cursor
    /// moves over them.
    func accepts(eventType: String) -> Bool

    /// Gets ready to deliver (connects). Throws when it cannot yet; the runner tries again with backoff.
    func open() async throws

    /// Delivers `events` (in seq order, at least one) and returns how many of them, counted from the first,
    /// the receiver has acknowledged. Fewer than all (an outage, a stall, the task cancelled) is not an
    /// error: the runner moves the cursor that far and offers the rest again. Throws when nothing could be
    /// delivered (the receiver is away); the runner retries with backoff.
    func deliver(_ events: [StoredEvent]) async throws -> Int

    /// Leaves cleanly, at a graceful stop (an MQTT sink publishes its `offline` status first).
    func close() async

    /// What it can say of itself for `geofence status`: connected or not, and why. Never a credential.
    var health: SinkHealth { get }

    /// Events the supervisor's runner reads from the outbox at a time for it (`SinkRunner.batchSize`).
    var batchSize: Int { get }
}

extension EventSink {
    /// The runner's default.
    package var batchSize: Int { 2_000 }
}

/// A sink's own account of itself.
package struct SinkHealth: Sendable, Equatable {
    /// Where it delivers, without credentials (`mqtt://engine@broker:1883`).
    package var address: String
    package var connected: Bool
    /// Why it is not connected or not delivering (the last error); nil when all is well.
    package var problem: String?

    package init(address: String, connected: Bool, problem: String? = nil) {
        self.address = address
        self.connected = connected
        self.problem = problem
    }
}

/// A sink that cannot deliver now (its receiver is away): retried with backoff.
package struct SinkUnavailable: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}
