import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore
import GeofenceTestSupport
import Synchronization
import Testing

/// The sink seam on its own: a `SinkRunner` over an in-memory store, with sinks that acknowledge what a test
/// tells them to, and each of the places a sink keeps its cursor.
@Suite("sink runner") struct SinkRunnerTests {
    /// A sink that records every offer and acknowledges at most `accepting` events of each.
    final class TestSink: EventSink {
        let id: String
        let accepting: Int
        private let offers = Mutex<[[Int64]]>([])
        private let types: Set<String>?

        init(id: String = "test", accepting: Int = .max, types: Set<String>? = nil) {
            self.id = id
            self.accepting = accepting
            self.types = types
        }

        func accepts(eventType: String) -> Bool { types?.contains(eventType) ?? true }
        func open() async throws {}
        func close() async {}
        var health: SinkHealth { SinkHealth(address: "test", connected: true) }

        func deliver(_ events: [StoredEvent]) async throws -> Int {
            offers.withLock { $0.append(events.map(\.seq)) }
            return min(accepting, events.count)
        }

        var offered: [[Int64]] { offers.withLock { $0 } }
    }

    static func record(_ store: StateStore, _ states: [String]) throws {
        var ids = EventIDGenerator()
        try store.outbox.append(
            states.map { StateEvent(id: ids.next(now: Date()), type: .source, time: Date(), state: $0, reason: "") })
    }

    /// Runs `runner` until `done` holds (at most 10 s), then stops it.
    static func run(_ runner: SinkRunner, until done: @escaping @Sendable () throws -> Bool) async throws {
        let task = Task { await runner.run() }
        _ = try await Wait.until(timeout: 10, every: .milliseconds(5), done)
        task.cancel()
        await task.value
    }

    @Test("a sink that acknowledges part of each batch gets the rest offered again: every event once, in order")
    func partialAcknowledgements() async throws {
        let store = try StateStore.inMemory()
        try Self.record(store, (1...25).map { "s\($0)" })
        let sink = TestSink(accepting: 4)
        let cursor = MemorySinkCursor(at: 0)
        let runner = SinkRunner(sink: sink, store: store, logger: Logger(), cursor: cursor, batchSize: 10)
        try await Self.run(runner) { try cursor.position() == 25 }
        #expect(try cursor.position() == 25)
        // Each offer starts where the last acknowledgement ended: nothing skipped, nothing offered twice
        // after it was acknowledged.
        let firsts = sink.offered.map { $0.first ?? 0 }
        #expect(firsts == [1, 5, 9, 13, 17, 21, 25], "\(sink.offered)")
        #expect(runner.statistics.delivered == 25)
    }

    @Test("the cursor moves over the events a sink's filter skips, and never back")
    func filterAndForwardOnly() async throws {
        let store = try StateStore.inMemory()
        try Self.record(store, ["a", "b", "c"])
        var ids = EventIDGenerator()
        try store.outbox.append([
            StateEvent(id: ids.next(now: Date()), type: .services, time: Date(), state: "off", reason: "")
        ])
        let sink = TestSink(types: ["services"])
        let cursor = MemorySinkCursor(at: 0)
        let runner = SinkRunner(sink: sink, store: store, logger: Logger(), cursor: cursor)
        try await Self.run(runner) { try cursor.position() == 4 }
        #expect(sink.offered == [[4]], "only the services event was offered")
        try cursor.advance(to: 2)
        #expect(try cursor.position() == 4, "a stale runner cannot move it back")
    }

    @Test("a configured sink's cursor is its row in sink_cursors, and a restarted runner resumes from it")
    func storedCursorResumes() async throws {
        let store = try StateStore.inMemory()
        try store.sinks.add(SinkDefinition(id: "bus", url: "mqtt://h:1883", topic: "t"))
        try Self.record(store, ["a", "b", "c"])
        let first = TestSink(id: "bus")
        try await Self.run(SinkRunner(sink: first, store: store, logger: Logger())) {
            try store.sinks.cursor("bus") == 3
        }
        #expect(first.offered == [[1, 2, 3]])
        try Self.record(store, ["d"])
        let second = TestSink(id: "bus")
        try await Self.run(SinkRunner(sink: second, store: store, logger: Logger())) {
            try store.sinks.cursor("bus") == 4
        }
        #expect(second.offered == [[4]], "the second runner began after the first one's acknowledgements")
    }

    @Test("the hooks' sink makes each event's deliveries once, with the cursor in hook_dispatch")
    func hookDispatchSink() async throws {
        let store = try StateStore.inMemory()
        try store.deliveries.addHook(GlobalHook(id: "h", events: [], command: "true", createdAt: Date()))
        try Self.record(store, ["a", "b"])
        let told = Mutex<[(Int, Int64, String)]>([])
        let worker = StoreWorker(name: "geofence.hookdb")
        let sink = HookDispatchSink(store: store, runAsCreators: false, worker: worker) { created, through in
            told.withLock { $0.append((created.count, through, currentThreadName())) }
        }
        let cursor = HookDispatchCursor(store: store)
        try await Self.run(SinkRunner(sink: sink, store: store, logger: Logger(), cursor: cursor, worker: worker)) {
            try cursor.position() == 2
        }
        #expect(told.withLock { $0.map(\.0) } == [2] && told.withLock { $0.map(\.1) } == [2])
        #expect(told.withLock { $0.map(\.2) } == ["geofence.hookdb"], "the commit ran on the worker's thread")
        // Offered again (a crash between the commit and the runner's own step): nothing is made twice.
        _ = try await sink.deliver(store.outbox.events(after: 0, limit: 10))
        #expect(try store.deliveries.eventDeliveries(filter: .all).flatMap(\.deliveries).count == 2)
    }

    /// A cursor that notes the thread each of its calls runs on.
    final class ThreadNotingCursor: SinkCursor {
        let inner = MemorySinkCursor(at: 0)
        let threads = Mutex<Set<String>>([])
        func position() throws -> Int64 {
            threads.withLock { _ = $0.insert(currentThreadName()) }
            return try inner.position()
        }
        func advance(to seq: Int64) throws {
            threads.withLock { _ = $0.insert(currentThreadName()) }
            try inner.advance(to: seq)
        }
    }

    @Test("a sink runner's store work (outbox reads, its cursor) runs on its worker's thread, not the pool's")
    func storeWorkOffThePool() async throws {
        let store = try StateStore.inMemory()
        try Self.record(store, ["a", "b", "c"])
        let cursor = ThreadNotingCursor()
        let runner = SinkRunner(sink: TestSink(), store: store, logger: Logger(), cursor: cursor)
        try await Self.run(runner) { try cursor.inner.position() == 3 }
        #expect(try cursor.inner.position() == 3)
        #expect(cursor.threads.withLock { $0 } == ["geofence.sink"])
    }
}

/// The calling thread's name as the kernel has it (what `ThreadExecutor` sets, what `ps -L` shows).
func currentThreadName() -> String {
    let text = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
    return text.trimmingCharacters(in: .whitespacesAndNewlines)
}
