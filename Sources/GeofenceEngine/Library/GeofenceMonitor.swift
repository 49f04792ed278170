import Foundation
import GeofenceCore
import GeofenceStore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The geofence engine, embedded: regions in a store, fixes from a `LocationSource`, and the committed events
/// as an async sequence. The same decisions as `geofence run` and `geofence replay` (the same pipeline: fix
/// filter, motion check, hysteresis band, outbox), without the daemon's control socket and hooks.
///
/// ```swift
/// let monitor = try GeofenceMonitor(
///     source: JSONLineSource(path: "drive.jsonl"), store: .sqlite(directory: "/var/lib/my-app/geofence"))
/// try await monitor.add(Region(id: "depot", center: Coordinate(latitude: 51.5, longitude: -0.12), radius: 200))
/// for try await event in monitor.events() { print(event.json) }
/// ```
///
/// Lifecycle: `events(after:)` starts the one session a monitor has with its source, and the session lasts as
/// long as the sequence is consumed. Cancelling the consuming task stops it: the source is stopped, monitoring
/// pauses, and what was decided is committed. A source that ends by itself (the end of a file) ends the
/// sequence once every event it caused is delivered.
///
/// Guarantees: an event is yielded only after the transaction that stored it has committed; `events(after:)`
/// with the id of the last event a consumer handled resumes with every committed event after it, none
/// skipped (at least once across restarts and crashes, with the SQLite store).
public actor GeofenceMonitor {
    /// Where regions, the monitor's state and the event outbox are kept.
    public enum Store: Sendable, Equatable {
        /// A SQLite file in this directory (created, mode 0700): durable across restarts and crashes. The
        /// directory is the monitor's alone while it exists, as a `geofence run` state directory is the
        /// engine's (a second monitor or engine on it is refused).
        case sqlite(directory: String)
        /// Memory only: for tests, and for embedders who need no durability.
        case inMemory
    }

    /// How fixes are judged; the defaults are `geofence run`'s.
    public struct Configuration: Sendable {
        /// Which fixes are good enough to act on (accuracy, speed, time skew); `geofence run`'s defaults.
        public var filter = FixFilterConfiguration()
        /// The decision rule: the hysteresis band, the outlier test, gaps and the `determined` vicinity;
        /// `geofence run`'s defaults.
        public var monitor = MonitorConfiguration()
        /// A vehicle not heard from for this long leaves memory, its state kept in the store until its next
        /// fix; nil keeps every vehicle in memory.
        public var idleLimit: Duration? = .seconds(86_400)
        /// How often regions changed by another process on the same store (the `geofence` CLI) are followed,
        /// and expiry is looked at.
        public var syncInterval: Duration = .milliseconds(500)
        /// Where the engine's log lines go (nil: nowhere).
        public var logger: Logger?

        /// `geofence run`'s defaults: an idle limit of a day, a sync interval of 0.5 s, no logger.
        public init() {}
    }

    /// Why the monitor cannot do what it was asked.
    public enum MonitorError: Error, Sendable, Equatable, CustomStringConvertible {
        /// `events(after:)` was called while another sequence is being consumed.
        case alreadyMonitoring
        /// The source's one session is over (it was stopped, or it ended); make a new monitor with a new source.
        case sessionEnded
        /// `events(after:)` was given an id the outbox does not hold.
        case unknownEvent(String)

        public var description: String {
            switch self {
            case .alreadyMonitoring: "the monitor's events are already being consumed (one consumer at a time)"
            case .sessionEnded: "this monitor's session with its source is over: make a new monitor with a new source"
            case .unknownEvent(let id): "no event with id \"\(id)\" in the outbox"
            }
        }
    }

    private let source: any LocationSource
    private let store: StateStore
    /// The SQLite store's directory (nil: in memory), locked while a session runs.
    private let directory: String?
    private var lock: DaemonLock?
    private let service: MonitorService
    private let executor: ThreadExecutor

    private let configuration: Configuration
    private let waker = Waker()
    private var loaded = false
    private var state = SessionState.idle

    private enum SessionState { case idle, running, ended }

    /// - Parameters:
    ///   - source: where fixes come from; started by `events(after:)`, stopped when its consumer stops.
    ///   - store: `.sqlite(directory:)` for durability, `.inMemory` for none.
    ///   - clock: the wall and monotonic clocks the engine reads (event times, expiry, epoch assembly).
    public init(
        source: any LocationSource, store: Store, configuration: Configuration = .init(),
        clock: any GeofenceClock = SystemClock()
    ) throws {
        switch store {
        case .sqlite(let directory):
            self.store = try StateStore(directory: directory)
            self.directory = directory
        case .inMemory:
            self.store = try StateStore.inMemory()
            directory = nil
        }
        self.source = source
        self.configuration = configuration
        executor = ThreadExecutor(name: "geofence.embedded-monitor")
        let pipeline = FixPipeline(
            store: self.store, filter: configuration.filter, monitor: configuration.monitor,
            clock: { clock.now() }, monotonic: { clock.uptime() })
        pipeline.idleLimit = configuration.idleLimit.map(Self.seconds)
        let waker = self.waker
        service = MonitorService(
            store: self.store, pipeline: pipeline, logger: configuration.logger ?? Logger(minimum: .error) { _ in },
            executor: executor, sourceLabel: source.label, sourceStatus: { source.status },
            policy: AccessPolicy(daemonUID: getuid()), maxRegions: nil, onServices: { _ in },
            onEvents: { waker.wake() }, clock: clock, commitMark: MQTTSource.commitMark(for: source))
    }

    deinit {
        executor.finish()
    }

    /// A duration in seconds, for the engine's settings (which count in seconds): negative ones count as 0,
    /// and longer than 100 years (the longest duration the regions format takes) as 100 years.
    package static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return min(max(0, Double(seconds) + Double(attoseconds) / 1e18), DurationParser.maximumSeconds)
    }

    // MARK: Regions

    /// Adds a region, durably; a session that runs monitors it from its next fix.
    /// Throws if a region with this id exists.
    public func add(_ region: Region) async throws {
        try await service.add(region)
        if loaded { await service.apply(.regions) }
    }

    /// Removes a region (its states go with it); returns whether there was one.
    @discardableResult
    public func remove(id: String) async throws -> Bool {
        let removed = try await service.remove(id: id)
        if removed && loaded { await service.apply(.regions) }
        return removed
    }

    /// Every region in the store, in the order they were added.
    public func regions() async throws -> [Region] {
        try await service.storedRegions()
    }

    /// The state of `subject` in the region `regionID` as of the last commit, as Core Location's
    /// `CLMonitor.record(for:)` answers: `inside` or `outside`, `unknown` while no fix of the subject has
    /// been conclusive about the region; nil when there is no such region. Every event already yielded is
    /// reflected (it was committed with the state it reports); works with or without a session.
    public func state(of regionID: String, subject: String) throws -> RegionState? {
        guard let stored = try store.regions.find(id: VisibleName.normalized(regionID)) else { return nil }
        let states = try store.monitorState.states(regionSeq: stored.seq)
        return states.first(where: { $0.subject == subject })?.record.state ?? .unknown
    }

    // MARK: Status

    /// The four questions, answered for this monitor's source: what the hardware is, whether Location
    /// Services are on, whether this process may use them, and whether usable fixes arrive.
    public func status() async throws -> MonitorStatus {
        let health = await service.condition
        let servicesOn = loaded ? await service.servicesOn : try store.permissions.servicesOn()
        let policy = AccessPolicy(daemonUID: getuid())
        let uid = getuid()
        let authorization = policy.effectiveStatus(
            uid: uid, recorded: try store.permissions.find(uid: uid)?.status, servicesOn: servicesOn)
        return MonitorStatus(
            capabilities: await service.capabilities, servicesOn: servicesOn, authorization: authorization,
            source: source.label, connected: health.connected, reason: health.reason,
            liveness: liveness(health.liveness),
            livenessReason: health.livenessReason, sourceStatus: source.status,
            regions: try store.regions.count(), monitoring: state == .running)
    }

    /// The session's liveness: the source's while it runs, `notStarted` before and `ended` after.
    private func liveness(_ reported: Liveness) -> MonitorStatus.Liveness {
        switch state {
        case .idle: .notStarted
        case .running: MonitorStatus.Liveness(reported)
        case .ended: .ended
        }
    }

    // MARK: Events

    /// Deletes from the outbox the events committed before the event `id`, once the program has handled
    /// them: without it, a store only a library uses keeps every event for as long as it runs. The event
    /// `id` itself stays, so `events(after: id)` still resumes there. Events something else in the store
    /// still needs stay too: one waiting for a hook's delivery, or for a hook dispatcher to pass it while
    /// hooks are defined (a later `geofence run` on the store runs them), or for a sink's cursor. Returns how
    /// many were deleted; works with or without a session. An unknown id throws `unknownEvent`.
    @discardableResult
    public func pruneEvents(before id: String) throws -> Int {
        guard let seq = try store.outbox.seq(id: id) else { throw MonitorError.unknownEvent(id) }
        return try store.outbox.prune(beforeSeq: seq)
    }

    /// The committed events (region events and state events), oldest first, from just after the event `id`
    /// (nil: only those committed from now on). Starts the session with the source; cancelling the consuming
    /// task (or leaving the loop) ends it. One consumer at a time.
    ///
    /// The sequence holds at most 256 events the consumer has not taken: a slow consumer holds the reading of
    /// the outbox back (the events wait there, committed), never the engine.
    public nonisolated func events(after id: String? = nil) -> AsyncThrowingStream<GeofenceEvent, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: GeofenceEvent.self, bufferingPolicy: .bufferingOldest(256))
        let task = Task {
            do {
                try await self.session(after: id, continuation)
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    private func session(
        after id: String?, _ continuation: AsyncThrowingStream<GeofenceEvent, any Error>.Continuation
    ) async throws {
        switch state {
        case .running: throw MonitorError.alreadyMonitoring
        case .ended: throw MonitorError.sessionEnded
        case .idle: break
        }
        // What can fail before the source starts leaves the monitor as it was (a wrong id can be corrected).
        let cursor: Int64
        if let id {
            guard let seq = try store.outbox.seq(id: id) else { throw MonitorError.unknownEvent(id) }
            cursor = seq
        } else {
            cursor = try store.outbox.latestSeq()
        }
        // One engine on a store at a time, as for `geofence run`: held while the session runs.
        let lock = try directory.map { try DaemonLock(directory: $0) }
        if !loaded {
            _ = try await service.load()
            loaded = true
        }
        state = .running
        self.lock = lock
        defer {
            state = .ended
            self.lock = nil
        }
        let wakes = waker.begin()
        let (service, source) = (self.service, self.source)
        let interval = Self.seconds(configuration.syncInterval)
        source.start()
        // The daemon's services, in a group of their own: the source's reports, then the ticks. Not a child of
        // this task: cancelling the consumer must not cut the source's consumer short. It stops the source
        // instead (`FixIntakeService.stop`), every report the source handed over is judged, as the daemon does
        // at a stop, and the group then stops the ticks.
        let (ticks, intake) = service.services(source: source, interval: interval)
        let group = ServiceGroup([ticks, intake], deadline: .seconds(5))
        let running = Task { await group.run() }
        let draining = Task { () async throws -> Void in
            var position = cursor
            /// Yields what the outbox holds after `position`; false once the consumer has gone.
            func drain() async throws -> Bool {
                while true {
                    let batch = try await service.outbox(after: position, limit: 256)
                    guard !batch.isEmpty else { return true }
                    for stored in batch {
                        let event = GeofenceEvent(stored)
                        delivery: while true {
                            switch continuation.yield(event) {
                            case .enqueued: break delivery
                            case .dropped: try? await Task.sleep(for: .milliseconds(5))  // full: the consumer is behind
                            case .terminated: return false
                            @unknown default: return false
                            }
                        }
                        position = stored.seq
                    }
                }
            }
            do {
                guard try await drain() else { return }
                for await _ in wakes { guard try await drain() else { return } }
                _ = try await drain()
            } catch {
                // The outbox cannot be read: the session ends, and the source with it.
                await source.stop()
                throw error
            }
        }
        _ = await withTaskCancellationHandler {
            await running.value
        } onCancel: {
            Task { await intake.stop() }
        }
        // The source's reports are all judged and the ticks stopped. The last commit is made, and the reader's
        // last pass yields what that commit (or any tick before it) added.
        let shortfall = await service.shutdown()
        waker.end()
        // The group stopped the source (`FixIntakeService.stop`), once.
        try await draining.value
        // The store refused the last commit: what was not committed, and what to send again.
        if let shortfall { throw UncommittedAtStop(shortfall, source: source.label) }
    }
}

/// Wakes the session's outbox reader after each commit (at most one wake-up waits: it reads everything).
private final class Waker: Sendable {
    private let continuation = Mutex<AsyncStream<Void>.Continuation?>(nil)

    func begin() -> AsyncStream<Void> {
        let (stream, c) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        continuation.withLock { $0 = c }
        return stream
    }

    func wake() { _ = continuation.withLock { $0 }?.yield() }

    /// No more commits: the reader drains once more and ends.
    func end() { continuation.withLock { $0 }?.finish() }
}

/// The four questions, answered for a monitor's source.
public struct MonitorStatus: Sendable, Equatable {
    /// Whether usable fixes arrive (fourth question).
    public enum Liveness: String, Sendable {
        /// The source's liveness, while a session runs.
        init(_ liveness: GeofenceCore.Liveness) {
            switch liveness {
            case .awaitingFirstFix: self = .awaitingFirstFix
            case .receiving: self = .receiving
            case .silent: self = .silent
            case .lost: self = .lost
            }
        }

        /// No session has started.
        case notStarted = "not-started"
        /// Started; the first usable fix has not come (yet: the deadline has not passed).
        case awaitingFirstFix = "awaiting-first-fix"
        /// Usable fixes are arriving within the staleness limit.
        case receiving
        /// No usable fix came before the first-fix deadline.
        case silent
        /// Usable fixes stopped arriving for longer than the staleness limit.
        case lost
        /// The session is over (its consumer left, or the source ended): nothing is read any more.
        case ended
    }

    /// What the hardware is and can report (first question); nil when the source has not said (fleet sources
    /// cannot tell).
    public var capabilities: CapabilitySnapshot?
    /// Whether Location Services are on (second question).
    public var servicesOn: Bool
    /// This process's effective authorization (third question): `denied` while services are off.
    public var authorization: AuthorizationStatus
    /// Where the fixes come from.
    public var source: String
    /// Whether the source reached what it reads from (nil: it has not said).
    public var connected: Bool?
    /// Why it is not connected.
    public var reason: String?
    /// Whether usable fixes arrive (fourth question): the session's watchdog, or `notStarted`/`ended`.
    public var liveness: Liveness
    /// Why fixes are not arriving, in the source's terms.
    public var livenessReason: String?
    /// A fleet source's own account of itself (lines, messages, unusable ones by reason).
    public var sourceStatus: SourceStatus?
    /// Regions in the store.
    public var regions: Int
    /// Whether a session with the source is running.
    public var monitoring: Bool
}
