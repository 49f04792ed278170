import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Glibc
import Synchronization
import Testing

// An import stored part by part in a transaction of its own (the engine's import in parts). A real SQLite
// file, nothing mocked.

private func withStore(_ body: (StateStore) throws -> Void) throws {
    try withTemporaryDirectory("geofence-import-tests") { directory in
        try body(try StateStore(directory: directory.path))
    }
}

private func regions(_ ids: Range<Int>, prefix: String = "r", radius: Double = 100) throws -> [Region] {
    try ids.map { try Region(id: "\(prefix)\($0)", center: Coordinate(latitude: 10, longitude: 20), radius: radius) }
}

private func event(_ id: String) -> StateEvent {
    StateEvent(id: id, type: .source, time: Date(), state: "lost")
}

/// Set once by another thread.
private final class Flag: Sendable {
    private let value = Atomic(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}

@Suite struct RegionImportTests {
    @Test func partsAreStoredTogetherAndLoggedAsOneChange() throws {
        try withStore { store in
            try store.regions.add(try Region(id: "before", center: Coordinate(latitude: 1, longitude: 2), radius: 5))
            let generation = try store.regions.generation()
            let load = try RegionImport(store: store, replace: false)
            for part in 0..<5 { try load.add(try regions(part * 1000..<(part + 1) * 1000)) }
            // Nothing shows before the commit.
            #expect(try store.regions.count() == 1)
            try load.commit()
            #expect(load.count == 5000)
            #expect(try store.regions.count() == 5001)
            let changes = try store.regions.changes(after: generation).changes
            #expect(changes.count == 1)
            #expect(changes.first.map { $0.lastSeq - $0.seq + 1 } == 5000)
        }
    }

    @Test func aRollbackOrADroppedImportStoresNothingAndFreesTheLock() throws {
        try withStore { store in
            let load = try RegionImport(store: store, replace: false)
            try load.add(try regions(0..<100))
            load.rollback()
            load.rollback()
            #expect(throws: DatabaseError.self) { try load.commit() }
            #expect(try store.regions.count() == 0)
            // Released without an end: rolled back, and the lock with it (the next import would wait, then
            // fail with isBusy, if it were kept).
            do {
                let forgotten = try RegionImport(store: store, replace: false)
                try forgotten.add(try regions(0..<100))
            }
            let next = try RegionImport(store: store, replace: false)
            try next.add(try regions(0..<10))
            try next.commit()
            #expect(try store.regions.count() == 10)
        }
    }

    @Test func existingIdsRefuseTheWholeImportUnlessReplaced() throws {
        try withStore { store in
            try store.regions.addAll(try regions(0..<10))
            let load = try RegionImport(store: store, replace: false)
            try load.add(try regions(5..<15))
            try load.add(try regions(15..<20))
            #expect(throws: StoreError.duplicateRegions(["r5", "r6", "r7", "r8", "r9"])) { try load.commit() }
            #expect(try store.regions.count() == 10)

            let replacing = try RegionImport(store: store, replace: true)
            try replacing.add(try regions(5..<15, radius: 250))
            try replacing.commit()
            #expect(try store.regions.count() == 15)
            #expect(try store.regions.find(id: "r7")?.region.radius == 250)
            #expect(try store.regions.find(id: "r2")?.region.radius == 100)
        }
    }

    @Test func otherWritesWaitForTheImportAndAreNotPartOfIt() throws {
        try withStore { store in
            let load = try RegionImport(store: store, replace: false)
            try load.add(try regions(0..<100))
            // The store's own connection writes while the import holds the lock: it waits (busy timeout).
            let written = Flag()
            let writer = Thread {
                do {
                    try store.outbox.append([event("0193a4c2-0000-7000-8000-000000000001")])
                    written.set()
                } catch {
                    Issue.record("the event was not written: \(error)")
                }
            }
            writer.start()
            // Shows that something does not happen (the writer stays blocked): no signal, only time.
            usleep(300_000)
            #expect(!written.isSet, "it waits for the import's lock")
            load.rollback()
            _ = Wait.blocking(timeout: 10) { written.isSet }
            // The import's rollback undid none of it.
            #expect(written.isSet)
            #expect(try store.outbox.count() == 1)
            #expect(try store.regions.count() == 0)
        }
    }

    @Test func anImportWaitsForAnotherAndFailsBusyPastTheTimeout() throws {
        try withStore { store in
            let first = try RegionImport(store: store, replace: false)
            let started = Date()
            let error = #expect(throws: DatabaseError.self) { _ = try RegionImport(store: store, replace: false) }
            #expect(error?.isBusy == true)
            #expect(Date().timeIntervalSince(started) > 4)
            first.rollback()
        }
    }
}
