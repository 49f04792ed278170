import Foundation
import GeofenceCore

/// A synthetic situation for the decision rule: regions, a subject's fixes, and the crossings that really
/// happened (from the true path), so that a rule is judged on what it misses as much as on what it fires.
package struct DecisionScenario: Sendable {
    package var name: String
    package var regions: [Region]
    package var fixes: [Fix]
    /// For each region id, the `enter`/`exit` sequence a rule must report (in order, each once).
    package var required: [String: [RegionEventType]]
    /// Regions whose crossings are too shallow for the fixes' accuracy to require: a rule may report the
    /// real crossing or nothing, but never an event the path does not have.
    package var optional: [String: [RegionEventType]] = [:]
    /// The subject never moves: every `enter` or `exit` is false.
    package var parked = false

    package init(name: String, regions: [Region], fixes: [Fix], required: [String: [RegionEventType]]) {
        self.name = name
        self.regions = regions
        self.fixes = fixes
        self.required = required
    }
}

extension DecisionScenario {
    /// Every fix reports the speed and course of the true path at its second (one fix a second from the
    /// path's first point), as a receiver's Doppler velocity does (gpsd's `speed` and `track`). A lie reports
    /// them too: multipath moves the position, not the receiver's measured velocity; and a lie that carries a
    /// plausible velocity is the harder case for a pass between fixes, should one ever be taken in.
    package mutating func reportVelocity(along path: TruePath) {
        let velocities = path.velocities()
        for i in fixes.indices where i < velocities.count {
            fixes[i].speed = velocities[i].speed
            fixes[i].course = velocities[i].course
        }
    }
}

/// A true path: where the subject is at each second.
package struct TruePath: Sendable {
    package var points: [Coordinate]

    package init(points: [Coordinate]) { self.points = points }

    /// Along a polyline of (north, east) metres from `origin`, at `speed` m/s, one point a second.
    package static func polyline(
        from origin: Coordinate, through corners: [(north: Double, east: Double)], speed: Double
    ) -> TruePath {
        var points: [Coordinate] = []
        var travelled = 0.0
        var legStart = corners[0]
        var position = 0.0
        for corner in corners.dropFirst() {
            let dn = corner.north - legStart.north
            let de = corner.east - legStart.east
            let length = (dn * dn + de * de).squareRoot()
            while position <= travelled + length {
                let f = (position - travelled) / length
                points.append(offset(origin, north: legStart.north + dn * f, east: legStart.east + de * f))
                position += speed
            }
            travelled += length
            legStart = corner
        }
        return TruePath(points: points)
    }

    /// Straight along a bearing (degrees from north) with a speed profile: one point a second, `speeds[i]`
    /// the speed during second `i`.
    package static func profile(
        from origin: Coordinate, start: (north: Double, east: Double), bearing: Double, speeds: [Double]
    ) -> TruePath {
        let b = bearing * .pi / 180
        var s = 0.0
        var points = [offset(origin, north: start.north, east: start.east)]
        for v in speeds {
            s += v
            points.append(offset(origin, north: start.north + s * cos(b), east: start.east + s * sin(b)))
        }
        return TruePath(points: points)
    }

    /// The speed (m/s) and course (degrees clockwise from north; nil when still) at each second, as a receiver
    /// measures them from the Doppler shift: from the points a second either side (one side at the ends).
    package func velocities() -> [(speed: Double, course: Double?)] {
        points.indices.map { i in
            let a = points[max(0, i - 1)]
            let b = points[min(points.count - 1, i + 1)]
            let seconds = Double(min(points.count - 1, i + 1) - max(0, i - 1))
            guard seconds > 0 else { return (0, nil) }
            let speed = Geodesic.distance(a, b) / seconds
            guard speed > 0.01 else { return (0, nil) }
            let east = (b.longitude - a.longitude) * cos(a.latitude * .pi / 180)
            var course = atan2(east, b.latitude - a.latitude) * 180 / .pi
            if course < 0 { course += 360 }
            return (speed, course)
        }
    }

    /// The crossings of a circle by the path with a margin: the subject counts as inside once it is deeper
    /// than `margin` and as outside once it is farther out than `margin` (between, nothing changes), so
    /// only crossings that clear the boundary by `margin` on both sides are listed.
    package func crossings(of region: Region, margin: Double) -> [RegionEventType] {
        var state: RegionState = .unknown
        var out: [RegionEventType] = []
        for p in points {
            let d = Geodesic.distance(p, region.center)
            let side: RegionState? =
                d <= region.radius - margin ? .inside : (d >= region.radius + margin ? .outside : nil)
            guard let side, side != state else { continue }
            if state != .unknown { out.append(side == .inside ? .enter : .exit) }
            state = side
        }
        return out
    }
}

