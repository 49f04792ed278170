import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// The turning bound of an inferred pass (`SidewaysReach`): how far a path can stray from the line between two
/// fixes, given the velocities at both ends and a bound on the acceleration.
@Suite("Sideways reach")
struct SidewaysReachTests {
    @Test("along the line at both ends, from and to the line: A·T²/16, the swerve out and back at full grip")
    func closedForm() {
        let reach = SidewaysReach.reach(
            accuracies: (0, 0), starting: (0, 0), ending: (0, 0), time: 7, acceleration: 8)
        #expect(abs(reach - 8 * 49 / 16) < 1e-9)
        // Positions off by their accuracies add at most those; a course error adds the drift it allows.
        let loose = SidewaysReach.reach(
            accuracies: (6.8, 8.8), starting: (-2.5, 2.5), ending: (-2.5, 2.5), time: 7, acceleration: 8)
        #expect(loose > reach + 8.8 && loose < reach + 8.8 + 10)
        // Nothing to say without a bound or a time.
        let off = SidewaysReach.reach(accuracies: (1, 1), starting: (0, 0), ending: (0, 0), time: 7, acceleration: 0)
        #expect(off == .infinity)
    }

    @Test("no path with accelerations within the bound strays farther than it says (random paths)")
    func sound() {
        var rng = SeededGenerator(seed: 27)
        for _ in 0..<4000 {
            let a = Double.random(in: 1...12, using: &rng)
            let time = Double.random(in: 0.5...20, using: &rng)
            var y = Double.random(in: -10...10, using: &rng)
            var v = Double.random(in: -6...6, using: &rng)
            let (y0, v0) = (y, v)
            // Piecewise-constant accelerations within ±A, often at the bound (the extremes are bang-bang).
            let pieces = Int.random(in: 1...6, using: &rng)
            let step = time / Double(pieces * 50)
            var extreme = abs(y)
            for _ in 0..<pieces {
                let pick = Double.random(in: 0...1, using: &rng)
                let acceleration = pick < 0.6 ? (pick < 0.3 ? a : -a) : Double.random(in: -a...a, using: &rng)
                for _ in 0..<50 {
                    y += v * step + acceleration * step * step / 2
                    v += acceleration * step
                    extreme = max(extreme, abs(y))
                }
            }
            let bound = SidewaysReach.reach(
                accuracies: (abs(y0), abs(y)), starting: (v0, v0), ending: (v, v), time: time, acceleration: a)
            #expect(extreme <= bound + 1e-6, "A \(a), T \(time), y \(y0) → \(y), v \(v0) → \(v)")
        }
    }

    @Test("a velocity's sideways part lies within what its speed and course errors allow")
    func lateral() {
        var rng = SeededGenerator(seed: 5)
        for _ in 0..<2000 {
            let speed = Double.random(in: 0...40, using: &rng)
            let azimuth = Double.random(in: 0..<360, using: &rng)
            let course = azimuth + Double.random(in: -90...90, using: &rng)
            let speedError = Double.random(in: 0...2, using: &rng)
            let courseError = Double.random(in: 0...30, using: &rng)
            let (lo, hi) = SidewaysReach.lateral(
                speed: speed, course: course + 720, azimuth: azimuth, speedError: speedError, courseError: courseError)
            for _ in 0..<8 {
                let s = max(0, speed + Double.random(in: -speedError...speedError, using: &rng))
                let c = course + Double.random(in: -courseError...courseError, using: &rng)
                let side = s * sin((c - azimuth) * .pi / 180)
                #expect(side >= lo - 1e-9 && side <= hi + 1e-9)
            }
        }
    }
}
