import Foundation
import GeofenceStore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Where `geofence deliver` reads a cluster's events: the servers, the stream and its subjects, and the durable
/// consumer that keeps its place in the cluster.
package struct ClusterEventSource: Sendable {
    /// The servers and the credentials (`NATSServers`).
    package var servers: NATSServers
    /// `nats://HOST:PORT[,HOST:PORT…]`: no user name, no password.
    package var urls: String { servers.urls }
    /// The durable consumer's name (letters, digits, `-` and `_`).
    package var consumer: String
    /// Written in the consumer, to recognize it as this state directory's (`HOST:STATE_DIR`).
    package var owner: String
    package var stream = "GEOFENCE_EVENTS"
    package var subjects = "geofence.event.*"
    /// Messages read at a time, at most: one outbox transaction each.
    package var batch = 256
    /// A message delivered and not acknowledged within this is delivered again.
    package var ackWait: Duration = .seconds(30)
    /// Messages delivered and not yet acknowledged, at most (the consumer's `MaxAckPending`).
    package var maxAckPending = 1024
    /// How long one fetch waits for messages (and so how soon the reader sees that it is asked to stop).
    package var fetchWait: Duration = .milliseconds(500)
    /// Fault injection for the tests (debug builds only, from `GEOFENCE_TEST_DELIVER_HOLD_BEFORE_COMMIT` and
    /// `…_BEFORE_ACK`): while a file is at this path, the reader holds a fetched batch before committing it, or
    /// a committed batch before acknowledging it, so that a test can kill it exactly there. nil: never.
    package var holdBeforeCommit: String?
    package var holdBeforeAck: String?

    package init(servers: NATSServers, consumer: String, owner: String) {
        self.servers = servers
        self.consumer = consumer
        self.owner = owner
    }

    /// The header that marks a message of the event stream that is not an event (a take-over marker).
    package static let kindHeader = "Geofence-Kind"
}

/// Why `geofence deliver` cannot start.
package struct DeliverStartError: Error, CustomStringConvertible, Sendable {
    package let description: String
}

