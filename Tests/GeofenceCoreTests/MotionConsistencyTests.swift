import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

@Suite("Motion check")
struct MotionConsistencyTests {
    let motion = MonitorConfiguration().motion
    let here = Coordinate(latitude: 52.52, longitude: 13.405)

    private func point(north: Double, east: Double = 0) -> GeocentricPoint {
        GeocentricPoint(offset(here, north: north, east: east))
    }

    /// A minute parked at `here`, fixes of 5 m jittering a few metres: the track it leaves.
    private func parkedMinute() -> MotionConsistency.Track? {
        var track: MotionConsistency.Track?
        var rng = SeededGenerator(seed: 1)
        for second in 0..<60 {
            let verdict = motion.update(
                &track,
                point: point(
                    north: Double.random(in: -3...3, using: &rng), east: Double.random(in: -3...3, using: &rng)),
                time: Double(second), accuracy: 5)
            #expect(verdict == (second == 0 ? .first : .agrees), "second \(second)")
        }
        return track
    }

    @Test("a parked track refuses a 30 m lie claiming 4 m, and takes the next honest fix")
    func parkedLie() {
        var track = parkedMinute()
        #expect(motion.update(&track, point: point(north: 30), time: 60, accuracy: 4) == .outlier)
        #expect(motion.update(&track, point: point(north: 1), time: 61, accuracy: 5) == .agrees)
    }

