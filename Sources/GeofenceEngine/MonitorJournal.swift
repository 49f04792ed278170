import Foundation
import GeofenceCore
import GeofenceStore

/// The monitor's writes that must not be lost, and its account of them: state events go to the outbox in
/// order (held here while the store refuses writes, and written with the next write that succeeds), what
/// `status` reads goes to the settings, committed events are logged and counted, and a store that refuses is
/// said once (with room made when the file system is full). Owned by the monitor's actor.
struct MonitorJournal {
    let store: StateStore
    let logger: Logger
    /// The wall clock (injected: tests run the engine on their own).
    let now: @Sendable () -> Date
    /// Called after every commit that added events to the outbox (the hook runner's wake-up).
    private let onEvents: @Sendable () -> Void
    /// The engine's one event id generator (the pipeline's, shared with the region monitor and the control
    /// handler, so ids sort in the order events were made).
    let ids: EventIDs
    /// State events not yet in the outbox because the store refused the write.
    private(set) var unsaved: [StateEvent] = []
    /// Events committed since start: region events in all, and every event by type.
    private(set) var counts = EventCounts()
    /// Whether and why the store refuses writes, and the room made for it.
    private(set) var trouble: StoreTrouble
    /// What `geofence status` reads of the engine, kept in the store's settings.
    private var recorder: StatusRecorder

    init(
        store: StateStore, logger: Logger, now: @escaping @Sendable () -> Date, space: StoreSpace?, ids: EventIDs,
        onEvents: @escaping @Sendable () -> Void
    ) {
        self.store = store
        self.ids = ids
        self.logger = logger
        self.now = now
        self.onEvents = onEvents
        trouble = StoreTrouble(space: space)
        recorder = StatusRecorder(store: store)
    }

    /// A state event, with the next id.
    func event(_ draft: SourceHealth.Draft, at time: Date) -> StateEvent {
        StateEvent(
            id: ids.next(now: time), type: draft.type, time: time, state: draft.state, subject: draft.subject,
            reason: draft.reason)
    }

    /// State events go to the outbox in order; while the store cannot be written (a full disk) they wait
    /// here and go with the next write that succeeds (every tick tries), so none is lost.
    mutating func append(_ events: [StateEvent]) {
        unsaved += events
        saveStateEvents()
    }

    mutating func saveStateEvents() {
        guard !unsaved.isEmpty else { return }
        do {
            try store.outbox.append(unsaved)
            for e in unsaved { counts.byType[e.type.rawValue, default: 0] += 1 }
            unsaved.removeAll()
            onEvents()
        } catch {
            failed(error)
        }
    }

    /// Region-status events the reconciler wrote in its own transaction: counted (as many as it made).
    mutating func countStatusEvents(_ changes: Int) {
        guard changes > 0 else { return }
        counts.byType[StateEvent.Kind.regionStatus.rawValue, default: 0] += changes <= 50 ? changes : 1
    }

    /// Region events just committed: logged, counted, and the hook runner woken.
    mutating func committed(_ events: [RegionEvent]) {
        guard !events.isEmpty else { return }
        for e in events {
            var line = "event \(e.type.rawValue) region=\(Self.quoted(e.region))"
            if let subject = e.subject { line += " subject=\(Self.quoted(subject))" }
            if let state = e.state { line += " state=\(state.rawValue)" }
            if let distance = e.distance { line += String(format: " distance=%.1fm", distance) }
            if e.inferred { line += " inferred" }
            line += " id=\(e.id)"
            logger.notice(line)
        }
        counts.regionEvents += events.count
        for e in events { counts.byType[e.type.rawValue, default: 0] += 1 }
        onEvents()
    }

    /// Wakes what reads the outbox (the reconciler's events are in it).
    func woke() { onEvents() }

    /// Writes what `status` reads; a store that refuses is said once, and the next change tries again.
    mutating func record(_ record: SourceHealth.Record, at time: Date) {
        recording {
            switch record {
            case .connected: try $0.connected()
            case .disconnected(let reason): try $0.disconnected(reason)
            case .capabilities(let snapshot): try $0.capabilities(snapshot)
            case .liveness(let liveness): try $0.liveness(liveness, at: time)
            }
        }
    }

    mutating func recording(_ write: (inout StatusRecorder) throws -> Void) {
        do {
            try write(&recorder)
        } catch {
            failed(error)
        }
    }

    /// The store refused a write: said once per cause; on a full file system, room is made.
    mutating func failed(_ error: any Error) {
        trouble.failed(error, at: now(), logger: logger)
    }

    /// Every write of the last tick went through: a store that refused is said to accept again.
    mutating func recovered() {
        trouble.recovered(logger: logger)
    }

    static func quoted(_ s: String) -> String { JSONValue.string(s).serialized() }
}

/// Events committed since the engine started (published with the metrics, and in systemd's status line).
struct EventCounts: Sendable, Equatable {
    /// Region events.
    var regionEvents = 0
    /// Every event, by type.
    var byType: [String: Int] = [:]
}

/// Whether the store refuses writes, and the room made for it when the file system is full.
struct StoreTrouble {
    /// The reserve file and the WAL's truncation (nil: an embedder's store, left as it is).
    let space: StoreSpace?
    /// Why the store refused the last write (nil: it accepts them).
    private(set) var lastError: String?
    private var lastReclaim = Date.distantPast
    /// Room is made at most this often (a checkpoint reads the whole WAL); also how often a refused commit of
    /// fixes is tried again.
    static let retryInterval = 0.5

    init(space: StoreSpace?) { self.space = space }

    mutating func failed(_ error: any Error, at time: Date, logger: Logger) {
        // Out of space: the reserve goes back to the file system and the WAL is truncated into the room it
        // made (at most twice a second: a checkpoint reads the whole WAL).
        if let space, (error as? DatabaseError)?.isFull == true,
            time.timeIntervalSince(lastReclaim) >= Self.retryInterval
        {
            lastReclaim = time
            if space.reclaim() { logger.info("the file system is full: gave back the reserve and truncated the WAL") }
        }
        let text = "\(error)"
        if text != lastError {
            logger.error("cannot write to the store: \(text); nothing is lost, retrying")
            lastError = text
        }
    }

    mutating func recovered(logger: Logger) {
        if lastError != nil {
            logger.notice("the store accepts writes again")
            lastError = nil
        }
        // Made again once there is room (a no-op while it is there).
        space?.makeReserve()
    }
}