/// Reads a cluster's event stream through a durable pull consumer into the outbox of a state directory, on a
/// thread of its own (`geofence.deliver`: every call into nats.c and SQLite blocks).
///
/// **The outbox is the truth, the consumer a means.** Each batch of messages is appended to the outbox in one
/// transaction, skipping an event whose id is there already, together with the stream sequence of the last
/// message of the batch (the setting `deliver.stream-sequence`); only after that commit are the messages
/// acknowledged. So a kill at any moment loses nothing (a message not acknowledged is delivered again) and
/// doubles nothing (a message at or below the committed sequence, or an id already there, is skipped).
///
/// Order: the outbox receives the stream's order, which per partition (so per vehicle and per region) is the
/// order the events were made. A consumer delivers in stream order the first time, but a message delivered
/// and lost on the way (a fetch whose answer a failing server dropped, a kill between fetch and commit) is
/// delivered again only after the ack wait, after later ones. So the reader never takes a message that
/// jumps over one the stream still holds: it starts each session on a consumer that has nothing
/// outstanding (a consumer with messages delivered and not acknowledged, or past the committed sequence, is
/// made again from the sequence after it), and on a jump it commits what came before, makes the consumer
/// again from there, and reads on. Messages removed from the stream (its limits) are the only jumps it
/// accepts, and those it reports.
package final class ClusterEventReader: Sendable {
    package static let positionKey = "deliver.stream-sequence"

    private let source: ClusterEventSource
    private let store: StateStore
    private let logger: Logger
    private let committed: @Sendable () -> Void
    private let stopping = Atomic(false)
    private let counts = Mutex(Counts())

    /// What the reader did since it started.
    package struct Counts: Sendable, Equatable {
        /// Events appended to the outbox.
        package var appended = 0
        /// Events skipped because the outbox had them (a copy, a redelivery).
        package var duplicates = 0
        /// Messages that are not events (take-over markers).
        package var markers = 0
        /// Messages that are not valid events, skipped (and logged).
        package var invalid = 0
        /// Times the consumer was made again (at start, after a jump or a failure).
        package var consumerResets = 0
    }

    package var statistics: Counts { counts.withLock { $0 } }

    /// - Parameter committed: called after each commit that appended events (to wake the hooks and sinks).
    package init(
        source: ClusterEventSource, store: StateStore, logger: Logger, committed: @escaping @Sendable () -> Void
    ) {
        self.source = source
        self.store = store
        self.logger = logger
        self.committed = committed
    }

    /// Connects, checks the stream, and sets the consumer up, on the reader's thread; throws
    /// `DeliverStartError` when that fails (no server answers, no stream yet). Then returns a service that
    /// reads until it is stopped.
    package func start() async throws -> any Service {
        let started = AsyncStream<Result<Void, DeliverStartError>>.makeStream()
        let ended = AsyncStream<Void>.makeStream()
        let thread = Thread { [self] in
            var session: Session
            do {
                session = try Session(reader: self)
            } catch {
                started.continuation.yield(
                    .failure(error as? DeliverStartError ?? DeliverStartError(description: "\(error)")))
                started.continuation.finish()
                ended.continuation.finish()
                return
            }
            started.continuation.yield(.success(()))
            started.continuation.finish()
            session.run()
            ended.continuation.finish()
        }
        thread.name = "geofence.deliver"
        thread.start()
        var outcome: Result<Void, DeliverStartError> = .failure(DeliverStartError(description: "the reader ended"))
        for await result in started.stream {
            outcome = result
            break
        }
        try outcome.get()
        return ClosureService(
            "reader",
            run: {
                for await _ in ended.stream {}
            },
            stop: { self.stop() })
    }

    /// Asks the reader to stop: it finishes the batch in hand (commit, acknowledgement) and ends within the
    /// fetch wait.
    package func stop() { stopping.store(true, ordering: .relaxed) }

    var isStopping: Bool { stopping.load(ordering: .relaxed) }

    func count(_ change: (inout Counts) -> Void) { counts.withLock { change(&$0) } }

    // MARK: The reader's thread

    /// Everything the reader's thread holds: the connection, the subscription, and where it is.
    private struct Session {
        let reader: ClusterEventReader
        let connection: NATSConnection
        var subscription: NATSPullSubscription?
        /// The stream sequence committed with the outbox.
        var position: UInt64
        /// The stream sequence of the last message taken in this subscription (a jump is from it).
        var lastSeen: UInt64
        /// The next message is the first of a fresh subscription: it comes in the stream's order whatever
        /// its sequence.
        var fresh = true
        var failing = false

        var source: ClusterEventSource { reader.source }
        var logger: Logger { reader.logger }

        init(reader: ClusterEventReader) throws {
            self.reader = reader
            let source = reader.source
            do {
                connection = try NATSConnection(source.servers, name: "geofence deliver \(source.consumer)")
            } catch let error as NATSError {
                let verb = error.kind == .authorizationFailed ? "log in to" : "reach"
                throw DeliverStartError(description: "cannot \(verb) NATS at \(source.urls): \(error.text)")
            }
            let stored = try reader.store.settings.value(ClusterEventReader.positionKey)
            position = stored.flatMap { UInt64($0) } ?? 0
            lastSeen = position
            let info: NATSConnection.StreamInfo?
            do {
                info = try connection.streamInfo(name: source.stream)
            } catch let error as NATSError {
                throw DeliverStartError(
                    description: "cannot read the stream \(source.stream) at \(source.urls): \(error.text)")
            }
            guard let info else {
                throw DeliverStartError(
                    description: "the stream \(source.stream) does not exist at \(source.urls): no geofence engine "
                        + "of the cluster has created it yet (start `geofence run --source nats://…` first)")
            }
            if position > info.lastSequence {
                logger.notice(
                    "deliver: the stream \(source.stream) ends at \(info.lastSequence), before where this state "
                        + "directory got to (\(position)): it was made again; reading it from its start (events "
                        + "already in the outbox are recognized by id)")
                position = 0
                lastSeen = 0
            }
            if let existing = try connection.consumerInfo(stream: source.stream, name: source.consumer),
                existing.description != Self.description(source)
            {
                throw DeliverStartError(
                    description: "the consumer \(source.consumer) of \(source.stream) is not this state directory's "
                        + "(\(existing.description.isEmpty ? "no description" : existing.description)): give "
                        + "--consumer another name")
            }
            do {
                try subscribe()
            } catch let error as NATSError {
                throw DeliverStartError(
                    description: "cannot set up the consumer \(source.consumer) of \(source.stream): \(error.text)")
            }
            logger.notice(
                "deliver: reading \(source.stream) at \(connection.connectedURL ?? source.urls) through consumer "
                    + "\(source.consumer), after stream sequence \(position)")
        }

        static func description(_ source: ClusterEventSource) -> String { "geofence deliver \(source.owner)" }

        /// Subscribes to the consumer, making it again from the message after `position` unless it is exactly
        /// where the outbox is: nothing delivered and not acknowledged, and nothing delivered past `position`.
        mutating func subscribe() throws {
            subscription = nil
            let existing = try connection.consumerInfo(stream: source.stream, name: source.consumer)
            let clean =
                existing.map {
                    $0.ackPending == 0 && $0.deliveredStreamSequence <= position
                        && $0.filterSubject == source.subjects && $0.ackWait == source.ackWait
                        && $0.maxAckPending == source.maxAckPending
                } ?? false
            if !clean {
                if let existing {
                    logger.info(
                        "deliver: the consumer \(source.consumer) has \(existing.ackPending) messages delivered and "
                            + "not acknowledged, and delivered up to stream sequence "
                            + "\(existing.deliveredStreamSequence); made again from \(position + 1)")
                    try connection.deleteConsumer(stream: source.stream, name: source.consumer)
                }
                _ = try connection.addPullConsumer(
                    stream: source.stream, name: source.consumer, description: Self.description(source),
                    filterSubject: source.subjects, startSequence: position + 1, ackWait: source.ackWait,
                    maxAckPending: source.maxAckPending)
                reader.count { $0.consumerResets += 1 }
            }
            subscription = try connection.pullSubscribe(
                stream: source.stream, consumer: source.consumer, subject: source.subjects)
            lastSeen = position
            fresh = true
        }

        mutating func run() {
            var backoff = 0.25
            while !reader.isStopping {
                do {
                    if subscription == nil { try subscribe() }
                    guard let subscription else { continue }
                    let batch = try subscription.fetch(batch: source.batch, timeout: source.fetchWait)
                    if failing {
                        failing = false
                        logger.notice("deliver: reading \(source.stream) again")
                    }
                    backoff = 0.25
                    if !batch.messages.isEmpty { try take(batch) }
                } catch {
                    if !failing {
                        logger.warning("deliver: \(error); trying again")
                        failing = true
                    }
                    // The consumer is looked at (and made again if it has messages outstanding) before reading on.
                    subscription = nil
                    pause(seconds: backoff)
                    backoff = min(backoff * 2, 5)
                }
            }
        }

        /// Fault injection (`ClusterEventSource.holdBeforeCommit`): waits while a file is at `path`.
        func hold(_ path: String?, _ step: String) {
            guard let path, access(path, F_OK) == 0 else { return }
            logger.notice("deliver: holding a batch before \(step) (test)")
            while access(path, F_OK) == 0, !reader.isStopping { usleep(20_000) }
        }

        /// Sleeps `seconds`, or less when asked to stop.
        func pause(seconds: Double) {
            var left = seconds
            while left > 0, !reader.isStopping {
                usleep(50_000)
                left -= 0.05
            }
        }

        /// Commits the batch's messages up to the first that jumps over messages the stream holds, acknowledges
        /// them, and after a jump makes the consumer again from the message after the last one committed.
        mutating func take(_ batch: NATSFetchedBatch) throws {
            var events: [ReceivedEvent] = []
            var taken = 0
            var jumped = false
            var newest = position
            var markers = 0
            var invalid = 0
            for message in batch.messages {
                let sequence = message.streamSequence
                if sequence <= newest {
                    // Committed before (a redelivery, or a consumer behind the outbox): acknowledged again.
                    taken += 1
                    continue
                }
                if !fresh, sequence > lastSeen + 1, try holdsMessages(after: lastSeen, before: sequence) {
                    jumped = true
                    break
                }
                fresh = false
                lastSeen = sequence
                newest = sequence
                taken += 1
                if message.headers[ClusterEventSource.kindHeader] != nil {
                    markers += 1
                    continue
                }
                do {
                    events.append(try ReceivedEvent(payload: message.payload))
                } catch {
                    invalid += 1
                    logger.error(
                        "deliver: the message at stream sequence \(sequence) (\(message.subject)) is not an event "
                            + "(\(error)); skipped (it stays in the stream)")
                }
            }
            hold(source.holdBeforeCommit, "committing")
            if newest > position {
                let appended = try commit(events, through: newest)
                position = newest
                reader.count {
                    $0.appended += appended
                    $0.duplicates += events.count - appended
                    $0.markers += markers
                    $0.invalid += invalid
                }
                if appended > 0 { reader.committed() }
            }
            hold(source.holdBeforeAck, "acknowledging")
            do {
                try batch.acknowledge(first: taken)
            } catch {
                // The commit holds: the messages come again after the ack wait, and are skipped then.
                logger.warning("deliver: \(error); they are delivered again and recognized")
            }
            if jumped {
                logger.info(
                    "deliver: the consumer jumped past stream sequence \(lastSeen + 1); making it again from there")
                try subscribe()
            }
        }

        /// Whether the stream holds any message after `after` and before `before` (false: they were removed by
        /// the stream's limits, and are reported as lost to this state directory).
        func holdsMessages(after: UInt64, before: UInt64) throws -> Bool {
            guard let first = try connection.firstSequence(stream: source.stream) else { return false }
            if first >= before {
                logger.warning(
                    "deliver: stream sequences \(after + 1) to \(before - 1) were removed from \(source.stream) "
                        + "(its limits) before they were read here: their events are not delivered from this state "
                        + "directory")
                return false
            }
            return true
        }

        /// Appends the events and the position in one transaction; a failure (a full disk) is tried again, the
        /// same batch, every second until it works or the reader is stopped (then nothing is acknowledged, and
        /// the messages come again at the next start).
        func commit(_ events: [ReceivedEvent], through sequence: UInt64) throws -> Int {
            var logged = false
            while true {
                do {
                    return try reader.store.outbox.appendReceived(
                        events, position: (ClusterEventReader.positionKey, String(sequence)))
                } catch {
                    if reader.isStopping { throw error }
                    if !logged {
                        logger.error("deliver: cannot store \(events.count) events: \(error); trying again")
                        logged = true
                    }
                    pause(seconds: 1)
                }
            }
        }
    }
}