    @Test("a burst of three lies is refused; a run of seven that agree with each other is the new truth")
    func burstsAndResync() {
        var track = parkedMinute()
        for (i, t) in (60..<63).enumerated() {
            #expect(
                motion.update(&track, point: point(north: 45 + Double(i)), time: Double(t), accuracy: 4) == .outlier)
        }
        #expect(motion.update(&track, point: point(north: 0), time: 63, accuracy: 5) == .agrees)
        var verdicts: [MotionConsistency.Verdict] = []
        for t in 64..<71 {
            verdicts.append(motion.update(&track, point: point(north: 200), time: Double(t), accuracy: 4))
        }
        #expect(verdicts == Array(repeating: .outlier, count: 6) + [.resynchronized])
        #expect(motion.update(&track, point: point(north: 200.5), time: 71, accuracy: 4) == .agrees)
    }

    @Test("a run must agree as a track: refused fixes, then a burst 40 m off, make two runs and no start over")
    func runAgreesAsATrack() {
        // Three refused fixes where the subject went (200 m off a parked track), then four lies 40 m from them:
        // each within 60 m/s of the one before, which was all a run asked before issue 27 (it started over from
        // the fifth, a lie). The lies are no continuation of the run's motion (at rest): a new run of four.
        var track = parkedMinute()
        var verdicts: [MotionConsistency.Verdict] = []
        for t in 60..<63 {
            verdicts.append(motion.update(&track, point: point(north: 200), time: Double(t), accuracy: 4))
        }
        for t in 63..<67 {
            verdicts.append(motion.update(&track, point: point(north: 240), time: Double(t), accuracy: 4))
        }
        #expect(verdicts == Array(repeating: .outlier, count: 7))
    }

    @Test("after ten minutes unseen, a fix 5 km away is a drive, not a lie")
    func gap() {
        var track = parkedMinute()
        #expect(motion.update(&track, point: point(north: 5000), time: 660, accuracy: 5) == .agrees)
    }

    @Test("a lie, then ten minutes unseen: a fix 5 km away is still a drive, not another lie")
    func gapAfterLie() {
        var track = parkedMinute()
        #expect(motion.update(&track, point: point(north: 40), time: 60, accuracy: 4) == .outlier)
        #expect(motion.update(&track, point: point(north: 5000), time: 660, accuracy: 5) == .agrees)
    }

    @Test("a fix beyond a lie's reach right after a refused one is judged by the gate alone (a real departure)")
    func departureAfterRefusal() {
        // Fixes every 10 s: parked, then 400 m away (8 m/s² from rest: refused), then still there 10 s later,
        // which 2 m/s² from rest reaches. The second is no lie of a burst (they land within 100 m).
        var track: MotionConsistency.Track?
        #expect(motion.update(&track, point: point(north: 400), time: 0, accuracy: 3) == .first)
        #expect(motion.update(&track, point: point(north: 400), time: 10, accuracy: 3) == .agrees)
        #expect(motion.update(&track, point: point(north: 0), time: 20, accuracy: 3) == .outlier)
        #expect(motion.update(&track, point: point(north: 0), time: 30, accuracy: 3) == .agrees)
    }

    @Test("a burst of three lies in different directions is refused, every one, and the honest fix after it taken")
    func burstInDifferentDirections() {
        // A minute parked with a receiver of 3-12 m whose fixes jitter anywhere within that: its track is
        // looser than `parkedMinute`'s, and its gate, widened by each refused second, reaches 30 m.
        var track: MotionConsistency.Track?
        var rng = SeededGenerator(seed: 3)
        for second in 0..<60 {
            let accuracy = Double.random(in: 3...12, using: &rng)
            let error = 0.95 * accuracy * Double.random(in: 0...1, using: &rng).squareRoot()
            let bearing = Double.random(in: 0..<(2 * .pi), using: &rng)
            _ = motion.update(
                &track, point: point(north: error * cos(bearing), east: error * sin(bearing)), time: Double(second),
                accuracy: accuracy)
        }
        // Inwards, outwards, then at an angle, each claiming 4 m.
        let lies = [point(north: -30), point(north: 30), point(north: 23, east: 23)]
        for (i, lie) in lies.enumerated() {
            #expect(motion.update(&track, point: lie, time: Double(60 + i), accuracy: 4) == .outlier, "lie \(i)")
        }
        #expect(motion.update(&track, point: point(north: 4), time: 63, accuracy: 8) == .agrees)
    }

    @Test(
        "a subject that pulled away during a burst is taken back after five honest fixes within the gate")
    func pullAwayDuringBurst() {
        // Parked a minute, then off east at 4 m/s² from second 60 while a burst of three lies (45 m north, 4 m
        // claimed) hides the start. The honest fixes after it are where the track, widened by the burst, may
        // expect a subject that manoeuvred (within the gate), yet each follows a refused one and is far from
        // where the parked track stood: likelier another lie. Their run continues the track's motion, so five
        // of them start it over (before, the first taken in was the sixth; with a run that had to reach
        // `resyncRun`, the seventh).
        var track = parkedMinute()
        for t in 60..<63 {
            #expect(motion.update(&track, point: point(north: 45), time: Double(t), accuracy: 4) == .outlier)
        }
        var verdicts: [MotionConsistency.Verdict] = []
        for t in 63..<70 {
            let s = Double(t - 60)
            verdicts.append(
                motion.update(&track, point: point(north: 0, east: 2 * s * s), time: Double(t), accuracy: 5))
        }
        #expect(verdicts == Array(repeating: .outlier, count: 4) + [.resynchronized, .agrees, .agrees], "\(verdicts)")
    }

    @Test("the lies of a burst of six, 35 m off, never start the filter over: the first is outside the gate")
    func longBurstNoShortRun() {
        // The first lie of a burst is far outside a parked track's gate, and a run that holds it needs all of
        // `resyncRun`; lies that start a run of their own later in the burst are at most four.
        var track = parkedMinute()
        var verdicts: [MotionConsistency.Verdict] = []
        for t in 60..<66 {
            verdicts.append(motion.update(&track, point: point(north: 35), time: Double(t), accuracy: 4))
        }
        #expect(verdicts == Array(repeating: .outlier, count: 6))
        #expect(motion.update(&track, point: point(north: 1), time: 66, accuracy: 5) == .agrees)
    }

    @Test("a vehicle braking hard and turning stays within the gate")
    func manoeuvres() {
        var track: MotionConsistency.Track?
        var north = 0.0
        var east = 0.0
        var speed = 25.0
        var heading = 0.0
        for second in 0..<120 {
            if (40..<46).contains(second) { speed -= 4 }  // 4 m/s² braking
            if (50..<60).contains(second) { heading += .pi / 20 }  // a 90° turn at 1 m/s... 5 m/s
            if (70..<80).contains(second) { speed += 2 }
            north += speed * cos(heading)
            east += speed * sin(heading)
            let verdict = motion.update(
                &track, point: point(north: north, east: east), time: Double(second), accuracy: 4)
            #expect(verdict == (second == 0 ? .first : .agrees), "second \(second)")
        }
    }

    @Test("a clock that steps back starts the motion over")
    func clockStepsBack() {
        var track = parkedMinute()
        #expect(motion.update(&track, point: point(north: 900), time: 10, accuracy: 5) == .resynchronized)
        #expect(motion.update(&track, point: point(north: 900), time: 11, accuracy: 5) == .agrees)
    }

    /// A fix at `coordinate` reporting `speed` along `course`, as the filter passes it on.
    private func weighted(_ coordinate: Coordinate, speed: Double, course: Double) -> WeightedFix {
        WeightedFix(
            fix: Fix(
                subject: "t", time: Date(timeIntervalSince1970: 0), mode: .threeD, latitude: coordinate.latitude,
                longitude: coordinate.longitude, horizontalAccuracy: 5, speed: speed, course: course),
            time: Date(timeIntervalSince1970: 0), coordinate: coordinate, accuracy: 5, accuracyEstimated: false)
    }

    @Test("a fix's reported speed and course, in earth-centred axes: east and north where it is")
    func reportedVelocityAxes() throws {
        let equator = Coordinate(latitude: 0, longitude: 0)
        let east = try #require(RegionMonitor.reportedVelocity(weighted(equator, speed: 10, course: 90)))
        #expect(abs(east.x) < 1e-9 && abs(east.y - 10) < 1e-9 && abs(east.z) < 1e-9)
        let north = try #require(RegionMonitor.reportedVelocity(weighted(equator, speed: 10, course: 0)))
        #expect(abs(north.x) < 1e-9 && abs(north.y) < 1e-9 && abs(north.z - 10) < 1e-9)
        // Here, along the course: within 0.2° (geocentric against geodetic north) of a metre's step that way.
        for course in stride(from: 0.0, to: 360, by: 30) {
            let v = try #require(RegionMonitor.reportedVelocity(weighted(here, speed: 1, course: course)))
            let radians = course * .pi / 180
            let a = GeocentricPoint(here)
            let b = GeocentricPoint(offset(here, north: cos(radians), east: sin(radians)))
            let step = GeocentricPoint(x: b.x - a.x, y: b.y - a.y, z: b.z - a.z)
            #expect(
                GeocentricPoint(x: 0, y: 0, z: 0).chord(
                    to: GeocentricPoint(x: v.x - step.x, y: v.y - step.y, z: v.z - step.z)) < 0.004, "course \(course)")
        }
        // No velocity without both, or with a speed no vehicle has.
        var fix = weighted(here, speed: 10, course: 0)
        fix.fix.course = nil
        #expect(RegionMonitor.reportedVelocity(fix) == nil)
        #expect(RegionMonitor.reportedVelocity(weighted(here, speed: -1, course: 0)) == nil)
        #expect(RegionMonitor.reportedVelocity(weighted(here, speed: .infinity, course: 0)) == nil)
    }

    @Test("position and reported velocity taken in together: the Kalman filter that takes them one after the other")
    func jointUpdateIsSequential() throws {
        // Both models alike, so that the mix is one Kalman filter whatever the weights: its covariance and estimate
        // after one fix with a velocity must be those of the textbook filter taking the position, then the velocity.
        let q = 2.0
        let same = MotionConsistency(steadyAcceleration: q, manoeuvreAcceleration: q)
        let unitNorth: GeocentricPoint = {
            let a = GeocentricPoint(here)
            let b = GeocentricPoint(offset(here, north: 1, east: 0))
            return GeocentricPoint(x: b.x - a.x, y: b.y - a.y, z: b.z - a.z)
        }()
        var track: MotionConsistency.Track?
        #expect(same.update(&track, point: point(north: 0), time: 0, accuracy: 8) == .first)
        #expect(
            same.update(
                &track, point: point(north: 6), time: 2, accuracy: 6,
                velocity: GeocentricPoint(x: unitNorth.x * 4, y: unitNorth.y * 4, z: unitNorth.z * 4)) == .agrees)
        let joint = same.estimate(of: try #require(track))

        // The textbook filter along the north axis (the axes share one covariance): state (p, v), p in metres north.
        let dt = 2.0
        var (p, v) = (0.0, 0.0)
        var (pp, pv, vv) = (16.0, 0.0, 1600.0)  // (8 m / 2)², no velocity known
        (pp, pv, vv) = (
            pp + 2 * dt * pv + dt * dt * vv + q * q * dt * dt * dt / 3, pv + dt * vv + q * q * dt * dt / 2,
            vv + q * q * dt
        )
        p += v * dt
        // The position: 6 m north, error (6 m / 2)².
        var s = pp + 9
        var (kp, kv) = (pp / s, pv / s)
        (p, v) = (p + kp * (6 - p), v + kv * (6 - p))
        (pp, pv, vv) = ((1 - kp) * pp, (1 - kp) * pv, vv - kv * pv)
        // The velocity: 4 m/s north, error 1 m/s along and 4 m/s × sin 5° across (both axes share the larger sum).
        let rv = 1 + 16 * pow(sin(5 * Double.pi / 180), 2)
        s = vv + rv
        (kp, kv) = (pv / s, vv / s)
        (p, v) = (p + kp * (4 - v), v + kv * (4 - v))
        (pp, pv, vv) = (pp - pv * pv / s, pv * rv / s, vv * rv / s)

        let north = joint.position.chord(to: point(north: 0))
        #expect(abs(north - p) < 1e-6, "position \(north) m north, the textbook filter \(p) m")
        #expect(abs(joint.speed - v) < 1e-6, "speed \(joint.speed), the textbook filter \(v)")
        #expect(abs(joint.sigma * joint.sigma - pp) < 1e-9, "pp \(joint.sigma * joint.sigma) against \(pp)")
        #expect(abs(joint.positionVelocity - pv) < 1e-9, "pv \(joint.positionVelocity) against \(pv)")
        #expect(
            abs(joint.speedSigma * joint.speedSigma - vv) < 1e-9,
            "vv \(joint.speedSigma * joint.speedSigma) against \(vv)")
    }

    @Test("a truck braking hard: with the speed its first braking fix reports, the track slows with it at once")
    func reportedSpeedFollowsBraking() throws {
        // North at 10 m/s for half a minute, then braking at 7 m/s² to a stop 7.1 m on; fixes exact, claiming 5 m.
        func drive(reporting: Bool) -> MotionConsistency.Track? {
            var track: MotionConsistency.Track?
            let unitNorth: GeocentricPoint = {
                let a = GeocentricPoint(here)
                let b = GeocentricPoint(offset(here, north: 1, east: 0))
                return GeocentricPoint(x: b.x - a.x, y: b.y - a.y, z: b.z - a.z)
            }()
            func velocity(_ speed: Double) -> GeocentricPoint? {
                reporting
                    ? GeocentricPoint(x: unitNorth.x * speed, y: unitNorth.y * speed, z: unitNorth.z * speed) : nil
            }
            for second in 0...30 {
                _ = motion.update(
                    &track, point: point(north: 10 * Double(second)), time: Double(second), accuracy: 5,
                    velocity: velocity(10))
            }
            // The first fix of the braking: 3.5 m short of where the track expects it, reporting 3 m/s.
            for (second, north, speed) in [(31, 306.5, 3.0)] {
                let verdict = motion.update(
                    &track, point: point(north: north), time: Double(second), accuracy: 5, velocity: velocity(speed))
                #expect(verdict == .agrees, "second \(second), reporting \(reporting)")
            }
            return track
        }
        let reported = motion.estimate(of: try #require(drive(reporting: true)))
        let positions = motion.estimate(of: try #require(drive(reporting: false)))
        print("braking: \(reported.speed) m/s with the reported speed, \(positions.speed) m/s without")
        #expect(reported.speed < 4.5, "\(reported.speed) m/s")
        #expect(positions.speed > 6, "\(positions.speed) m/s: the positions alone take longer to show the stop")
    }
}
