import Foundation
import GeofenceStore
import GeofenceSystem

/// `geofence watch`: every event the outbox receives (region events and state changes alike), streamed
/// to the connections that asked, in outbox order.
///
/// It follows the outbox rather than hooking into each producer, so nothing can be missed: the monitor's
/// events, the control handler's switch and permission events and the reconciler's status changes all
/// arrive the same way. `wake()` makes it look at once; otherwise it looks every 200 ms while anyone
/// watches.
///
/// Nothing here ever waits for a watcher. Each has its own place in the outbox (the durable buffer) and at
/// most `bufferLimit` bytes of events in memory, of which it gets what its socket takes now. One that is
/// slow falls behind in the outbox and catches up; one that takes nothing for `stallLimit` seconds while
/// events wait for it is cut off: sent no more events, then a last line saying why if it reads again
/// within 30 s, then closed.
public final class Watchers: @unchecked Sendable {
    // @unchecked: `watchers` and `running` are only touched under `lock`; `poke` is a semaphore; a
    // watcher's own fields only by the loop's thread (after `add`).
    private let store: StateStore
    /// Bytes of events one watcher holds in memory at most (more wait in the outbox).
    public let bufferLimit: Int
    /// Seconds a watcher with events waiting may take none of them before it is cut off.
    public let stallLimit: Double
    private let lock = NSLock()
    private var watchers: [Watcher] = []
    private let poke = DispatchSemaphore(value: 0)
    private var running = false

    /// One watching connection, where it is in the outbox and the events it has not taken yet.
    private final class Watcher: @unchecked Sendable {
        let connection: ControlConnection
        /// The last event put in `pending`.
        var cursor: Int64
        var pending: [UInt8] = []
        /// The first line of `pending` has been partly sent.
        var midLine = false
        /// When it last took a byte, or had nothing waiting.
        var progressed = MonotonicClock.seconds()
        /// When it was cut off: from then on `pending` is only the line saying why, sent if it reads again.
        var cutAt: Double?

        init(_ connection: ControlConnection, cursor: Int64) {
            self.connection = connection
            self.cursor = cursor
        }
    }

    public init(store: StateStore, bufferLimit: Int = 1 << 20, stallLimit: Double = 5) {
        self.store = store
        self.bufferLimit = bufferLimit
        self.stallLimit = stallLimit
    }

    public func start() {
        lock.withLock { running = true }
        let thread = Thread { self.loop() }
        thread.name = "geofence.watch"
        thread.start()
    }

    public func stop() {
        lock.withLock { running = false }
        poke.signal()
    }

    /// Starts streaming to `connection` the events recorded from now on.
    public func add(_ connection: ControlConnection) {
        let latest = (try? store.outbox.latestSeq()) ?? 0
        lock.withLock { watchers.append(Watcher(connection, cursor: latest)) }
        poke.signal()
    }

    public func wake() { poke.signal() }

    public var count: Int { lock.withLock { watchers.count } }

    private func loop() {
        while lock.withLock({ running }) {
            let behind = lock.withLock { watchers.contains { !$0.pending.isEmpty } }
            // Someone is behind: try again soon, not only when events come.
            _ = poke.wait(timeout: .now() + .milliseconds(behind ? 20 : 200))
            let watching = lock.withLock { watchers.filter(\.connection.isOpen) }
            // Those with room get the next events after their place, read once for all at the same place.
            var more = false
            let needy = watching.filter { $0.pending.count < bufferLimit && $0.cutAt == nil }
            for (from, group) in Dictionary(grouping: needy, by: \.cursor) {
                guard let events = try? store.outbox.events(after: from, limit: 1000), let last = events.last else {
                    continue
                }
                var batch: [UInt8] = []
                for event in events {
                    batch += event.body.utf8
                    batch.append(10)
                }
                for watcher in group {
                    watcher.pending += batch
                    watcher.cursor = last.seq
                }
                if events.count == 1000 { more = true }
            }
            let now = MonotonicClock.seconds()
            for watcher in watching {
                if let cutAt = watcher.cutAt {
                    // Its last line, if it reads again soon; then (or anyway, after a while) it is closed.
                    if let sent = watcher.connection.sendAvailable(watcher.pending) {
                        watcher.pending.removeFirst(sent)
                    }
                    if watcher.pending.isEmpty || now - cutAt > farewellLimit { watcher.connection.cutOff(last: []) }
                    continue
                }
                if watcher.pending.isEmpty {
                    watcher.progressed = now
                    continue
                }
                guard let sent = watcher.connection.sendAvailable(watcher.pending) else { continue }
                if sent > 0 {
                    watcher.midLine = watcher.pending[sent - 1] != 10
                    watcher.pending.removeFirst(sent)
                    watcher.progressed = now
                } else if now - watcher.progressed > stallLimit {
                    cutOff(watcher, now: now)
                }
            }
            lock.withLock { watchers = watchers.filter(\.connection.isOpen) }
            if more { poke.signal() }
        }
    }

    /// How long a watcher that was cut off is given to take the line that says why.
    private let farewellLimit: Double = 30

    /// Sends it no more events; what it is still sent is the rest of the line it has the start of, and a
    /// line saying why (once its socket takes them).
    private func cutOff(_ watcher: Watcher, now: Double) {
        var last: [UInt8] = []
        // End the line the client has the start of, so that the reason is a line of its own.
        if watcher.midLine, let newline = watcher.pending.firstIndex(of: 10) {
            last += watcher.pending[...newline]
        }
        let reason = ControlError(
            .busy,
            "this watcher took no events for \(Int(stallLimit)) s while they waited for it and was cut off: "
                + "read them as they come, and catch up with `geofence events`")
        last += ControlResponse(id: nil, result: .failure(reason)).line.utf8
        last.append(10)
        watcher.pending = last
        watcher.cutAt = now
    }
}
