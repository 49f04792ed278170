import Foundation
import GeofenceCore

/// A sink's dead letters: events its receiver refused for good (a webhook's 4xx other than 408 and 429), kept in
/// `deliveries` with the hooks' own, so that `geofence events --dead` shows them all in one place.
///
/// A dead letter is a delivery row with `hook` = `sink:<id>`, `command` = what was attempted (`POST <url>`),
/// status `dead`, the refusal in `last_error` (`HTTP 400`) and the start of the response body in `stdout`. It is
/// never `pending`: the hook runner never runs it, and `geofence events retry` leaves it alone (the sink's
/// cursor has moved on; a receiver fixed since can be sent the event again from `events --dead --json`).
extension DeliveryRepository {
    /// The `hook` of a sink's dead letters.
    package static func sinkReference(_ id: String) -> String { "sink:" + id }

    /// Records that sink `sink` gave `event` up. A second record of the same event and sink (the engine killed
    /// after the first, the event offered again) changes nothing.
    package func recordDeadLetter(
        event: StoredEvent, sink: String, target: String, attempts: Int, error: String, response: [UInt8],
        responseBytes: Int, startedAt: Date, duration: Double, now: Date = Date()
    ) throws {
        let hook = Self.sinkReference(sink)
        let key = DeliveryOrderKey(hook: hook, eventType: event.type, region: event.region)
        let attempt = DeliveryAttempt(
            number: max(1, attempts), startedAt: startedAt, duration: duration, error: error)
        let history = JSONValue.array([.object(attempt.json)]).serialized()
        let t = now.timeIntervalSince1970
        try queue.write { db in
            try db.execute(
                """
                INSERT OR IGNORE INTO deliveries (event_seq, hook, command, order_key, status, attempts,
                                                  next_attempt_at, created_at, queued_at, started_at, finished_at,
                                                  last_error, last_duration, stdout, stdout_bytes, history,
                                                  change_seq)
                VALUES (?, ?, ?, ?, 'dead', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, \(Self.nextChangeSeq))
                """,
                [
                    event.seq, hook, target, key, max(1, attempts), t, t, t, startedAt.timeIntervalSince1970, t,
                    error, duration, response, responseBytes, history,
                ])
        }
    }
}