extension SyntheticReceiver {
    /// Fixes along a path, one per point, each with an error within its stated accuracy.
    package mutating func fixes(along path: TruePath) -> [Fix] {
        path.points.map { fix(at: $0) }
    }
}

extension SyntheticReceiver {
    /// A burst of lying fixes in a row, one a second for each of `truths` (where the subject really is):
    /// each 30-80 m off, claiming 3-5 m, aimed along `across` (radians east of north: outwards) or against
    /// it, as `pattern` says.
    package mutating func burst(
        at truths: [Coordinate], across: Double, pattern: DecisionScenarios.BurstPattern, outwardsFirst: Bool
    ) -> [Fix] {
        let first = pattern == .together ? outwardsFirst : Bool.random(using: &rng)
        let magnitude = Double.random(in: 30...80, using: &rng)
        return truths.enumerated().map { k, truth in
            let outwards: Bool
            var turn = Double.random(in: -0.2...0.2, using: &rng)
            var m = magnitude + Double.random(in: -3...3, using: &rng)
            switch pattern {
            case .together: outwards = first
            case .opposed: outwards = k % 2 == 0 ? first : !first
            case .angled:
                outwards = Bool.random(using: &rng)
                turn = Double.random(in: -(Double.pi / 3)...(Double.pi / 3), using: &rng)
                m = Double.random(in: 30...80, using: &rng)
            }
            let direction = across + (outwards ? 0 : .pi) + turn
            let lie = offset(truth, north: m * cos(direction), east: m * sin(direction))
            return outlier(at: lie, error: 0, stated: Double.random(in: 3...5, using: &rng))
        }
    }
}

