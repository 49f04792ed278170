import Foundation
import GeofenceCore

/// A fleet's fix stream for the hand-over of a partition (issue 26): several vehicles, interleaved in the order
/// their fixes arrive, each exercising one part of a vehicle's decision state, so that a checkpoint that leaves
/// any part out makes other events after some cut.
///
/// - `truck`: a motorway at 28 m/s through four small circles (`gate-0…3`), one fix in each (the motion
///   check's velocity is what makes that one fix believed); a gap (`beginGap`) just before it enters `gate-2`.
/// - `van`: parked 8 m inside the boundary of `depot` (100 m, dwell 2 min), honest fixes jittering within
///   3-12 m, and once a minute a burst of one to three lying fixes across the boundary: only its motion track
///   refuses them.
/// - `taxi`: through a U-shaped polygon, `yard` (dwell 30 s), at 5 m/s, and into a tunnel: 75 s without fixes,
///   out of it inside the U (an `inferred` enter); `kiosk`, on its way, expires while it drives.
/// - `bus`: an NMEA receiver's epochs (`NMEAGenerator.track`) east at 12 m/s through `stop` (for the bus
///   alone) and `school`, with a duplicate of an epoch placed inside `stop` before the bus is, a fix of 8 s
///   before delivered again after the bus left `stop`, and two fixes 30 km away in a row: what only the fix
///   filter's memory refuses.
package struct HandOverScenario: Sendable {
    /// One thing that happens to the monitor.
    package enum Step: Sendable, Equatable {
        case fix(Fix)
        /// Location Services were off: every vehicle's next change is inferred (`RegionMonitor.beginGap`).
        case gap
    }

    /// The regions, with their seqs (the last one expires on the way; its seq is the highest).
    package var regions: [(seq: Int64, region: Region)]
    package var steps: [Step]
    /// Steps worth cutting just before: the first of each lying burst, the filter's refusals, the gap, the
    /// first fix after the tunnel.
    package var sharpCuts: [Int]

    package static let origin = DecisionScenarios.origin
    package static let start = DecisionScenarios.start

    package init() {
        let origin = Self.origin
        let start = Self.start
        var regions: [Region] = []
        // (arrival time in seconds after `start`, order among equal times, step, sharp)
        var arrivals: [(at: Double, order: Int, step: Step, sharp: Bool)] = []
        func arrive(_ fix: Fix, order: Int, at: Double? = nil, sharp: Bool = false) {
            arrivals.append(
                (at ?? fix.time!.timeIntervalSince(start), order, .fix(fix), sharp))
        }

        // The truck: DecisionScenarios.motorway's gates and fixes, 50 s after the start.
        let motorway = DecisionScenarios.motorway(passes: 4, seed: 7)
        regions += motorway.regions
        for var fix in motorway.fixes {
            fix.time = fix.time!.addingTimeInterval(50)
            arrive(fix, order: 0)
        }
        // Gate k's centre is passed 30k + 22 s after the truck starts.
        arrivals.append((50 + 82 - 0.5, 0, .gap, true))

        // The van: parked 92 m from the centre of a 100 m region with a dwell, lying bursts each minute.
        regions.append(try! Region(id: "depot", center: origin, radius: 100, dwell: .seconds(120)))
        for (second, fix) in DecisionScenarios.parked(distance: 92, seed: 11).fixes.prefix(900).enumerated() {
            arrive(fix, order: 1, sharp: second % 60 == 30)
        }

        // The taxi: a U, 3 km east and 500 m north (off the truck's road), crossed by a street and driven back along another through both its arms.
        let u = offset(origin, north: 500, east: 3000)
        func at(_ east: Double, _ north: Double) -> Coordinate { offset(u, north: north, east: east) }
        let corners: [(Double, Double)] = [
            (0, 0), (400, 0), (400, 300), (250, 300), (250, 100), (150, 100), (150, 300), (0, 300), (0, 0),
        ]
        regions.append(
            try! Region(
                id: "yard", center: u, radius: 1, dwell: .seconds(30),
                polygon: try! RegionPolygon(ring: corners.map { at($0.0, $0.1) })))
        let street = TruePath.polyline(
            from: u, through: [(50, -300), (50, 700), (250, 700), (250, -300)], speed: 5)
        var taxi = SyntheticReceiver(subject: "taxi", seed: 13, start: start.addingTimeInterval(100))
        taxi.accuracy = 3...8
        for (second, point) in street.points.enumerated() {
            let fix = taxi.fix(at: point)
            // The tunnel: 75 s without a fix, from outside the U (x = 500) to inside its left arm (x = 125).
            if (280..<355).contains(second) { continue }
            arrive(fix, order: 2, sharp: second == 355)
        }

        // The bus: NMEA epochs east at 12 m/s from 1 km south of the depot.
        let road = offset(origin, north: -1000, east: -600)
        let epochs = NMEAGenerator.track(
            from: road, at: start.addingTimeInterval(20), course: 90, speed: 12, count: 300)
        func busFix(_ epoch: NMEAGenerator.Epoch, time: Date? = nil, at point: Coordinate? = nil) -> Fix {
            Fix(
                subject: "bus", time: time ?? epoch.time, mode: .threeD,
                latitude: point?.latitude ?? epoch.latitude, longitude: point?.longitude ?? epoch.longitude,
                horizontalAccuracy: 2
                    * (epoch.latitudeError * epoch.latitudeError
                    + epoch.longitudeError * epoch.longitudeError).squareRoot(),
                speed: epoch.speed, course: epoch.course)
        }
        func busPoint(_ second: Int) -> Coordinate {
            Coordinate(latitude: epochs[second].latitude, longitude: epochs[second].longitude)
        }
        regions.append(try! Region(id: "stop", center: busPoint(100), radius: 60, subjects: ["bus"]))
        regions.append(try! Region(id: "school", center: busPoint(200), radius: 150))
        for (second, epoch) in epochs.enumerated() {
            arrive(busFix(epoch), order: 3)
            let t = epoch.time.timeIntervalSince(start)
            switch second {
            case 85:
                // The same epoch again, placed at the stop's centre (the bus is 120 m short of it).
                arrive(busFix(epoch, at: busPoint(100)), order: 3, at: t + 0.1, sharp: true)
            case 108:
                // The epoch of 100 s (inside `stop`), delivered again 8 s late.
                arrive(busFix(epochs[100]), order: 3, at: t + 0.1, sharp: true)
            case 150:
                // 30 km north, twice in a row: one short of the filter's re-synchronisation.
                let far = offset(busPoint(second), north: 30_000, east: 0)
                for k in 1...2 {
                    let late = 0.3 * Double(k)
                    arrive(
                        busFix(epoch, time: epoch.time.addingTimeInterval(late), at: far), order: 3, at: t + late,
                        sharp: true)
                }
            default: break
            }
        }

        // A kiosk on the taxi's second street, passed 220 s after it sets off, expiring 10 s later.
        regions.append(
            try! Region(
                id: "kiosk", center: at(700, 150), radius: 40, expires: start.addingTimeInterval(100 + 230)))

        arrivals.sort { ($0.at, $0.order) < ($1.at, $1.order) }
        self.regions = regions.enumerated().map { (Int64($0.offset + 1), $0.element) }
        steps = arrivals.map(\.step)
        sharpCuts = arrivals.indices.filter { arrivals[$0].sharp }
    }

    /// A random fleet: `vehicles` vehicles for ten minutes each among 30 circles and 6 polygons (some with
    /// a dwell, one expiring) within 2 km, each driving at 0-20 m/s with stops, fixes of 3-15 m, and at random
    /// a lying fix (40-100 m off, claiming 4 m), a repeated epoch elsewhere, a fix delivered again 5-20 s late,
    /// a tunnel of 70-120 s; and two gaps for everyone. Sharp cuts: before each of those.
    package init(fleet vehicles: Int, seed: UInt64) {
        let origin = Self.origin
        let start = Self.start
        var rng = SeededGenerator(seed: seed)
        func somewhere() -> Coordinate {
            offset(
                origin, north: Double.random(in: -2000...2000, using: &rng),
                east: Double.random(in: -2000...2000, using: &rng))
        }
        var regions: [Region] = []
        for k in 0..<30 {
            let dwell: Duration? = k % 3 == 0 ? .seconds(Int.random(in: 20...120, using: &rng)) : nil
            regions.append(
                try! Region(
                    id: "c\(k)", center: somewhere(), radius: Double.random(in: 30...300, using: &rng), dwell: dwell))
        }
        for k in 0..<6 {
            let centre = somewhere()
            let corners = Int.random(in: 5...12, using: &rng)
            var ring = (0..<corners).map { i in
                let bearing = 2 * Double.pi * Double(corners - i) / Double(corners)
                let reach = Double.random(in: 80...400, using: &rng)
                return offset(centre, north: reach * cos(bearing), east: reach * sin(bearing))
            }
            ring.append(ring[0])
            regions.append(
                try! Region(
                    id: "p\(k)", center: centre, radius: 1, dwell: k % 2 == 0 ? .seconds(45) : nil,
                    polygon: try! RegionPolygon(ring: ring)))
        }
        regions.append(
            try! Region(id: "pop-up", center: origin, radius: 500, expires: start.addingTimeInterval(300)))

        var arrivals: [(at: Double, order: Int, step: Step, sharp: Bool)] = []
        for v in 0..<vehicles {
            var receiver = SyntheticReceiver(subject: "v\(v)", seed: seed &* 1000 &+ UInt64(v), start: start)
            receiver.accuracy = 3...15
            var here = somewhere()
            var heading = Double.random(in: 0..<(2 * .pi), using: &rng)
            var speed = 10.0
            var parkedFor = 0
            var kept: [Fix] = []
            let tunnel = Bool.random(using: &rng) ? Int.random(in: 60...450, using: &rng) : -1
            let tunnelLength = Int.random(in: 70...120, using: &rng)
            for second in 0..<600 {
                if parkedFor > 0 {
                    parkedFor -= 1
                } else {
                    if Double.random(in: 0..<1, using: &rng) < 0.01 {
                        parkedFor = Int.random(in: 30...150, using: &rng)
                    }
                    heading += Double.random(in: -0.3...0.3, using: &rng)
                    speed = min(20, max(2, speed + Double.random(in: -2...2, using: &rng)))
                    here = offset(here, north: speed * cos(heading), east: speed * sin(heading))
                    // Stay within reach of the regions.
                    if Geodesic.distance(here, origin) > 2500 { heading += .pi }
                }
                let t = Double(second)
                let roll = Double.random(in: 0..<1, using: &rng)
                let fix: Fix
                var sharp = false
                if roll < 0.02 {
                    let off = Double.random(in: 40...100, using: &rng)
                    let bearing = Double.random(in: 0..<(2 * .pi), using: &rng)
                    fix = receiver.outlier(
                        at: offset(here, north: off * cos(bearing), east: off * sin(bearing)), error: 0, stated: 4)
                    sharp = true
                } else {
                    fix = receiver.fix(at: here)
                }
                if tunnel >= 0, (tunnel..<tunnel + tunnelLength).contains(second) { continue }
                arrivals.append((t, v, .fix(fix), sharp || second == tunnel + tunnelLength))
                kept.append(fix)
                if roll > 0.995 {
                    var again = fix
                    again.latitude = fix.latitude.map { $0 + 0.0005 }
                    arrivals.append((t + 0.1, v, .fix(again), true))
                } else if roll > 0.99, kept.count > 20 {
                    let late = kept[kept.count - Int.random(in: 5...20, using: &rng)]
                    arrivals.append((t + 0.2, v, .fix(late), true))
                }
            }
        }
        for at in [150.5, 420.5] { arrivals.append((at, -1, .gap, true)) }
        arrivals.sort { ($0.at, $0.order) < ($1.at, $1.order) }
        self.regions = regions.enumerated().map { (Int64($0.offset + 1), $0.element) }
        steps = arrivals.map(\.step)
        sharpCuts = arrivals.indices.filter { arrivals[$0].sharp }
    }

    /// A filter and a monitor that hold the scenario's regions, those among `seqs` (all, by default).
    package func pipeline(seqs: Set<Int64>? = nil) -> (filter: FixFilter, monitor: RegionMonitor) {
        var monitor = RegionMonitor()
        for (seq, region) in regions where seqs?.contains(seq) ?? true { monitor.insert(region, seq: seq) }
        return (FixFilter(), monitor)
    }
}
