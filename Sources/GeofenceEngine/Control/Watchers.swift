import Foundation
import GeofenceStore

/// `geofence watch`: every event the outbox receives (region events and state changes alike), streamed
/// to the connections that asked, in outbox order.
///
/// It follows the outbox rather than hooking into each producer, so nothing can be missed: the monitor's
/// events, the control handler's switch and permission events and the reconciler's status changes all
/// arrive the same way. `wake()` makes it look at once; otherwise it looks every 200 ms while anyone
/// watches.
public final class Watchers: @unchecked Sendable {
    // @unchecked: `connections` and `cursor` are only touched under `lock`; `poke` is a semaphore.
    private let store: StateStore
    private let lock = NSLock()
    private var connections: [ControlConnection] = []
    private var cursor: Int64 = 0
    private let poke = DispatchSemaphore(value: 0)
    private var running = false

    public init(store: StateStore) {
        self.store = store
    }

    /// Starts following from the end of the outbox as it is now.
    public func start() {
        let latest = (try? store.latestEventSeq()) ?? 0
        lock.withLock {
            cursor = latest
            running = true
        }
        let thread = Thread { self.loop() }
        thread.name = "geofence.watch"
        thread.start()
    }

    public func stop() {
        lock.withLock { running = false }
        poke.signal()
    }

    public func add(_ connection: ControlConnection) {
        lock.withLock { connections.append(connection) }
    }

    public func wake() { poke.signal() }

    public var count: Int { lock.withLock { connections.count } }

    private func loop() {
        while lock.withLock({ running }) {
            _ = poke.wait(timeout: .now() + .milliseconds(200))
            let (watching, from) = lock.withLock { (connections.filter(\.isOpen), cursor) }
            guard let events = try? store.events(after: from, limit: 1000), let last = events.last else {
                lock.withLock { connections = watching }
                continue
            }
            for connection in watching {
                for event in events where !connection.send(event.body) { break }
            }
            lock.withLock {
                cursor = last.seq
                connections = connections.filter(\.isOpen)
            }
            if events.count == 1000 { poke.signal() }
        }
    }
}
