import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

/// The reconciler's SQL statement against its Swift twin (`ReconcilePolicy`): the same statuses, from the same
/// inputs, over rounds of random inputs on a real SQLite store whose regions carry every status there is.
@Suite struct ReconcilePolicyTests {
    /// The regions as stored (the raw status and reason, not the `waiting-for-engine` display).
    static func stored(_ store: StateStore) throws -> [ReconcilePolicy.Region] {
        try store.queue.read { db in
            var regions: [ReconcilePolicy.Region] = []
            try db.forEachRow("SELECT seq, id, created_by, status, status_reason FROM regions ORDER BY seq") { s in
                regions.append(
                    ReconcilePolicy.Region(
                        seq: s.int64(at: 0), id: s.string(at: 1),
                        owner: s.optionalString(at: 2).flatMap { UInt32($0) },
                        status: RegionStatus(
                            RegionStatus.Kind(rawValue: s.string(at: 3)) ?? .failed, reason: s.optionalString(at: 4))))
            }
            return regions
        }
    }

    @Test func theStatementAndItsTwinAgree() throws {
        let store = try StateStore.inMemory()
        var random = SeededGenerator(seed: 15)
        let owners: [UInt32?] = [nil, 1000, 1001, 1002]
        for i in 0..<80 {
            let owner = owners[Int.random(in: 0..<owners.count, using: &random)]
            _ = try store.regions.add(
                Region(
                    id: "r\(i)", center: Coordinate(latitude: 10 + Double(i) / 10, longitude: 5), radius: 50,
                    createdBy: owner))
        }
        // Every kind of status to start from, expired and accuracyLimited included.
        try store.queue.write { db in
            try db.execute("UPDATE regions SET status = 'expired' WHERE seq % 11 = 0")
            try db.execute("UPDATE regions SET status = 'accuracyLimited' WHERE seq % 7 = 0 AND status != 'expired'")
        }
        var changed = 0
        for round in 0..<60 {
            let denied = Set([1000, 1001, 1002].filter { _ in Bool.random(using: &random) }.map { UInt32($0) })
            let inputs = ReconcileInputs(
                servicesOn: Int.random(in: 0..<5, using: &random) > 0,
                locationAvailable: Int.random(in: 0..<4, using: &random) > 0,
                deniedOwners: round % 5 == 0 ? [] : denied,
                maxRegions: [nil, 0, 5, 30, 70][Int.random(in: 0..<5, using: &random)])
            let before = try Self.stored(store)
            let expected = ReconcilePolicy.changes(before, inputs)
            let changes = try store.monitorState.reconcile(inputs, retryAt: Date())
            #expect(
                changes.sorted { $0.seq < $1.seq } == expected, "round \(round), \(inputs)")
            // And the store now holds what the twin says: the changed ones changed, the others kept theirs.
            let after = try Self.stored(store)
            let wanted = Dictionary(uniqueKeysWithValues: expected.map { ($0.seq, $0.status) })
            for (old, new) in zip(before, after) {
                #expect(new.status == (wanted[old.seq] ?? old.status), "round \(round): \(old.id)")
            }
            #expect(
                after.filter { $0.status.kind == .expired }.count == before.filter { $0.status.kind == .expired }.count)
            changed += changes.count
        }
        #expect(changed > 200, "the rounds changed statuses (\(changed))")
    }

    @Test func precedenceInOneRegion() {
        let region = ReconcilePolicy.Region(seq: 1, id: "a", owner: 1000, status: .monitoring)
        let all = ReconcileInputs(servicesOn: false, locationAvailable: false, deniedOwners: [1000], maxRegions: 0)
        #expect(ReconcilePolicy.desired(region, rank: nil, all).description == "suspended: services-off")
        var inputs = all
        inputs.servicesOn = true
        #expect(ReconcilePolicy.desired(region, rank: nil, inputs).description == "failed: permission-denied")
        inputs.maxRegions = 1
        #expect(ReconcilePolicy.desired(region, rank: 2, inputs).description == "pending: limit")
        #expect(ReconcilePolicy.desired(region, rank: 1, inputs).description == "failed: location-unavailable")
        inputs.locationAvailable = true
        #expect(ReconcilePolicy.desired(region, rank: 1, inputs) == .monitoring)
        let limited = ReconcilePolicy.Region(seq: 1, id: "a", owner: nil, status: .accuracyLimited)
        #expect(ReconcilePolicy.desired(limited, rank: 1, inputs) == .accuracyLimited)
    }
}
