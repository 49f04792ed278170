import Foundation
import GeofenceCore

/// One partition's events, as its owner publishes them to the event stream: every event on the partition's one
/// subject (`geofence.event.P`), de-duplicated by its identity (`Nats-Msg-Id`, `EventIdentity`: a replay's copy
/// of an event already stored is dropped), and fenced (`Nats-Expected-Last-Subject-Sequence`: each publish
/// expects the owner's own last one, so that once another owner has written to the subject, a stale owner's
/// publish is refused rather than interleaved).
///
/// The fence helps; it is not what guarantees one owner (on nats-server before 2.9.21 two publishes in flight
/// with the same expectation can both be stored, nats-server#4320): the lease is (`Docs/cluster.md`).
///
/// Runs on the thread that owns the partition's work: every call **blocks** on JetStream.
package final class PartitionEventLog {
    package let partition: Int
    private let connection: NATSConnection
    private let layout: ClusterLayout
    private let subject: String
    /// `Geofence-Owner` of each event: the engine and its lease term, so that a reader of the stream sees who
    /// stored each event (and that no owner's events follow another's take-over marker).
    private let ownerHeader: (String, String)
    /// The sequence of the last message this owner stored or found on the subject (the fence's expectation).
    package private(set) var lastSequence: UInt64
    /// Publishes tried, stored, dropped as duplicates, and refused by the fence.
    package private(set) var counts = Counts()

    /// When this owner last tried to store a message on the subject (its take-over marker or an event), by the
    /// wall clock: what shows that a stale owner stopped before another took over, whatever the stream kept.
    package private(set) var lastAttempt: Date

    package struct Counts: Sendable, Equatable {
        /// Every publish tried, the take-over marker included, whatever came of it.
        package var attempted = 0
        package var stored = 0
        package var duplicates = 0
        package var fenced = 0
    }

    /// The header that marks a message on an event subject that is not an event.
    package static let kindHeader = "Geofence-Kind"
    /// The header that names the engine and lease term that stored a message: `ENGINE/TERM`.
    package static let ownerHeaderName = "Geofence-Owner"

    /// Takes the partition's event subject over: reads its last sequence and stores a take-over marker after
    /// it, so that any publish of a previous owner from now on is refused. Throws `NATSError` (`.wrongLastSequence`:
    /// someone wrote in between; the caller gives the partition up).
    package init(
        connection: NATSConnection, layout: ClusterLayout, partition: Int, owner: String, term: UInt64,
        timeout: Duration? = nil
    ) throws {
        self.connection = connection
        self.layout = layout
        self.partition = partition
        subject = layout.eventSubject(partition: partition)
        ownerHeader = (Self.ownerHeaderName, "\(owner)/\(term)")
        let deadline = timeout.map { ContinuousClock.now + $0 }
        let last =
            try connection.lastMessage(stream: layout.eventStream, subject: subject, timeout: timeout)?.sequence ?? 0
        lastAttempt = Date()
        counts.attempted = 1
        let marker = JSONValue.object([
            "partition": .number(Double(partition)), "owner": .string(owner), "term": .number(Double(term)),
        ]).serialized()
        let ack = try connection.jetStreamPublish(
            subject: subject, payload: Array(marker.utf8),
            headers: [(Self.kindHeader, "takeover"), (Self.ownerHeaderName, "\(owner)/\(term)")],
            expectedLastSubjectSequence: last,
            timeout: deadline.map { max(.milliseconds(1), $0 - ContinuousClock.now) })
        lastSequence = ack.sequence
    }

    /// Stores `event` (its `id` its identity). Returns false when the stream already held it (a replay).
    /// Throws `NATSError`: `.wrongLastSequence` when fenced (another owner wrote: stop judging the partition),
    /// `.timeout` or `.noResponders` when the outcome is unknown (publish it again: its id keeps one copy).
    @discardableResult
    package func publish(_ event: RegionEvent, timeout: Duration? = nil) throws -> Bool {
        counts.attempted += 1
        lastAttempt = Date()
        let payload = Array(JSONValue.object(event.json).serialized().utf8)
        do {
            let ack = try connection.jetStreamPublish(
                subject: subject, payload: payload, headers: [ownerHeader], messageID: event.id,
                expectedLastSubjectSequence: lastSequence, timeout: timeout)
            if ack.duplicate {
                counts.duplicates += 1
                return false
            }
            lastSequence = ack.sequence
            counts.stored += 1
            return true
        } catch let error as NATSError where error.kind == .wrongLastSequence {
            // A publish whose answer was lost (a timeout while NATS elected a leader) may have been stored; sent
            // again, it then expects a sequence before its own. If the subject's last message is this event,
            // it was stored: not fenced.
            if timeout.map({ $0 > .milliseconds(5) }) ?? true,
                let last = try? connection.lastMessage(stream: layout.eventStream, subject: subject, timeout: timeout),
                last.headers["Nats-Msg-Id"]?.first == event.id
            {
                lastSequence = last.sequence
                counts.stored += 1
                return true
            }
            counts.fenced += 1
            throw error
        }
    }
}

/// The `expired` events of regions, which belong to no partition: every engine's monitor expires a region when
/// its own fixes pass the expiry time, so every engine makes the event. It is stored once, whichever engines make
/// it and however long apart (an engine started a day later still holds the region, and expires it at its first
/// fix): on the region's own subject (`ClusterLayout.expirySubject`), whose last message is read first (the
/// event there already: nothing to do) and whose publish expects that message (two engines racing: one is
/// stored, the other finds it on its next look). Its `Nats-Msg-Id` is the event's identity, as for every event.
package struct RegionExpiryLog {
    let connection: NATSConnection
    let layout: ClusterLayout
    let owner: String

    /// Stores `event` (an `expired` event with its identity as `id`) unless its subject holds it; true when this
    /// call stored it. Throws `NATSError` when the outcome is not known (try again later).
    package func publish(_ event: RegionEvent, timeout: Duration? = nil) throws -> Bool {
        let subject = layout.expirySubject(region: event.region)
        let payload = Array(JSONValue.object(event.json).serialized().utf8)
        for _ in 0..<3 {
            let last = try connection.lastMessage(stream: layout.eventStream, subject: subject)
            if last?.headers["Nats-Msg-Id"]?.first == event.id { return false }
            do {
                let ack = try connection.jetStreamPublish(
                    subject: subject, payload: payload, headers: [(PartitionEventLog.ownerHeaderName, owner)],
                    messageID: event.id, expectedLastSubjectSequence: last?.sequence ?? 0, timeout: timeout)
                return !ack.duplicate
            } catch let error as NATSError where error.kind == .wrongLastSequence {
                continue  // Another engine stored a message there meanwhile: look again.
            }
        }
        throw NATSError(
            kind: .timeout, operation: "store the expiry of region \(event.region)",
            text: "the subject kept changing under three tries")
    }
}
