import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// Runs fixes through a fresh filter and a monitor and collects the events.
private struct PolygonPipeline {
    var filter = FixFilter()
    var monitor = RegionMonitor()
    var events: [RegionEvent] = []
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    init(regions: [Region]) {
        for (i, region) in regions.enumerated() { monitor.insert(region, seq: Int64(i + 1)) }
    }

    mutating func feed(_ fix: Fix) {
        guard case .accepted(let weighted) = filter.evaluate(fix) else { return }
        events += monitor.process(weighted, now: now).events
    }

    var types: [RegionEventType] { events.map(\.type) }
}

private let origin = Coordinate(latitude: 48.8566, longitude: 2.3522)
private let start = Date(timeIntervalSince1970: 1_795_000_000)

private func at(_ east: Double, _ north: Double) -> Coordinate { offset(origin, north: north, east: east) }

/// A U, 400 m by 300 m, with a notch 100 m wide and 200 m deep from its top edge.
private func uShape(id: String = "u", dwell: Double? = nil, expires: Date? = nil) throws -> Region {
    let corners: [(Double, Double)] = [
        (0, 0), (400, 0), (400, 300), (250, 300), (250, 100), (150, 100), (150, 300), (0, 300), (0, 0),
    ]
    let polygon = try RegionPolygon(parts: [[corners.map { at($0.0, $0.1) }]])
    return try Region(id: id, polygon: polygon, dwell: dwell, expires: expires)
}

