import Foundation
import GeofenceStore
import Synchronization

/// Where a sink's place in the outbox is kept: the highest event seq it has had acknowledged (or skipped).
///
/// A `SinkRunner` reads it when it starts and moves it forward over what the sink acknowledged. Every sink
/// has one of three kinds:
/// - a configured sink (`geofence sink add`) keeps it in `sink_cursors` (`StoredSinkCursor`);
/// - the hooks keep theirs in `hook_dispatch` (`HookDispatchCursor`), where `events --pending` and
///   `events prune` read it; their sink moves it in the same transaction that creates the deliveries;
/// - a `geofence watch` keeps its place in memory (`MemorySinkCursor`): it sees the events from the moment
///   it connects to the moment it leaves, and nothing is owed to it after.
package protocol SinkCursor: Sendable {
    /// The place: events after it are still to be delivered.
    func position() throws -> Int64
    /// Moves the place forward to `seq`; never back (two runners, or a stale one, cannot undo progress).
    func advance(to seq: Int64) throws
}

/// A configured sink's cursor, in `sink_cursors`.
package struct StoredSinkCursor: SinkCursor {
    let store: StateStore
    let id: String

    package init(store: StateStore, id: String) {
        self.store = store
        self.id = id
    }

    package func position() throws -> Int64 { try store.sinks.cursor(id) ?? 0 }
    package func advance(to seq: Int64) throws { try store.sinks.advanceCursor(id, to: seq) }
}

/// The hooks' dispatch cursor, in `hook_dispatch`.
package struct HookDispatchCursor: SinkCursor {
    let store: StateStore

    package init(store: StateStore) { self.store = store }

    package func position() throws -> Int64 { try store.deliveries.hookDispatchState().cursor }
    package func advance(to seq: Int64) throws { try store.deliveries.advanceHookDispatchCursor(to: seq) }
}

/// A place kept in memory only, for a sink that lives as long as its receiver (a `watch` connection).
package final class MemorySinkCursor: SinkCursor {
    private let seq: Mutex<Int64>

    package init(at seq: Int64) { self.seq = Mutex(seq) }

    package func position() throws -> Int64 { seq.withLock { $0 } }
    package func advance(to newSeq: Int64) throws { seq.withLock { $0 = max($0, newSeq) } }
}
