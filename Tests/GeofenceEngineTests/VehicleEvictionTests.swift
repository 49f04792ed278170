import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore
import GeofenceTestSupport
import Testing

/// Vehicles not heard from for long leave memory and come back from the store with their next fix. A real
/// store; the pipeline is the daemon's.
@Suite struct VehicleEvictionTests {
    let depot = Coordinate(latitude: 45.76, longitude: 4.84)
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    private func fix(_ subject: String, north: Double, at time: Date) -> Fix {
        let p = offset(depot, north: north, east: 0)
        return Fix(
            subject: subject, time: time, mode: .threeD, latitude: p.latitude, longitude: p.longitude,
            horizontalAccuracy: 5)
    }

    @Test func anIdleVehicleIsForgottenAndItsNextFixIsJudgedAgainstItsStoredState() throws {
        let dir = try TemporaryDirectory("geofence-eviction")
        defer { dir.remove() }
        let store = try StateStore(directory: dir.file("state"))
        try store.regions.add(Region(id: "depot", center: depot, radius: 100))
        let pipeline = FixPipeline(store: store)
        pipeline.idleLimit = 3600
        try pipeline.load()

        // Two vans parked in the depot; one is heard from again an hour and a half later, one is not.
        var events: [RegionEvent] = []
        for (i, subject) in ["van-1", "van-2"].enumerated() {
            for s in 0..<3 {
                events += try pipeline.process(fix(subject, north: 10, at: start.addingTimeInterval(Double(s * 2 + i))))
                    .events
            }
        }
        events += try pipeline.process(fix("van-2", north: 10, at: start.addingTimeInterval(5400))).events
        events += try pipeline.finish().events
        #expect(events.filter { $0.type == .determined && $0.state == .inside }.count == 2)
        #expect(pipeline.monitor.subjectCount == 2)

        #expect(try pipeline.evictIdle(now: start.addingTimeInterval(5400)) == 1)
        #expect(!pipeline.monitor.knows(subject: "van-1"))
        #expect(pipeline.monitor.knows(subject: "van-2"))
        #expect(pipeline.monitor.subjectCount == 1)

        // van-1 comes back and drives out: an exit, because its stored state says inside; not `determined`.
        var later: [RegionEvent] = []
        for s in 0..<40 {
            later += try pipeline.process(
                fix("van-1", north: 10 + Double(s) * 10, at: start.addingTimeInterval(6000 + Double(s)))
            ).events
        }
        later += try pipeline.finish().events
        #expect(later.filter { $0.region == "depot" }.map(\.type) == [.exit], "\(later.map(\.type))")
        #expect(later.first?.previous == .inside)

        // A restart loads only the vehicles heard from within the limit; the others come back the same way.
        let restarted = FixPipeline(store: store, clock: { Date(timeIntervalSince1970: 1_800_000_000 + 9_100) })
        restarted.idleLimit = 3600
        try restarted.load()
        #expect(restarted.monitor.knows(subject: "van-1"))
        #expect(!restarted.monitor.knows(subject: "van-2"), "last heard at +5400 s, 3700 s before the restart")
        var back: [RegionEvent] = []
        for s in 0..<40 {
            back += try restarted.process(
                fix("van-2", north: 10 + Double(s) * 10, at: start.addingTimeInterval(9200 + Double(s)))
            ).events
        }
        back += try restarted.finish().events
        #expect(back.filter { $0.region == "depot" }.map(\.type) == [.exit])
    }
}
