import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceTestSupport

/// Pushes a fleet's fixes (`ClusterFleet`) into a NATS cluster as producers would: a JetStream publish of each
/// fix's TPV JSON to `geofence.fix.VEHICLE` (which the servers map to `geofence.fixp.N.VEHICLE`, captured by
/// the stream `GEOFENCE_FIXES`), acknowledged, with `Nats-Msg-Id` = the vehicle and fix time so that a resend
/// is dropped as a duplicate. Thousands in flight at once (`NATSPipelinedPublisher`); a fix refused or
/// unanswered (a server killed, a leader being elected) is sent again, with the same id, before any later fix
/// of its vehicle, so each vehicle's fixes are stored in time order, each once.
///
/// For the acceptance tests and `geofence-bench cluster-fleet`. **Blocks** its thread (NATS calls block).
package final class FleetPublisher: @unchecked Sendable {
    // @unchecked: used by one thread at a time; nats.c locks inside.

    /// The fix stream's name and subjects (Docs/cluster.md).
    package static let fixStream = "GEOFENCE_FIXES"
    package static let fixSubjects = ["geofence.fixp.*.*"]

    package enum Pacing: Sendable {
        /// Each fix once its time has come (never before: engines refuse fixes from the future).
        case realTime
        /// As fast as the cluster acknowledges.
        case asFastAsPossible
    }

    package struct Statistics: Sendable, CustomStringConvertible {
        /// Fixes stored (each once, resends included).
        package var stored = 0
        /// Acknowledged as duplicates (a resend of one whose acknowledgement was lost).
        package var duplicates = 0
        /// Sends that failed and were made again.
        package var resends = 0
        /// The first and the last failure's words.
        package var firstFailure: String?
        package var lastFailure: String?
        package var seconds = 0.0
        /// How late after its fix time a fix was sent, at most (real-time pacing).
        package var maxLateness = 0.0

        package var fixes: Int { stored + duplicates }
        package var perSecond: Double { seconds > 0 ? Double(fixes) / seconds : 0 }

        package var description: String {
            "\(fixes) fixes in \(String(format: "%.1f", seconds)) s (\(Int(perSecond))/s): \(stored) stored, "
                + "\(duplicates) duplicates, \(resends) resent, at most \(String(format: "%.1f", maxLateness)) s late"
                + (lastFailure.map { "; last failure: \($0)" } ?? "")
        }
    }

    package let connection: NATSConnection
    private let publisher: NATSPipelinedPublisher
    private let maxBatch: Int
    private let ackTimeout: Duration

    /// Connects to `urls`; at most `maxPending` fixes in flight, each answered within `ackTimeout`.
    package init(urls: String, maxPending: Int = 4096, ackTimeout: Duration = .seconds(5)) throws {
        connection = try NATSConnection(urls: urls, name: "geofence-fleet-publisher", requestTimeout: ackTimeout)
        publisher = try NATSPipelinedPublisher(connection: connection, maxPending: maxPending, ackTimeout: ackTimeout)
        maxBatch = max(1, maxPending)
        self.ackTimeout = ackTimeout
    }

    /// Creates `GEOFENCE_FIXES` if it is missing (the engine does the same on its start; whoever comes
    /// first): `geofence.fixp.*.*`, `replicas`, file storage, limits retention, the duplicate window for
    /// resends. An existing stream is left as it is.
    @discardableResult
    package func ensureFixStream(replicas: Int = 3, duplicateWindow: Duration = .seconds(120)) throws
        -> NATSConnection.StreamInfo
    {
        try connection.ensureStream(
            name: Self.fixStream, subjects: Self.fixSubjects, replicas: replicas, duplicateWindow: duplicateWindow)
    }

    /// Publishes `fixes` in order, paced by `pacing`; a fix that fails is sent again for up to `retryFor`
    /// (then this throws: the run is not whole). `progress` is called about once a second; `stop` is asked
    /// between batches (true: return now, the rest unsent).
    package func publish(
        _ fixes: some Sequence<ClusterFleet.Fix>, pacing: Pacing = .realTime, retryFor: Duration = .seconds(60),
        progress: ((Statistics) -> Void)? = nil, stop: (() -> Bool)? = nil
    ) throws -> Statistics {
        var statistics = Statistics()
        let started = Date()
        var lastProgress = started
        var iterator = fixes.makeIterator()
        var next = iterator.next()
        while let first = next {
            if stop?() == true { break }
            if pacing == .realTime {
                let wait = first.time.timeIntervalSinceNow
                if wait > 0 { Thread.sleep(forTimeInterval: wait) }
            }
            // A batch holds each vehicle once, so that a resend comes before the vehicle's next fix.
            var batch: [String: ClusterFleet.Fix] = [:]
            var vehicles = Set<String>()
            let now = Date()
            while let fix = next, batch.count < maxBatch, !vehicles.contains(fix.vehicle),
                pacing == .asFastAsPossible || fix.time <= now
            {
                vehicles.insert(fix.vehicle)
                next = iterator.next()
                statistics.maxLateness = max(statistics.maxLateness, now.timeIntervalSince(fix.time))
                do {
                    try publisher.publish(subject: fix.subject, payload: Array(fix.json.utf8), messageID: fix.messageID)
                    batch[fix.messageID] = fix
                } catch {
                    try resend(fix, after: "\(error)", retryFor: retryFor, &statistics)
                }
            }
            let settlement = publisher.settle(timeout: ackTimeout + .seconds(1))
            statistics.stored += settlement.stored
            statistics.duplicates += settlement.duplicates
            for (id, error) in settlement.failed {
                guard let fix = batch[id] else {
                    throw NATSError(kind: .other, operation: "publish fixes", text: "an answer for unknown id \(id)")
                }
                try resend(fix, after: "\(error)", retryFor: retryFor, &statistics)
            }
            if let progress, Date().timeIntervalSince(lastProgress) >= 1 {
                lastProgress = Date()
                statistics.seconds = lastProgress.timeIntervalSince(started)
                progress(statistics)
            }
        }
        statistics.seconds = Date().timeIntervalSince(started)
        return statistics
    }

    /// Sends `fix` again, one publish at a time, until it is acknowledged or `retryFor` has passed.
    private func resend(_ fix: ClusterFleet.Fix, after failure: String, retryFor: Duration, _ s: inout Statistics)
        throws
    {
        s.firstFailure = s.firstFailure ?? failure
        s.lastFailure = failure
        let deadline = ContinuousClock.now + retryFor
        var pause = Duration.milliseconds(50)
        while true {
            s.resends += 1
            do {
                let ack = try connection.jetStreamPublish(
                    subject: fix.subject, payload: Array(fix.json.utf8), messageID: fix.messageID)
                if ack.duplicate { s.duplicates += 1 } else { s.stored += 1 }
                return
            } catch {
                s.lastFailure = "\(error)"
                guard ContinuousClock.now + pause < deadline else {
                    throw NATSError(
                        kind: .timeout, operation: "publish \(fix.messageID)",
                        text: "not acknowledged within \(retryFor): \(error)")
                }
                // A leader election or a server coming back: nothing to wait on but time.
                Thread.sleep(
                    forTimeInterval: Double(pause.components.seconds) + Double(pause.components.attoseconds) / 1e18)
                pause = min(pause * 2, .seconds(1))
            }
        }
    }
}