/// The scenarios of Docs/events.md's comparison, each placed for a reason written beside it.
package enum DecisionScenarios {
    package static let origin = Coordinate(latitude: 48.8566, longitude: 2.3522)
    package static let start = Date(timeIntervalSince1970: 1_795_000_000)

    /// A motorway at 28 m/s, one fix a second, `eph` 16 m (actual errors up to half that, as a good
    /// receiver's are), straight east through small regions (radius 28 m) centred on one fix each, 840 m
    /// apart: at each, one fix is conclusively inside (within 12 m of the centre), the fixes either side are
    /// in the band (28 ± 8 m from the centre, the band being 12-44 m), the ones two seconds away clearly
    /// outside (56 ± 8 m). `beside`: the regions 90 m north of the road instead (never reached).
    package static func motorway(passes: Int, beside: Bool = false, seed: UInt64 = 1) -> DecisionScenario {
        let spacing = 840.0
        let path = TruePath.polyline(
            from: origin, through: [(0, -600), (0, spacing * Double(passes - 1) + 600)], speed: 28)
        var regions: [Region] = []
        var required: [String: [RegionEventType]] = [:]
        for k in 0..<passes {
            // A point of the path, so that a fix falls on the centre.
            let centre = offset(origin, north: beside ? 90 : 0, east: Double(k * 30) * 28 - 600 + 28 * 22)
            let id = "gate-\(k)"
            regions.append(try! Region(id: id, center: centre, radius: 28))
            required[id] = beside ? [] : [.enter, .exit]
        }
        var receiver = SyntheticReceiver(subject: "truck", seed: seed, start: start)
        receiver.accuracy = 16...16
        receiver.errorFraction = 0.5
        return DecisionScenario(
            name: beside ? "motorway, regions 90 m beside the road" : "motorway, \(passes) gates on the road",
            regions: regions, fixes: receiver.fixes(along: path), required: required)
    }

    /// A city drive at 10 m/s on a zigzag of streets (90° corners), 1 800 fixes, through stretches of five
    /// minutes where the receiver reports `eph` 100-350 m, between two-minute stretches of 5-15 m. Errors
    /// are anywhere within the stated accuracy. Large regions (radius 700-1 100 m) sit in the middle of the
    /// poor stretches, so that the vehicle is inside them only while its fixes are poor, and goes deeper
    /// than twice the worst accuracy (the band's margin plus an error as large as the accuracy): every such
    /// crossing is required, and a rule that refuses poor fixes never sees the vehicle inside. Small
    /// regions (radius 60-200 m) are crossed in the good stretches by more than twice 15 m: required too.
    /// Regions in the poor stretches too small for those fixes are optional (reported right or not at all).
    package static func cityDrive(seed: UInt64 = 2) -> DecisionScenario {
        // East 6 km, north 3 km, east 6 km, north 3 km: 18 km at 10 m/s.
        let corners: [(north: Double, east: Double)] = [(0, 0), (0, 6000), (3000, 6000), (3000, 12000), (6000, 12000)]
        let path = TruePath.polyline(from: origin, through: corners, speed: 10)
        // Seconds 120-419, 540-839, 960-1259 and 1380-1679 are poor.
        func poor(_ second: Int) -> Bool { second % 420 >= 120 }
        var receiver = SyntheticReceiver(subject: "taxi", seed: seed, start: start)
        var fixes: [Fix] = []
        for (i, point) in path.points.enumerated() {
            receiver.accuracy = poor(i) ? 100...350 : 5...15
            fixes.append(receiver.fix(at: point))
        }
        var regions: [Region] = []
        var required: [String: [RegionEventType]] = [:]
        var optional: [String: [RegionEventType]] = [:]
        func place(_ id: String, second: Int, radius: Double, north: Double = 0, east: Double = 0) {
            let p = path.points[second]
            let centre = offset(p, north: north, east: east)
            let region = try! Region(id: id, center: centre, radius: radius)
            regions.append(region)
            // Required crossings clear the boundary by twice the worst accuracy where they happen: the
            // path's crossings with that clearance are all of its crossings.
            let crossings = path.crossings(of: region, margin: 0)
            if poor(second) && radius < 700 {
                optional[id] = crossings
            } else {
                precondition(
                    path.crossings(of: region, margin: poor(second) ? 700 : 30) == crossings && !crossings.isEmpty,
                    "\(id) is not crossed clearly")
                required[id] = crossings
            }
        }
        place("district", second: 270, radius: 1000, north: 50)
        place("port", second: 720, radius: 800, east: 100)  // entered just after the corner at 600 s
        place("zone", second: 1110, radius: 1100, east: 200)
        place("estate", second: 1530, radius: 900, north: 100)
        place("shop", second: 60, radius: 60, north: 10)
        place("depot", second: 480, radius: 120)
        place("yard", second: 900, radius: 200, north: -80)
        place("school", second: 1320, radius: 90, east: 20)
        place("clinic", second: 1740, radius: 150, north: 40)
        place("kiosk", second: 200, radius: 100)
        place("garage", second: 1000, radius: 250, north: 60)
        place("market", second: 1600, radius: 400, north: -100)
        var scenario = DecisionScenario(
            name: "city drive, eph 100-350 m over stretches", regions: regions, fixes: fixes, required: required)
        scenario.optional = optional
        return scenario
    }

    /// Parked for an hour at 1 Hz, `distance` metres from the centre of a 100 m region, honest fixes of
    /// 3-12 m jittering within their accuracy, and once a minute a burst of one, two or three lying fixes
    /// (in turn), 30-80 m off in one direction (each burst's fixes within a few metres of each other, as
    /// multipath gives), claiming 3-5 m. Bursts point toward the centre and away from it in turn, so that
    /// each lie lands on the other side of the boundary.
    package static func parked(distance: Double, seed: UInt64 = 3) -> DecisionScenario {
        let region = try! Region(id: "depot", center: origin, radius: 100)
        let spot = offset(origin, north: distance * 0.6, east: distance * 0.8)
        var receiver = SyntheticReceiver(subject: "van", seed: seed, start: start)
        var fixes: [Fix] = []
        var second = 0
        var burst = 0
        while second < 3600 {
            if second % 60 == 30 {
                burst += 1
                let size = (burst - 1) % 3 + 1
                let away = burst % 2 == 0
                let magnitude = Double.random(in: 30...80, using: &receiver.rng)
                let radial = atan2(0.8, 0.6) + (away ? 0 : .pi) + Double.random(in: -0.2...0.2, using: &receiver.rng)
                for _ in 0..<size {
                    let m = magnitude + Double.random(in: -3...3, using: &receiver.rng)
                    let lie = offset(spot, north: m * cos(radial), east: m * sin(radial))
                    fixes.append(
                        receiver.outlier(at: lie, error: 0, stated: Double.random(in: 3...5, using: &receiver.rng)))
                    second += 1
                }
            } else {
                fixes.append(receiver.fix(at: spot))
                second += 1
            }
        }
        var scenario = DecisionScenario(
            name: "parked \(Int(distance)) m from the centre of a 100 m region, lying bursts", regions: [region],
            fixes: fixes, required: ["depot": []])
        scenario.parked = true
        return scenario
    }

    /// How the lies of one burst point, against the boundary (see `parkedOnEdge`).
    package enum BurstPattern: String, CaseIterable, Sendable {
        /// Every lie of a burst the same way (inwards, or outwards, a burst in turn), within a few metres
        /// of each other: multipath off one wall.
        case together
        /// Inwards and outwards in turn within a burst, starting either way.
        case opposed
        /// Each lie of a burst across the boundary either way, at up to 60° from straight across.
        case angled
    }

    /// Parked for an hour at 1 Hz `offset` metres outside (negative: inside) the boundary of a circle of
    /// `radius`, honest fixes of 3-12 m jittering within their accuracy, and once a minute a burst of
    /// `burst` lying fixes in a row, each 30-80 m off, claiming 3-5 m, aimed across the boundary as
    /// `pattern` says, so that every lie lands well on one side or the other. Every fix reports a speed of 0.
    package static func parkedOnEdge(
        radius: Double, offset edge: Double = 0, burst: Int, pattern: BurstPattern, seed: UInt64
    ) -> DecisionScenario {
        let region = try! Region(id: "edge", center: origin, radius: radius)
        let bearing = 0.9  // from the centre to the spot, radians east of north
        let spot = offset(origin, north: (radius + edge) * cos(bearing), east: (radius + edge) * sin(bearing))
        var receiver = SyntheticReceiver(subject: "truck", seed: seed, start: start)
        var fixes: [Fix] = []
        var count = 0
        while fixes.count < 3600 {
            guard fixes.count % 60 == 30 else {
                fixes.append(receiver.fix(at: spot))
                continue
            }
            count += 1
            fixes += receiver.burst(
                at: Array(repeating: spot, count: burst), across: bearing, pattern: pattern,
                outwardsFirst: count % 2 == 0)
        }
        var scenario = DecisionScenario(
            name: "parked \(edge) m off the edge of a \(Int(radius)) m region, bursts of \(burst) \(pattern)",
            regions: [region], fixes: fixes, required: ["edge": []])
        scenario.parked = true
        scenario.reportVelocity(along: TruePath(points: Array(repeating: spot, count: fixes.count)))
        return scenario
    }

    /// A truck that arrives along a circle `offset` metres outside (negative: inside) the boundary of a circle
    /// of `radius` (half a minute at 15 m/s, or slower where the bend would take more than 3 m/s² sideways, so
    /// that the motion check knows its motion), brakes at
    /// `deceleration` to a stop, and is parked there for the rest of an hour at 1 Hz (fixes of 3-12 m). A burst of `burst` lies (as `parkedOnEdge`'s, aimed across the boundary)
    /// comes at once with the braking: from the last second of it to two seconds after the stop (as `seed`
    /// says), when the motion check may still be refusing honest fixes for the braking (its estimate
    /// overshoots); then one a minute, as `parkedOnEdge`. The truck is always `offset` metres off the
    /// boundary, on the side it stops on: every `enter` or `exit` is false. Every fix reports the path's speed
    /// and course (`reportVelocity`).
    package static func brakedOnEdge(
        radius: Double, offset edge: Double = 0, deceleration: Double = 7, burst: Int, pattern: BurstPattern,
        seed: UInt64
    ) -> DecisionScenario {
        let region = try! Region(id: "edge", center: origin, radius: radius)
        let bearing = 0.9  // from the centre to the spot, radians east of north
        let bend = radius + edge
        var speeds = Array(repeating: min(15, (3 * bend).squareRoot()), count: 30)
        while speeds.last! > 0 { speeds.append(max(0, speeds.last! - deceleration)) }
        let stop = speeds.count  // the first point at the spot
        let travelled = speeds.reduce(0, +)
        speeds += Array(repeating: 0, count: 3600 - speeds.count - 1)
        // Clockwise about the centre along the circle of the spot, ending on it.
        var s = 0.0
        var points: [Coordinate] = []
        for v in [0] + speeds {
            s += v
            let angle = bearing - (travelled - s) / bend
            points.append(offset(origin, north: bend * cos(angle), east: bend * sin(angle)))
        }
        let path = TruePath(points: points)
        let burstAt = stop - 1 + Int(seed % 4)
        var receiver = SyntheticReceiver(subject: "truck", seed: seed, start: start)
        var fixes: [Fix] = []
        var count = 0
        while fixes.count < path.points.count {
            let truth = path.points[fixes.count]
            guard fixes.count == burstAt || (fixes.count % 60 == 30 && fixes.count > burstAt + burst) else {
                fixes.append(receiver.fix(at: truth))
                continue
            }
            count += 1
            let end = min(fixes.count + burst, path.points.count)
            fixes += receiver.burst(
                at: Array(path.points[fixes.count..<end]), across: bearing, pattern: pattern,
                outwardsFirst: count % 2 == 0)
        }
        var scenario = DecisionScenario(
            name:
                "braked at \(deceleration) m/s² to \(edge) m off the edge of a \(Int(radius)) m region, bursts of \(burst) \(pattern) from \(burstAt) s",
            regions: [region], fixes: fixes, required: ["edge": []])
        scenario.parked = true
        scenario.reportVelocity(along: path)
        return scenario
    }

    /// A truck at 15 m/s braking at `deceleration` so as to stop 30 m inside a 200 m region, then parked two
    /// minutes: the path and the region, for `movingThroughBurst` (the burst placed about the braking).
    package static func brakingInto(deceleration: Double) -> (path: TruePath, region: Region) {
        var speeds = Array(repeating: 15.0, count: 10)
        while speeds.last! > 0 { speeds.append(max(0, speeds.last! - deceleration)) }
        let braking = speeds.reduce(0, +) - 150
        speeds += Array(repeating: 0, count: 120)
        let path = TruePath.profile(from: origin, start: (0, -(200 - 30) - braking - 150), bearing: 90, speeds: speeds)
        return (path, try! Region(id: "yard", center: origin, radius: 200))
    }

    /// A truck parked a minute 10 m outside the edge of a circle of `radius`, then off at `acceleration` to
    /// 10 m/s, straight through it: the path and the region, for `movingThroughBurst`.
    package static func pullingAway(radius: Double, acceleration: Double) -> (path: TruePath, region: Region) {
        var speeds = Array(repeating: 0.0, count: 60)
        while speeds.last! < 10 { speeds.append(min(10, speeds.last! + acceleration)) }
        speeds += Array(repeating: 10, count: Int(2 * radius / 10) + 8)
        let path = TruePath.profile(from: origin, start: (0, -(radius + 10)), bearing: 90, speeds: speeds)
        return (path, try! Region(id: "bay", center: origin, radius: radius))
    }

    /// A subject that really moves along `path` (one fix a second, 3-12 m, honest, each with the path's speed
    /// and course: `reportVelocity`) in and out of `region`,
    /// with a burst of `burst` lies (as `parkedOnEdge`'s, aimed across the boundary from where the subject
    /// really is) in place of the fixes of seconds `burstAt..<burstAt + burst`. Required: the path's
    /// crossings.
    package static func movingThroughBurst(
        _ name: String, path: TruePath, region: Region, burstAt: Int, burst: Int, pattern: BurstPattern,
        seed: UInt64
    ) -> DecisionScenario {
        var receiver = SyntheticReceiver(subject: "truck", seed: seed, start: start)
        var fixes: [Fix] = []
        let outwardsFirst = seed % 2 == 0
        while fixes.count < path.points.count {
            let truth = path.points[fixes.count]
            guard fixes.count == burstAt else {
                fixes.append(receiver.fix(at: truth))
                continue
            }
            // Across the boundary: along the line from the centre through where the subject is (a bearing
            // on the local plane is good enough for aiming).
            let bearing = atan2(
                (truth.longitude - region.center.longitude) * cos(region.center.latitude * .pi / 180),
                truth.latitude - region.center.latitude)
            fixes += receiver.burst(
                at: Array(path.points[burstAt..<min(burstAt + burst, path.points.count)]), across: bearing,
                pattern: pattern, outwardsFirst: outwardsFirst)
        }
        var scenario = DecisionScenario(
            name: "\(name), a burst of \(burst) \(pattern) at \(burstAt) s", regions: [region], fixes: fixes,
            required: [region.id: path.crossings(of: region, margin: 0)])
        scenario.reportVelocity(along: path)
        return scenario
    }

    /// Parked for an hour 20 m inside a 200 m region with a receiver that reports `eph` 150 m (a basement,
    /// an urban canyon), its fixes anywhere within that.
    package static func parkedPoor(seed: UInt64 = 4) -> DecisionScenario {
        let region = try! Region(id: "block", center: origin, radius: 200)
        let spot = offset(origin, north: 180, east: 0)
        var receiver = SyntheticReceiver(subject: "van", seed: seed, start: start)
        receiver.accuracy = 150...150
        var scenario = DecisionScenario(
            name: "parked 20 m inside a 200 m region, eph 150 m", regions: [region],
            fixes: (0..<3600).map { _ in receiver.fix(at: spot) }, required: ["block": []])
        scenario.parked = true
        return scenario
    }

    /// A van that drives in at 10 m/s, brakes at 2 m/s² to a stop at the centre of a 30 m region (a fuel
    /// pump), stays 20 s and pulls away at 2 m/s² to 10 m/s; fixes of 3-6 m.
    package static func briefStop(seed: UInt64 = 5) -> DecisionScenario {
        let region = try! Region(id: "pump", center: origin, radius: 30)
        // 200 m at 10 m/s, 25 m braking (5 s), 20 s still, 25 m pulling away, 200 m on.
        let speeds =
            Array(repeating: 10.0, count: 20) + [9, 7, 5, 3, 1] + Array(repeating: 0.0, count: 20) + [1, 3, 5, 7, 9]
            + Array(repeating: 10.0, count: 20)
        let path = TruePath.profile(from: origin, start: (0, -225), bearing: 90, speeds: speeds)
        var receiver = SyntheticReceiver(subject: "van", seed: seed, start: start)
        receiver.accuracy = 3...6
        return DecisionScenario(
            name: "20 s stop in a 30 m region", regions: [region], fixes: receiver.fixes(along: path),
            required: ["pump": [.enter, .exit]])
    }

    /// Every scenario of the comparison, with its parked variants.
    package static var all: [DecisionScenario] {
        [motorway(passes: 1), motorway(passes: 10), motorway(passes: 10, beside: true), cityDrive(), briefStop()]
            + [100.0, 97, 103, 92, 108].map { parked(distance: $0) }
            + [
                parkedOnEdge(radius: 200, burst: 3, pattern: .opposed, seed: 1),
                parkedOnEdge(radius: 40, offset: 3, burst: 2, pattern: .angled, seed: 2), parkedPoor(),
            ]
    }
}