@Suite("Polygon regions through the monitor")
struct PolygonMonitorTests {
    @Test(
        "a receiver parked on an edge, at a corner and at the notch's inner corner, through bursts of 1, 2 and 3 lies, fires no enter or exit"
    )
    func parkedOnBoundary() throws {
        let region = try uShape()
        // (where it parks, where it arrives from, the bearing across the boundary there, radians): an edge's
        // middle, a convex corner, the notch's reflex corners, and just inside and outside an edge.
        let spots: [((Double, Double), (Double, Double), Double)] = [
            ((200, 0), (200, 60), 0), ((200, 0), (200, -60), 0), ((400, 300), (340, 240), .pi / 4),
            ((400, 300), (460, 360), .pi / 4), ((250, 100), (300, 150), .pi / 4), ((150, 100), (200, 200), -.pi / 4),
            ((0, 150), (-3, 150), .pi / 2), ((0, 150), (4, 150), .pi / 2),
        ]
        for burst in 1...3 {
            for pattern in DecisionScenarios.BurstPattern.allCases {
                for (seed, (spot, from, across)) in spots.enumerated() {
                    var pipeline = PolygonPipeline(regions: [region])
                    var receiver = SyntheticReceiver(seed: UInt64(seed + 11), start: start)
                    receiver.accuracy = 3...12
                    for _ in 0..<10 { pipeline.feed(receiver.fix(at: at(from.0, from.1))) }
                    #expect(pipeline.types == [.determined], "arriving from \(from)")
                    // Walk to the spot at 1 m/s, so the motion check follows.
                    let steps = Int(max(abs(spot.0 - from.0), abs(spot.1 - from.1)))
                    for s in 0...steps {
                        let f = Double(s) / Double(max(1, steps))
                        pipeline.feed(
                            receiver.fix(at: at(from.0 + (spot.0 - from.0) * f, from.1 + (spot.1 - from.1) * f)))
                    }
                    let determined = pipeline.events.count
                    // An hour there; once a minute a burst of lies claiming 3-5 m, each 30-80 m off across the
                    // edge or corner, inwards or outwards as `pattern` says, so that lies land on the other side.
                    let outliers = pipeline.monitor.outliers
                    var fixes = 0
                    var bursts = 0
                    while fixes < 3600 {
                        if fixes % 60 == 30 {
                            bursts += 1
                            let lies = receiver.burst(
                                at: Array(repeating: at(spot.0, spot.1), count: burst), across: across,
                                pattern: pattern, outwardsFirst: bursts % 2 == 0)
                            for lie in lies { pipeline.feed(lie) }
                            fixes += lies.count
                        } else {
                            pipeline.feed(receiver.fix(at: at(spot.0, spot.1)))
                            fixes += 1
                        }
                    }
                    let after = pipeline.events[determined...].map(\.type)
                    #expect(
                        !after.contains(.enter) && !after.contains(.exit),
                        "parked at \(spot), bursts of \(burst) \(pattern): \(after)")
                    let refused =
                        pipeline.monitor.outliers - outliers + pipeline.filter.statistics[.implausibleJump]
                    #expect(refused >= 60 * burst, "parked at \(spot), bursts of \(burst) \(pattern): \(refused)")
                }
            }
        }
    }

    @Test("a drive through the U (in, out through the notch, in again) makes exactly its four crossings")
    func driveThroughConcave() throws {
        var pipeline = PolygonPipeline(regions: [try uShape()])
        var receiver = SyntheticReceiver(seed: 5, start: start)
        receiver.accuracy = 3...8
        // West to east along the middle of the notch's height, 10 m/s.
        for step in 0...100 { pipeline.feed(receiver.fix(at: at(-300 + Double(step) * 10, 200))) }
        #expect(pipeline.types == [.determined, .enter, .exit, .enter, .exit])
        #expect(pipeline.events[0].state == .outside)
        // The signed distance to the boundary: at least the margin inside (negative) or outside; radius 0.
        for event in pipeline.events {
            #expect(event.radius == 0)
            let distance = try #require(event.distance)
            if event.state == .inside { #expect(distance <= -5) } else { #expect(distance >= 5) }
        }
        // Where it crossed: after each edge (x = 0, 150, 250, 400), within a few fixes.
        let crossings = pipeline.events.dropFirst().map { event in
            let fix = event.fix!
            return Geodesic.distance(origin, Coordinate(latitude: origin.latitude, longitude: fix.longitude))
        }
        for (crossing, edge) in zip(crossings, [0.0, 150, 250, 400]) {
            #expect(crossing > edge && crossing < edge + 50, "\(crossing) for the edge at \(edge)")
        }
    }

    @Test("dwell and expiry work for a polygon")
    func dwellAndExpiry() throws {
        let expires = start.addingTimeInterval(200)
        var pipeline = PolygonPipeline(regions: [try uShape(dwell: 60, expires: expires)])
        var receiver = SyntheticReceiver(seed: 9, start: start)
        for _ in 0..<10 { pipeline.feed(receiver.fix(at: at(-100, 50))) }
        for step in 0...20 { pipeline.feed(receiver.fix(at: at(-100 + Double(step) * 10, 50))) }
        for _ in 0..<200 { pipeline.feed(receiver.fix(at: at(100, 50))) }
        #expect(pipeline.types == [.determined, .enter, .dwell, .expired])
        let dwell = pipeline.events[2]
        #expect(dwell.time.timeIntervalSince(pipeline.events[1].time) >= 60)
        #expect(try #require(dwell.distance) < -40)
        #expect(pipeline.events[3].radius == 0)
    }

    @Test("a crossing across a gap is inferred, as for a circle")
    func inferredAcrossGap() throws {
        var pipeline = PolygonPipeline(regions: [try uShape()])
        var receiver = SyntheticReceiver(seed: 4, start: start)
        for _ in 0..<5 { pipeline.feed(receiver.fix(at: at(50, 50))) }
        receiver.time = receiver.time.addingTimeInterval(600)  // ten minutes in a tunnel
        // Into the notch: inside the cap, outside the polygon.
        for _ in 0..<5 { pipeline.feed(receiver.fix(at: at(200, 250))) }
        #expect(pipeline.types == [.determined, .exit])
        #expect(pipeline.events[1].inferred && !pipeline.events[0].inferred)
        #expect(try #require(pipeline.events[1].distance) > 40)
    }

    @Test("a first fix beyond the vicinity makes a polygon silently outside, as for a circle")
    func determinedFarOutside() throws {
        var pipeline = PolygonPipeline(regions: [try uShape()])
        var receiver = SyntheticReceiver(seed: 3, start: start)
        // Far beyond the vicinity: silently outside, then a later drive in is an enter.
        for _ in 0..<5 { pipeline.feed(receiver.fix(at: at(-5000, 150))) }
        #expect(pipeline.types.isEmpty)
        #expect(pipeline.monitor.state(subject: receiver.subject, regionID: "u") == .outside)
        // Driving in at 20 m/s.
        for step in 0...253 { pipeline.feed(receiver.fix(at: at(-5000 + Double(step) * 20, 150))) }
        #expect(pipeline.types == [.enter])
    }
}
