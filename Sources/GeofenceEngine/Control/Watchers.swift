import Foundation
import GeofenceStore
import GeofenceSystem
import Synchronization

/// `geofence watch`: every event the outbox receives (region events and state changes alike), streamed
/// to the connections that asked, in outbox order.
///
/// Each watcher is a sink of the outbox (`WatchSink`, driven by a `SinkRunner` as every sink is) with its
/// place kept in memory (`MemorySinkCursor`): it sees what is committed from the moment it connects, and
/// nothing is owed to it after it leaves. Following the outbox rather than hooking into each producer means
/// nothing can be missed: the monitor's events, the control handler's switch and permission events and the
/// reconciler's status changes all arrive the same way. `wake()` makes every watcher look at once;
/// otherwise each looks every 200 ms (an event another process committed).
///
/// Nothing here ever waits for a watcher. Each has at most `bufferLimit` bytes of events in memory (its
/// sink takes no more, and the rest waits in the outbox, the durable buffer), of which one thread sends it
/// what its socket takes now. One that is slow falls behind in the outbox and catches up; one that takes
/// nothing for `stallLimit` seconds while events wait for it is cut off: sent no more events, then a last
/// line saying why if it reads again within 30 s, then closed.
package final class Watchers: @unchecked Sendable {
    // @unchecked: `watchers` and `running` are only touched under `lock`; `poke` is a semaphore; a
    // watcher's buffer under its own lock.
    private let store: StateStore
    private let logger: Logger
    /// Bytes of events one watcher holds in memory at most (more wait in the outbox).
    package let bufferLimit: Int
    /// Seconds a watcher with events waiting may take none of them before it is cut off.
    package let stallLimit: Double
    private let lock = NSLock()
    private var watchers: [Watcher] = []
    private let poke = DispatchSemaphore(value: 0)
    private var running = false

    /// One watching connection: its sink, its runner, and the bytes it has not taken yet.
    private final class Watcher: @unchecked Sendable {
        // @unchecked: `buffer` is only touched under its mutex; the rest is set once, or only by the send
        // thread (`progressed`, `midLine`, `cutAt`).
        let connection: ControlConnection
        /// Its sink, which holds the buffer.
        let sink: WatchSink
        var runner: SinkRunner?
        var task: Task<Void, Never>?
        /// The first line of the buffer has been partly sent.
        var midLine = false
        /// When it last took a byte, or had nothing waiting.
        var progressed = MonotonicClock.seconds()
        /// When it was cut off: from then on its buffer is only the line saying why, sent if it reads again.
        var cutAt: Double?

        init(_ connection: ControlConnection, sink: WatchSink) {
            self.connection = connection
            self.sink = sink
        }
    }

    package init(store: StateStore, logger: Logger = Logger(), bufferLimit: Int = 1 << 20, stallLimit: Double = 5) {
        self.store = store
        self.logger = logger
        self.bufferLimit = bufferLimit
        self.stallLimit = stallLimit
    }

    package func start() {
        lock.withLock { running = true }
        let thread = Thread { self.loop() }
        thread.name = "geofence.watch"
        thread.start()
    }

    package func stop() {
        let all = lock.withLock {
            running = false
            return watchers
        }
        for watcher in all { watcher.task?.cancel() }
        poke.signal()
    }

    /// Starts streaming to `connection` the events recorded from now on.
    package func add(_ connection: ControlConnection) {
        let latest = (try? store.outbox.latestSeq()) ?? 0
        let sink = WatchSink(id: "watch (pid \(connection.peer.pid))", limit: bufferLimit, poke: poke)
        let watcher = Watcher(connection, sink: sink)
        let runner = SinkRunner(
            sink: sink, store: store, logger: logger, cursor: MemorySinkCursor(at: latest), batchSize: 1_000,
            pollInterval: 0.2)
        watcher.runner = runner
        watcher.task = Task { await runner.run() }
        lock.withLock { watchers.append(watcher) }
        poke.signal()
    }

    package func wake() {
        for watcher in lock.withLock({ watchers }) { watcher.runner?.wake() }
    }

    package var count: Int { lock.withLock { watchers.count } }

    /// The send thread: gives each watcher what its socket takes now, and cuts off the ones that stall.
    private func loop() {
        while lock.withLock({ running }) {
            let behind = lock.withLock { watchers.contains { w in w.sink.buffer.withLock { !$0.bytes.isEmpty } } }
            // Someone is behind: try again soon, not only when events come.
            _ = poke.wait(timeout: .now() + .milliseconds(behind ? 20 : 200))
            let watching = lock.withLock { watchers.filter(\.connection.isOpen) }
            let now = MonotonicClock.seconds()
            for watcher in watching {
                watcher.sink.buffer.withLock { buffer in
                    if let cutAt = watcher.cutAt {
                        // Its last line, if it reads again soon; then (or anyway, after a while) it is closed.
                        if let sent = watcher.connection.sendAvailable(buffer.bytes) { buffer.bytes.removeFirst(sent) }
                        if buffer.bytes.isEmpty || now - cutAt > farewellLimit { watcher.connection.cutOff(last: []) }
                        return
                    }
                    if buffer.bytes.isEmpty {
                        watcher.progressed = now
                        return
                    }
                    guard let sent = watcher.connection.sendAvailable(buffer.bytes) else { return }
                    if sent > 0 {
                        watcher.midLine = buffer.bytes[sent - 1] != 10
                        buffer.bytes.removeFirst(sent)
                        watcher.progressed = now
                    } else if now - watcher.progressed > stallLimit {
                        cutOff(watcher, buffer: &buffer, now: now)
                    }
                }
                watcher.sink.room.ring()
            }
            let gone = lock.withLock {
                let (open, closed) = (watchers.filter(\.connection.isOpen), watchers.filter { !$0.connection.isOpen })
                watchers = open
                return closed
            }
            for watcher in gone { watcher.task?.cancel() }
        }
    }

    /// How long a watcher that was cut off is given to take the line that says why.
    private let farewellLimit: Double = 30

    /// Sends it no more events; what it is still sent is the rest of the line it has the start of, and a
    /// line saying why (once its socket takes them).
    private func cutOff(_ watcher: Watcher, buffer: inout WatchBuffer, now: Double) {
        var last: [UInt8] = []
        // End the line the client has the start of, so that the reason is a line of its own.
        if watcher.midLine, let newline = buffer.bytes.firstIndex(of: 10) {
            last += buffer.bytes[...newline]
        }
        let reason = ControlError(
            .busy,
            "this watcher took no events for \(Int(stallLimit)) s while they waited for it and was cut off: "
                + "read them as they come, and catch up with `geofence events`")
        last += ControlResponse(id: nil, result: .failure(reason)).line.utf8
        last.append(10)
        buffer.bytes = last
        buffer.closed = true
        watcher.cutAt = now
        watcher.task?.cancel()
    }
}

