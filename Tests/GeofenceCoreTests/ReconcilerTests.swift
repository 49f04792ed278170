import Foundation
import GeofenceCore
import Testing

/// The reconciler's decisions alone: inputs in, actions out, no store and no clock.
@Suite("reconciler")
struct ReconcilerTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    static func region(_ seq: Int64, owner: UInt32? = nil, _ status: RegionStatus = .monitoring)
        -> ReconcilePolicy.Region
    {
        ReconcilePolicy.Region(seq: seq, id: "r\(seq)", owner: owner, status: status)
    }

    /// Applies the plan's changes to the regions, as the store would.
    static func apply(_ changes: [RegionStatusChange], to regions: inout [ReconcilePolicy.Region]) {
        for change in changes {
            if let i = regions.firstIndex(where: { $0.seq == change.seq }) { regions[i].status = change.status }
        }
    }

    @Test("at start a region may be held, so the statuses are written; after an all-clear pass they are not")
    func skipsTheStoreOnlyWhenNothingCanBeHeld() {
        var r = Reconciler(maxRegions: nil)
        var regions = [Self.region(1, RegionStatus(.suspended, reason: "services-off")), Self.region(2)]
        let first = r.plan(deniedOwners: [], now: Self.t0, unit: 0)
        #expect(first.inputs.allClear && first.writesStatuses && !first.restricted)
        let changes = Reconciler.changes(regions, first)
        #expect(changes == [RegionStatusChange(seq: 1, id: "r1", status: .monitoring)])
        Self.apply(changes, to: &regions)
        let syncs = r.applied(first, changes: changes)
        #expect(!syncs, "nothing restricted: the monitor's set is left as it is")
        r.synced(first)
        let second = r.plan(deniedOwners: [], now: Self.t0, unit: 0)
        #expect(!second.writesStatuses)
        #expect(Reconciler.changes(regions, second).isEmpty)
        #expect(!r.retryIsDue(at: Self.t0.addingTimeInterval(1e6)), "all clear: no region is failed")
    }

    @Test("the switch off suspends every region; on again releases them")
    func theSwitch() {
        var r = Reconciler(maxRegions: nil)
        var regions = [Self.region(1), Self.region(2, RegionStatus(.expired))]
        let sameSwitch = r.setServices(true)
        #expect(!sameSwitch, "unchanged: nothing to do")
        let switchedOff = r.setServices(false)
        #expect(switchedOff)
        let off = r.plan(deniedOwners: [], now: Self.t0, unit: 0)
        let changes = Reconciler.changes(regions, off)
        #expect(
            changes == [RegionStatusChange(seq: 1, id: "r1", status: RegionStatus(.suspended, reason: "services-off"))])
        Self.apply(changes, to: &regions)
        _ = r.applied(off, changes: changes)
        r.synced(off)
        let switchedOn = r.setServices(true)
        #expect(switchedOn)
        let on = r.plan(deniedOwners: [], now: Self.t0, unit: 0)
        #expect(on.writesStatuses, "a region was held: it is released")
        #expect(Reconciler.changes(regions, on) == [RegionStatusChange(seq: 1, id: "r1", status: .monitoring)])
    }

    @Test("failed regions are retried with a backoff that doubles, and starts over when fixes are back")
    func retriesBackOff() {
        var r = Reconciler(maxRegions: nil)
        #expect(r.retryIsDue(at: Self.t0), "unknown at start: the store is asked once")
        r.retried(counted: 0, nextDue: nil)
        #expect(!r.retryIsDue(at: Self.t0))
        var regions = [Self.region(1), Self.region(2)]
        let lostLocation = r.setLocationAvailable(false)
        #expect(lostLocation)
        let lostAgain = r.setLocationAvailable(false)
        #expect(!lostAgain)
        let lost = r.plan(deniedOwners: [], now: Self.t0, unit: 1)
        #expect(lost.retryAt == Self.t0.addingTimeInterval(1), "the first retry after 1 s (at the top of its jitter)")
        let changes = Reconciler.changes(regions, lost)
        #expect(
            changes.map(\.status) == Array(repeating: RegionStatus(.failed, reason: "location-unavailable"), count: 2))
        Self.apply(changes, to: &regions)
        _ = r.applied(lost, changes: changes)
        r.synced(lost)
        #expect(!r.retryIsDue(at: Self.t0.addingTimeInterval(0.5)))
        #expect(r.retryIsDue(at: Self.t0.addingTimeInterval(1)))
        #expect(r.retryDelay(unit: 1) == 1)
        r.retried(counted: 2, nextDue: Self.t0.addingTimeInterval(3))
        #expect(r.retryDelay(unit: 1) == 2 && r.retryDelay(unit: 0) == 1, "equal jitter: between half and all of 2 s")
        r.retried(counted: 2, nextDue: Self.t0.addingTimeInterval(7))
        #expect(r.retryDelay(unit: 1) == 4)
        r.retried(counted: 0, nextDue: Self.t0.addingTimeInterval(7))
        #expect(r.retryDelay(unit: 1) == 4, "a pass that retried nothing is no round")
        let locationBack = r.setLocationAvailable(true)
        #expect(locationBack)
        #expect(r.retryDelay(unit: 1) == 1, "the cause cleared: the backoff starts over")
        let back = r.plan(deniedOwners: [], now: Self.t0, unit: 1)
        let released = Reconciler.changes(regions, back)
        #expect(released.map(\.status) == [.monitoring, .monitoring])
        _ = r.applied(back, changes: released)
        #expect(!r.retryIsDue(at: .distantFuture), "nothing is failed any more")
    }

    @Test("a limit and denied owners restrict the monitor's set; lifting them brings it in line once more")
    func membership() {
        var r = Reconciler(maxRegions: 2)
        let regions = [Self.region(1, owner: 7), Self.region(2), Self.region(3), Self.region(4)]
        let plan = r.plan(deniedOwners: [7], now: Self.t0, unit: 0)
        #expect(plan.restricted && plan.writesStatuses)
        #expect(
            Reconciler.changes(regions, plan) == [
                RegionStatusChange(seq: 1, id: "r1", status: RegionStatus(.failed, reason: "permission-denied")),
                RegionStatusChange(seq: 4, id: "r4", status: RegionStatus(.pending, reason: "limit")),
            ])
        let syncsLimited = r.applied(plan, changes: [])
        #expect(syncsLimited)
        r.synced(plan)
        let load = Reconciler.membership(wanted: [2, 3], current: [1, 2, 3, 4])
        #expect(load.unload == [1, 4] && load.load.isEmpty)
        #expect(Reconciler.membership(wanted: [5, 2, 3], current: [2]).load == [3, 5], "loaded in seq order")

        var open = Reconciler(maxRegions: nil)
        let denied = open.plan(deniedOwners: [7], now: Self.t0, unit: 0)
        let syncsDenied = open.applied(denied, changes: [])
        #expect(syncsDenied)
        open.synced(denied)
        let granted = open.plan(deniedOwners: [], now: Self.t0, unit: 0)
        #expect(!granted.restricted)
        let syncsGranted = open.applied(granted, changes: [])
        #expect(syncsGranted, "restricted last time: the regions come back once")
        open.synced(granted)
        let again = open.plan(deniedOwners: [], now: Self.t0, unit: 0)
        let syncsAgain = open.applied(again, changes: [])
        #expect(!syncsAgain)
    }

    @Test("a reconciliation the store refused is owed until one completes")
    func owed() {
        var r = Reconciler(maxRegions: nil)
        #expect(!r.owed)
        r.failed()
        #expect(r.owed)
        let plan = r.plan(deniedOwners: [], now: Self.t0, unit: 0)
        let syncsOwed = r.applied(plan, changes: [])
        #expect(!syncsOwed)
        #expect(r.owed, "not complete until synced")
        r.synced(plan)
        #expect(!r.owed)
    }
}
