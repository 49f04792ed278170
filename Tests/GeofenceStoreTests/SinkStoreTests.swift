import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Glibc
import Testing

// Sinks and their cursors, on a real SQLite file in a fresh directory.
@Suite("sinks and their cursors")
struct SinkStoreTests {
    static func withStore(_ body: (StateStore) throws -> Void) throws {
        try withTemporaryDirectory("geofence-sink-tests") { directory in
            try body(try StateStore(directory: directory.path))
        }
    }

    static func append(_ store: StateStore, _ types: [StateEvent.Kind], at time: Date) throws {
        try store.outbox.append(
            types.enumerated().map { i, type in
                StateEvent(id: "e-\(time.timeIntervalSince1970)-\(i)", type: type, time: time, state: "on")
            }, now: time)
    }

    @Test("a sink starts after the newest event, its cursor only moves forward, and removal takes it away")
    func cursor() throws {
        try Self.withStore { store in
            try Self.append(store, [.services, .source], at: Date(timeIntervalSince1970: 1000))
            try store.sinks.add(SinkDefinition(id: "bus", url: "mqtt://h:1883", topic: "t", events: ["source"]))
            #expect(try store.sinks.cursor("bus") == 2)
            #expect(
                throws: SinkStoreError.duplicateSink("bus"),
                performing: { try store.sinks.add(SinkDefinition(id: "bus", url: "mqtt://h:1883", topic: "t")) })
            try Self.append(store, [.services, .source, .source], at: Date(timeIntervalSince1970: 2000))
            #expect(try store.sinks.progress().map(\.waiting) == [2], "only the types it takes")
            try store.sinks.advanceCursor("bus", to: 4)
            try store.sinks.advanceCursor("bus", to: 3)
            #expect(try store.sinks.cursor("bus") == 4)
            #expect(
                throws: SinkStoreError.sinkNotFound("nope"),
                performing: { try store.sinks.remove(ids: ["bus", "nope"]) })
            #expect(try store.sinks.all().map(\.id) == ["bus"], "all or nothing")
            #expect(try store.sinks.remove(ids: ["bus"]) == ["bus"])
            #expect(try store.sinks.cursor("bus") == nil)
        }
    }

    @Test("the hooks' cursor, already where it is advanced to, is left alone without waiting for the write lock")
    func hookCursorAdvanceTakesNoLockWhenThere() throws {
        try withTemporaryDirectory("geofence-sink-tests") { directory in
            let store = try StateStore(directory: directory.path, options: .init(busyTimeout: .milliseconds(50)))
            try Self.append(store, [.services, .source], at: Date(timeIntervalSince1970: 1000))
            _ = try store.deliveries.addHook(
                GlobalHook(id: "h", events: [], command: "true", createdAt: Date(timeIntervalSince1970: 1000)))
            _ = try store.deliveries.dispatchDeliveries(
                of: store.outbox.events(after: 0), now: Date(timeIntervalSince1970: 1000))
            #expect(try store.deliveries.hookDispatchState().cursor == 2)
            // Another connection (the engine, committing) holds the write lock.
            let holder = try DatabaseConnection(path: directory.path + "/" + StateStore.fileName)
            try holder.execute("BEGIN IMMEDIATE")
            try store.deliveries.advanceHookDispatchCursor(to: 2)
            try store.deliveries.advanceHookDispatchCursor(to: 1)
            #expect(throws: (any Error).self, "a move forward still writes, and waits for the lock") {
                try store.deliveries.advanceHookDispatchCursor(to: 3)
            }
            try holder.execute("ROLLBACK")
            try Self.append(store, [.source], at: Date(timeIntervalSince1970: 2000))
            try store.deliveries.advanceHookDispatchCursor(to: 3)
            #expect(try store.deliveries.hookDispatchState().cursor == 3)
        }
    }

    @Test("prune keeps what the slowest sink has not delivered")
    func prune() throws {
        try Self.withStore { store in
            try store.sinks.add(SinkDefinition(id: "slow", url: "mqtt://h:1883", topic: "t"))
            try Self.append(store, [.services, .services, .services], at: Date(timeIntervalSince1970: 1000))
            _ = try store.deliveries.dispatchDeliveries(
                of: store.outbox.events(after: store.deliveries.hookDispatchState().cursor, limit: 100))
            try store.sinks.advanceCursor("slow", to: 1)
            #expect(try store.outbox.prune(before: Date(timeIntervalSince1970: 5000)).events == 1)
            #expect(try store.outbox.events().map(\.seq) == [2, 3])
            try store.sinks.remove(ids: ["slow"])
            #expect(try store.outbox.prune(before: Date(timeIntervalSince1970: 5000)).events == 2)
        }
    }

    @Test("a webhook's secret file, headers, timeout and batch are kept; its dead letters are dead deliveries, once")
    func webhook() throws {
        try Self.withStore { store in
            let sink = SinkDefinition(
                id: "backend", kind: "http", url: "https://h/events", topic: "", caFile: "/etc/ca.pem",
                secretFile: "/etc/s", headers: ["Authorization: Bearer x", "X-Tenant: a"], timeout: 2.5, batch: 10,
                createdAt: Date(timeIntervalSince1970: 1000))
            try store.sinks.add(sink)
            #expect(try store.sinks.all() == [sink])
            try Self.append(store, [.services], at: Date(timeIntervalSince1970: 2000))
            let event = try #require(try store.outbox.events().last)
            for _ in 0..<2 {
                try store.deliveries.recordDeadLetter(
                    event: event, sink: "backend", target: "POST https://h/events", attempts: 3, error: "HTTP 404",
                    response: Array("no such route".utf8), responseBytes: 13, startedAt: Date(), duration: 0.01)
            }
            let dead = try store.deliveries.eventDeliveries(filter: .dead)
            #expect(dead.map(\.event.id) == [event.id])
            let letter = try #require(dead.first?.deliveries.first)
            #expect(dead.first?.deliveries.count == 1, "a second record of the same event changes nothing")
            #expect(letter.hook == "sink:backend")
            #expect(letter.lastError == "HTTP 404")
            #expect(letter.stdout == Array("no such route".utf8))
            #expect(letter.attempts == 3)
            #expect(try store.deliveries.retryDead() == 0, "not a hook's to run")
            #expect(try store.deliveries.heads().isEmpty)
        }
    }
}