extension DecisionScenario {
    /// The fixes as gpsd TPV lines (what `geofence replay` reads), one per fix.
    package var tpvLines: String {
        fixes.map { fix in
            let time = TimestampParser.format(fix.time ?? DecisionScenarios.start)
            return
                #"{"class":"TPV","device":"\#(fix.subject)","mode":3,"time":"\#(time)","lat":\#(fix.latitude ?? 0),"lon":\#(fix.longitude ?? 0),"eph":\#(fix.horizontalAccuracy ?? 0)}"#
        }.joined(separator: "\n") + "\n"
    }

    /// The regions as a regions file (`geofence import`).
    package var regionsFile: String {
        let entries = regions.map { r in
            #"{"id":"\#(r.id)","lat":\#(r.center.latitude),"lon":\#(r.center.longitude),"radius":\#(r.radius)}"#
        }
        return #"{"regions":["# + entries.joined(separator: ",") + "]}\n"
    }
}

/// The poor receiver of the decisions on the track (Tests/GeofenceCoreTests/FusedDecisionTests.swift), here so
/// that the end-to-end test of `run --track-factor` feeds the engine the very fixes the in-process tests judge.
extension DecisionScenarios {
    /// The 160 m region the approach drives through, centred on `origin`.
    package static let yard = try! Region(id: "yard", center: origin, radius: 160)