/// The bytes of events a watcher has not taken yet.
struct WatchBuffer: Sendable {
    var bytes: [UInt8] = []
    /// Cut off: its sink takes no more.
    var closed = false
}

/// One watcher as a sink: "delivering" an event is putting its line in the watcher's buffer, which the
/// send thread empties into the socket. It takes what fits under the buffer's limit (at least one event
/// when the buffer is empty) and, when nothing fits, waits for room: so a slow watcher holds its place
/// in the outbox, not events in memory.
final class WatchSink: EventSink {
    let id: String
    /// What the watcher has not taken yet.
    let buffer = Mutex(WatchBuffer())
    /// Rung when the send thread took bytes out of the buffer (the sink may put more in).
    let room = Doorbell()
    private let limit: Int
    /// Tells the send thread there is something to send.
    private let poke: DispatchSemaphore

    init(id: String, limit: Int, poke: DispatchSemaphore) {
        self.id = id
        self.limit = limit
        self.poke = poke
    }

    func accepts(eventType: String) -> Bool { true }
    func open() async throws {}
    func close() async {}
    var health: SinkHealth { SinkHealth(address: "watch", connected: true) }

    func deliver(_ events: [StoredEvent]) async throws -> Int {
        while !Task.isCancelled {
            let taken = buffer.withLock { b -> Int in
                if b.closed { return 0 }
                var taken = 0
                for event in events {
                    let size = event.body.utf8.count + 1
                    if !b.bytes.isEmpty && b.bytes.count + size > limit { break }
                    b.bytes += event.body.utf8
                    b.bytes.append(10)
                    taken += 1
                }
                return taken
            }
            if taken > 0 {
                poke.signal()
                return taken
            }
            await room.wait(seconds: 1)
        }
        return 0
    }
}