/// The events stream read back: the region events it holds (as `EventKey`s, in stream order), how many
/// messages each subject had, and what was skipped.
package struct ClusterEventsRead: Sendable {
    package var events: [EventKey] = []
    /// Messages per subject (`geofence.event.P`), markers included.
    package var perSubject: [String: Int] = [:]
    /// Messages that are not region events, by reason (`Geofence-Kind: takeover`, `not a region event`).
    package var skipped: [String: Int] = [:]
    package var messages = 0

    /// Reads every message of `stream` (`GEOFENCE_EVENTS`) through the connection: a message with a
    /// `Geofence-Kind` header other than `event` (a take-over marker) or whose payload is not an event of
    /// Docs/events.md is counted in `skipped`, not in `events`.
    package init(connection: NATSConnection, stream: String = "GEOFENCE_EVENTS", filter: String? = nil) throws {
        try connection.readStream(stream, filter: filter) { message in
            messages += 1
            perSubject[message.subject, default: 0] += 1
            if let kind = message.headers["Geofence-Kind"]?.first, kind != "event" {
                skipped["Geofence-Kind: \(kind)", default: 0] += 1
                return
            }
            guard let value = try? JSON.parse(message.payload), let key = EventKey(json: value) else {
                skipped["not a region event", default: 0] += 1
                return
            }
            events.append(key)
        }
    }

    package init() {}
}