    /// A receiver `subject` reporting 110-190 m once a second from `start` (errors anywhere within 95 % of
    /// that, as `SyntheticReceiver` draws them) along `path`.
    package static func poorFixes(
        along path: TruePath, seed: UInt64, subject: String = "van", start: Date = start
    ) -> [Fix] {
        var receiver = SyntheticReceiver(subject: subject, seed: seed, start: start)
        receiver.accuracy = 110...190
        return receiver.fixes(along: path)
    }

    /// Straight east at 20 m/s through the centre of `yard`, from 320 m before its centre (160 m outside its
    /// boundary: a fix there is conclusively outside only when its error and accuracy happen to allow,
    /// `d ≥ 160 + a` with `a` 110-190 m) to 320 m past it: 33 fixes, 16 of them inside. No fix of 110-190 m is
    /// ever conclusively inside unless it lands within 50 m of the centre with `a` ≤ 110-ish, so the plain rule
    /// often says nothing at all, or only `determined`.
    package static func approach(seed: UInt64, start: Date = start) -> [Fix] {
        let path = TruePath.profile(
            from: origin, start: (0, -320), bearing: 90, speeds: Array(repeating: 20, count: 32))
        return poorFixes(along: path, seed: seed, start: start)
    }

    /// What the monitor makes of `fixes` in process: each through a `FixFilter` of its defaults, then a
    /// `RegionMonitor` of `configuration` holding `regions` (the engine's path, without the store), at `now`.
    package static func monitored(
        _ fixes: [Fix], regions: [Region], configuration: MonitorConfiguration, now: Date = start
    ) -> (events: [RegionEvent], monitor: RegionMonitor) {
        var filter = FixFilter()
        var monitor = RegionMonitor(
            configuration: configuration, ids: EventIDGenerator(rng: SeededGenerator(seed: 9)))
        for (i, region) in regions.enumerated() { monitor.insert(region, seq: Int64(i + 1)) }
        var events: [RegionEvent] = []
        for fix in fixes {
            guard case .accepted(let weighted) = filter.evaluate(fix) else { continue }
            events += monitor.process(weighted, now: now).events
        }
        return (events, monitor)
    }
}
