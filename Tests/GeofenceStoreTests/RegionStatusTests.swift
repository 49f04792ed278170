import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Glibc
import Testing

// "Waiting for the engine" is the engine's mark against a region's seq, not a stored status: an engine's
// start writes one row however many regions wait. A real SQLite file, nothing mocked.

private func withStore(_ body: (StateStore, String) throws -> Void) throws {
    try withTemporaryDirectory("geofence-status-tests") { directory in
        try body(try StateStore(directory: directory.path), directory.path)
    }
}

private func addFour(_ store: StateStore) throws {
    for i in 1...4 {
        _ = try store.regions.add(
            Region(id: "r\(i)", center: Coordinate(latitude: 40 + Double(i), longitude: 2), radius: 100))
    }
}

private func shown(_ store: StateStore) throws -> [String] {
    try store.regions.all().map { $0.status.description }
}

@Suite struct RegionStatusTests {
    @Test func regionsWaitUntilAnEngineTakesThemAndTheMarkOnlyRises() throws {
        try withStore { store, _ in
            try addFour(store)
            #expect(try shown(store) == Array(repeating: "pending: waiting-for-engine", count: 4))
            #expect(try store.regions.countsByStatus() == ["pending": 4])
            try store.regions.markTaken(upTo: 2)
            #expect(
                try shown(store) == [
                    "monitoring", "monitoring", "pending: waiting-for-engine", "pending: waiting-for-engine",
                ])
            #expect(try store.regions.countsByStatus() == ["monitoring": 2, "pending": 2])
            #expect(try store.regions.find(id: "r3")?.status == RegionStatus(.pending, reason: "waiting-for-engine"))
            // A lower mark (an older engine's) changes nothing.
            try store.regions.markTaken(upTo: 1)
            #expect(try store.regions.takenSeq() == 2)
            // A status the reconciler stored shows as it is, taken or not.
            let r4 = try #require(try store.regions.find(id: "r4"))
            try store.monitorState.setStatus(seq: r4.seq, RegionStatus(.suspended, reason: "services-off"))
            #expect(try store.regions.find(id: "r4")?.status.description == "suspended: services-off")
            // Waiting regions are not active: the monitor gets them by following changes.
            #expect(try store.regions.activeSeqs(upTo: 2).count == 2)
            try store.regions.markTaken(upTo: 4)
            #expect(try shown(store) == ["monitoring", "monitoring", "monitoring", "suspended: services-off"])
        }
    }

    @Test func theMarkIsWrittenWithTheMonitorsOutputsInOneTransaction() throws {
        try withStore { store, _ in
            try addFour(store)
            try store.monitorState.apply([], taken: 3)
            #expect(try store.regions.takenSeq() == 3)
            #expect(try store.regions.countsByStatus() == ["monitoring": 3, "pending": 1])
        }
    }

    @Test func aDatabaseWithStoredWaitingStatusesIsMigratedToTheMark() throws {
        try withStore { store, directory in
            try addFour(store)
            try store.regions.markTaken(upTo: 4)
            // As the previous schema left it: r3 and r4 stored as waiting, no mark.
            try store.queue.write { db in
                try db.execute(
                    "UPDATE regions SET status = 'pending', status_reason = 'waiting-for-engine' WHERE id IN ('r3', 'r4')"
                )
                try db.execute("DELETE FROM settings WHERE key = ?", [RegionRepository.takenSeqKey])
                try db.execute("DELETE FROM schema_migrations WHERE identifier = '002-engine-taken-seq'")
            }
            try store.queue.close()
            let reopened = try StateStore(directory: directory)
            #expect(
                try shown(reopened) == [
                    "monitoring", "monitoring", "pending: waiting-for-engine", "pending: waiting-for-engine",
                ])
            #expect(try reopened.regions.takenSeq() == 2)
            let stored = try reopened.queue.read { db in
                try db.scalar("SELECT count(*) FROM regions WHERE status = 'pending'", as: Int.self)
            }
            #expect(stored == 0, "no waiting status is stored any more")
        }
    }

    @Test func theReconcilersOwnerQueryProbesAnIndexInsteadOfScanning() throws {
        try withStore { store, _ in
            func plan(_ sql: String) throws -> String {
                try store.queue.read { db in
                    let parameters = sql.filter { $0 == "?" }.count
                    return try db.query(
                        "EXPLAIN QUERY PLAN " + sql, StatementArguments(Array(repeating: Int64(1), count: parameters))
                    ).map { row in
                        if case .text(let detail) = row[3] { detail } else { "" }
                    }
                    .joined(separator: "\n")
                }
            }
            let owners = try plan(RegionRepository.ownersSQL)
            #expect(!owners.contains("SCAN regions"), "\(owners)")
            #expect(owners.contains("INDEX regions_by_owner"), "\(owners)")
        }
    }

    @Test func ownersAreEveryDistinctCreator() throws {
        try withStore { store, _ in
            let owners: [UInt32?] = [1000, nil, 0, 1000, 1001, 0, 4_000_000_000]
            for (i, owner) in owners.enumerated() {
                try store.regions.add(
                    Region(id: "o\(i)", center: Coordinate(latitude: 1, longitude: 1), radius: 10, createdBy: owner))
            }
            #expect(try store.regions.owners().sorted() == [0, 1000, 1001, 4_000_000_000])
        }
    }
}

@Suite struct RecordedRemovalTests {
    /// A removal with a request id (what a client that may resend sends) finds an id typed in another
    /// Unicode form, as the removal without one does: ids are stored in NFC.
    @Test func aRecordedRemovalFindsAnIDTypedDecomposed() throws {
        try withStore { store, _ in
            _ = try store.regions.add(
                Region(id: "caf\u{E9}", center: Coordinate(latitude: 48, longitude: 2), radius: 9))
            _ = try store.regions.add(Region(id: "other", center: Coordinate(latitude: 48, longitude: 2), radius: 9))
            let request = RequestRecord(id: "r1", uid: 1000, method: "remove")
            let removed = try store.regions.remove(ids: ["cafe\u{301}"], request: request) { $0.joined() }
            #expect(removed == ["cafe\u{301}"])
            #expect(try store.regions.all().map(\.region.id) == ["other"])
            #expect(try store.requests.recorded(id: "r1", uid: 1000)?.answer == "cafe\u{301}")
        }
    }
}
