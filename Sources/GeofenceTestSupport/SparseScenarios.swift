import Foundation
import GeofenceCore

/// Sparse reporters: fleet trackers that send a fix every 10 to 120 s while moving (to save data and battery),
/// each with the speed and course the receiver measured. The scenarios of Docs/events.md's "Passes between
/// fixes", each placed for a reason written beside it.
package enum SparseScenarios {
    /// Fixes every `interval` seconds along a true path of one point a second, starting `phase` seconds in:
    /// each within its stated accuracy (3-12 m), with the true speed (±0.3 m/s) and course (±3°) of that second.
    package static func fixes(
        along path: TruePath, interval: Int, phase: Int = 0, seed: UInt64, subject: String = "van-7"
    ) -> [Fix] {
        var receiver = SyntheticReceiver(subject: subject, seed: seed, start: DecisionScenarios.start)
        var out: [Fix] = []
        var i = phase
        while i + 1 < path.points.count {
            receiver.time = DecisionScenarios.start.addingTimeInterval(Double(i))
            var fix = receiver.fix(at: path.points[i])
            let step = Geodesic.inverse(path.points[i], path.points[i + 1])
            fix.speed = max(0, step.distance + Double.random(in: -0.3...0.3, using: &receiver.rng))
            if step.distance > 0.5 {
                var course = step.azimuth1 + Double.random(in: -3...3, using: &receiver.rng)
                if course < 0 { course += 360 }
                fix.course = course.truncatingRemainder(dividingBy: 360)
            }
            out.append(fix)
            i += interval
        }
        return out
    }

    /// The radii of the regions a drive passes, in turn (metres).
    package static let radii: [Double] = [50, 100, 200, 300, 500]

    /// A straight drive east at `speed` through regions of 50-500 m radius (`radii`, in turn), reporting every
    /// `interval` seconds from a phase the seed draws. Each region's centre is placed along the road between two
    /// fixes, at 0.5, 0.35 or 0.65 of the way (in turn), on the road or, with 0.35, 0.3 of its radius beside it;
    /// the third of every four 60 m clear of the road (never entered); the regions are two report intervals plus their diameters apart.
    /// A region smaller than the distance between two reports is then passed with no fix inside it. The
    /// crossings a rule must report are those the true path makes more than 24 m deep (twice the worst
    /// accuracy); shallower ones may be reported or not.
    package static func drive(interval: Int, speed: Double, seed: UInt64) -> DecisionScenario {
        var rng = SeededGenerator(seed: seed)
        let phase = Int.random(in: 0..<interval, using: &rng)
        let gap = speed * Double(interval)
        var regions: [Region] = []
        var east = speed * Double(phase) + 2 * gap
        for k in 0..<12 {
            let r = radii[k % radii.count]
            // To the next fix at or after the region's near edge, then `f` of a gap on.
            let f = [0.5, 0.35, 0.65][k % 3]
            let fixes = ((east + r - speed * Double(phase)) / gap).rounded(.up)
            let centre = speed * Double(phase) + fixes * gap + f * gap
            let north = k % 4 == 2 ? r + 60 : (k % 3 == 1 ? 0.3 * r : 0)
            regions.append(
                try! Region(
                    id: "r\(k)-\(Int(r))", center: offset(DecisionScenarios.origin, north: north, east: centre),
                    radius: r))
            east = centre + r + 2 * gap
        }
        let path = TruePath.profile(
            from: DecisionScenarios.origin, start: (0, 0), bearing: 90,
            speeds: Array(repeating: speed, count: Int(east / speed)))
        var scenario = DecisionScenario(
            name: "sparse drive every \(interval) s at \(Int(speed)) m/s", regions: regions,
            fixes: fixes(along: path, interval: interval, phase: phase, seed: seed), required: [:])
        for region in regions {
            let deep = path.crossings(of: region, margin: 24)
            let any = path.crossings(of: region, margin: 0)
            if !deep.isEmpty {
                scenario.required[region.id] = deep
            } else if !any.isEmpty {
                scenario.optional[region.id] = any
            }
        }
        return scenario
    }

    /// A road that bends around a region of radius `radius` 60 m clear of its boundary, between two straight
    /// stretches on one line through its centre: fixes every `interval` s land on the straight stretches either
    /// side, so that the straight segment between them goes through the region's middle. Never entered.
    package static func curvingRoad(interval: Int, radius: Double, speed: Double, seed: UInt64) -> DecisionScenario {
        let clear = radius + 60
        let approach = 2 * speed * Double(interval) + clear
        // A half octagon around the region: its corners `clear / cos(22.5°)` from the centre.
        let corner = clear / cos(.pi / 8)
        var corners: [(north: Double, east: Double)] = [(0, -approach - clear)]
        for k in 0...4 {
            let angle = Double.pi - Double(k) * .pi / 4
            corners.append((corner * sin(angle), corner * cos(angle)))
        }
        corners.append((0, approach + clear))
        let path = TruePath.polyline(from: DecisionScenarios.origin, through: corners, speed: speed)
        let region = try! Region(id: "park", center: DecisionScenarios.origin, radius: radius)
        var scenario = DecisionScenario(
            name: "road bending around a \(Int(radius)) m region, 60 m clear, every \(interval) s",
            regions: [region], fixes: fixes(along: path, interval: interval, seed: seed), required: [:])
        scenario.required[region.id] = []
        return scenario
    }

    /// Driving east towards a region of radius `radius` and turning back 40 m before its boundary (a U-turn
    /// in 10 s), reporting every `interval` s. Never entered.
    package static func uTurn(interval: Int, radius: Double, speed: Double, seed: UInt64) -> DecisionScenario {
        let approach = 3 * speed * Double(interval)
        var speeds = Array(repeating: speed, count: Int(approach / speed))
        speeds += Array(repeating: 0, count: 10)
        let out = TruePath.profile(
            from: DecisionScenarios.origin, start: (0, -(radius + 40 + approach)), bearing: 90, speeds: speeds)
        let back = TruePath.profile(
            from: DecisionScenarios.origin, start: (10, -(radius + 40)), bearing: 270,
            speeds: Array(repeating: speed, count: Int(approach / speed)))
        let path = TruePath(points: out.points + back.points)
        let region = try! Region(id: "gate", center: DecisionScenarios.origin, radius: radius)
        var scenario = DecisionScenario(
            name: "U-turn 40 m before a \(Int(radius)) m region, every \(interval) s", regions: [region],
            fixes: fixes(along: path, interval: interval, seed: seed), required: [:])
        scenario.required[region.id] = []
        return scenario
    }

    /// Stop and go: stopped at every report (speed 0), driving round a region of radius `radius` 60 m clear of
    /// it between two reports `interval` s apart, at whatever speed that takes. Never entered.
    package static func stopAndGo(interval: Int, radius: Double, seed: UInt64) -> DecisionScenario {
        let clear = radius + 60
        // Half a circle round the region, from one stop to the next, in `interval − 4` seconds.
        let moving = interval - 4
        var points: [Coordinate] = []
        let start = offset(DecisionScenarios.origin, north: 0, east: -clear)
        points += Array(repeating: start, count: interval / 2 + 2)
        for s in 1...moving {
            let angle = Double.pi - Double.pi * Double(s) / Double(moving)
            points.append(offset(DecisionScenarios.origin, north: clear * sin(angle), east: clear * cos(angle)))
        }
        let end = points.last!
        points += Array(repeating: end, count: interval + 2)
        let region = try! Region(id: "square", center: DecisionScenarios.origin, radius: radius)
        var scenario = DecisionScenario(
            name: "stop and go round a \(Int(radius)) m region, every \(interval) s", regions: [region],
            fixes: fixes(along: TruePath(points: points), interval: interval, phase: interval / 2 - 1, seed: seed),
            required: [:])
        scenario.required[region.id] = []
        return scenario
    }

    /// Every sparse scenario of the comparison, for one report interval.
    package static func all(interval: Int) -> [DecisionScenario] {
        var out: [DecisionScenario] = []
        for (k, speed) in [10.0, 15, 28].enumerated() {
            for seed in UInt64(1)...3 {
                out.append(drive(interval: interval, speed: speed, seed: seed * 10 + UInt64(k)))
            }
        }
        for radius in [50.0, 200, 500] {
            out.append(curvingRoad(interval: interval, radius: radius, speed: 14, seed: 5))
            out.append(uTurn(interval: interval, radius: radius, speed: 14, seed: 6))
            out.append(stopAndGo(interval: interval, radius: radius, seed: 7))
        }
        return out
    }
}
