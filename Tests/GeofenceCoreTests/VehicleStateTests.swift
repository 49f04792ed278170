import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// A vehicle's state in the monitor as one value: taken mid-drive, restored into a fresh monitor, the drive
/// goes on as if nothing had happened.
@Suite("vehicle state")
struct VehicleStateTests {
    static let origin = Coordinate(latitude: 51.5007, longitude: -0.1246)
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func regions() throws -> [Region] {
        [
            try Region(id: "depot", center: offset(origin, north: 0, east: 500), radius: 250, dwell: .seconds(45)),
            try Region(id: "gate", center: offset(origin, north: 20, east: 1500), radius: 100),
            try Region(id: "yard", center: offset(origin, north: -30, east: 2500), radius: 200, dwell: .seconds(5)),
        ]
    }

    static func monitor() throws -> RegionMonitor {
        var monitor = RegionMonitor(configuration: MonitorConfiguration())
        for (i, region) in try regions().enumerated() { monitor.insert(region, seq: Int64(i + 1)) }
        return monitor
    }

    /// A drive east at 8 m/s through the three regions, with a lying fix now and then, judged once by one
    /// filter (the filter's own state is not the monitor's).
    static func drive() -> [WeightedFix] {
        var receiver = SyntheticReceiver(subject: "van-7", seed: 25, start: Date(timeIntervalSince1970: 1_795_000_000))
        var filter = FixFilter()
        var fixes: [WeightedFix] = []
        for second in 0..<420 {
            let truth = offset(origin, north: 0, east: Double(second) * 8)
            let fix =
                second % 53 == 40
                ? receiver.outlier(at: truth, error: 60, stated: 4) : receiver.fix(at: truth)
            if case .accepted(let weighted) = filter.evaluate(fix) { fixes.append(weighted) }
        }
        return fixes
    }

    /// The events without their ids (each monitor draws its own).
    static func comparable(_ events: [RegionEvent]) -> [RegionEvent] {
        events.map {
            var e = $0
            e.id = ""
            return e
        }
    }

    @Test("snapshot mid-dwell, restore into a fresh monitor, drive on: exactly the uninterrupted run's events")
    func restoredDriveMatchesUninterrupted() throws {
        let fixes = Self.drive()
        var uninterrupted = try Self.monitor()
        var expected: [RegionEvent] = []
        for fix in fixes { expected += uninterrupted.process(fix, now: Self.now).events }
        #expect(Set(expected.map(\.type)) == [.determined, .enter, .exit, .dwell], "the drive exercises every kind")
        #expect(uninterrupted.outliers > 0, "and the motion check")

        // Cut where the van is inside the depot and its dwell has not fired yet, and where the next fix is a
        // lying one near the depot's edge, which only the motion check's track (carried in the state) refuses.
        for seconds in [70.0, 92.5] {
            let cut = try #require(fixes.firstIndex { $0.time.timeIntervalSince(fixes[0].time) >= seconds })
            var first = try Self.monitor()
            var events: [RegionEvent] = []
            for fix in fixes[..<cut] { events += first.process(fix, now: Self.now).events }
            let state = try #require(first.vehicleState(of: "van-7"))
            #expect(state.regions[1]?.state == .inside && state.motion != nil)
            if seconds == 70 { #expect(state.regions[1]?.dwellFired == false, "mid-dwell") }

            var second = try Self.monitor()
            second.restore(state)
            #expect(second.vehicleState(of: "van-7") == state, "what is restored is what was taken")
            for fix in fixes[cut...] { events += second.process(fix, now: Self.now).events }
            #expect(Self.comparable(events) == Self.comparable(expected), "cut at \(seconds) s")
            #expect(second.vehicleState(of: "van-7") == uninterrupted.vehicleState(of: "van-7"))
        }
    }

    @Test("a snapshot names regions by seq: pairs of regions the other monitor lacks are left out")
    func regionsTheOtherMonitorLacks() throws {
        var monitor = try Self.monitor()
        for fix in Self.drive().prefix(80) { _ = monitor.process(fix, now: Self.now) }
        let state = try #require(monitor.vehicleState(of: "van-7"))
        var other = RegionMonitor(configuration: MonitorConfiguration())
        other.insert(try Self.regions()[0], seq: 1)
        other.restore(state)
        #expect(other.vehicleState(of: "van-7")?.regions.keys.sorted() == state.regions.keys.filter { $0 == 1 })
        #expect(other.state(subject: "van-7", regionID: "depot") == .inside)
        #expect(monitor.vehicleState(of: "nobody") == nil)
    }
}
