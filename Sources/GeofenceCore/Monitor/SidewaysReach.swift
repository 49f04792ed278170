import Foundation

/// How far a path between two fixes can stray to the side of the straight line through them, given the courses
/// and speeds at both ends and how sharply a vehicle can turn: the second certificate of an inferred pass
/// (Docs/events.md, "Passes between fixes", step 5). The first bounds a path's length; this one its bends.
///
/// The derivation. Take the line through the fixes `p1` and `p2` as the x axis and let `y(t)` be the true path's
/// signed distance from it (to the right of the direction `p1 → p2`), `t` from 0 at the first fix to `T` at the
/// second.
/// - Ends: the true positions are within the accuracies of the fixes, which lie on the line, so
///   `|y(0)| ≤ a1` and `|y(T)| ≤ a2`. The true velocity at each end is within the reported speed ± `δ` and
///   the reported course ± `e`, so its sideways part `y′` lies in an interval `[lo, hi]` (`lateral`).
/// - Turning: the vehicle's horizontal acceleration is at most `A` in any direction (tyres grip up to a
///   friction circle: braking, speeding up and turning share it), so `|y″| ≤ A`.
/// - The largest `y` is at an end, or at some `τ` inside where `y′(τ) = 0`. From the start, over `τ`:
///   `y′(s) ≤ v + A·s` (it grew at most at `A` from `v ≤ hi₁`) and `y′(s) ≤ A·(τ − s)` (it must fall to 0
///   by `τ`), so `y(τ) ≤ a1 + G(v, τ)` with `G(v, τ) = ∫₀^τ min(v + A·s, A·(τ − s)) ds
///   = (A·τ + v)²/(4A) − v²/(2A)` for `|v| ≤ A·τ`; `y′(τ) = 0` is out of reach when `v < −A·τ`, and when
///   `v > A·τ` only a smaller start velocity reaches it, so `v` is taken as at most `A·τ`. From the end,
///   backwards over `T − τ`, the same with `w = −lo₂` (coming back from that side): `y(τ) ≤ a2 + G(w, T − τ)`.
///   `G` grows with its time and with the velocity (`∂G/∂v = (A·τ − v)/(2A) ≥ 0`), so the worst case takes
///   the end velocities at their limits, and the first bound `f(τ)` rises in `τ` while the second `g(τ)`
///   falls. For any `τ₀` where both are defined, `min(f, g) ≤ max(f(τ₀), g(τ₀))` at every `τ` (`f(τ) ≤ f(τ₀)`
///   before it, `g(τ) ≤ g(τ₀)` after), tightest where they cross: where neither velocity is cut, `f = g` is
///   linear in `τ` (a difference of squares) and gives it at once, else bisection finds it.
/// - The other side is the same with the velocities mirrored. With no course at the ends (`y′` is then
///   anything up to the speed) this gives nothing useful, and is not used. When the ends' velocities are
///   farther apart than `A·T` allows, no path of the model joins them: the vehicle turned harder than `A`, or
///   a velocity was off by more than assumed, and the bound says nothing (infinity) rather than something
///   wrong.
///
/// At `T = 7 s` with both courses exactly along the line and no position error this is `A·T²/16`: a swerve 35 m
/// aside and back in 7 s needs `A ≈ 11.4 m/s²`.
package enum SidewaysReach {
    /// The interval of a velocity's component to the right of a line of azimuth `azimuth` (degrees), for a
    /// velocity reported as `speed` (m/s) along `course` (degrees), true to within `speedError` in speed and
    /// `courseError` (degrees) in direction. Assumes the course within 90° of the azimuth.
    package static func lateral(
        speed: Double, course: Double, azimuth: Double, speedError: Double, courseError: Double
    ) -> (lo: Double, hi: Double) {
        var phi = (course - azimuth).truncatingRemainder(dividingBy: 360)
        if phi > 180 { phi -= 360 }
        if phi < -180 { phi += 360 }
        let fast = speed + speedError
        let slow = max(0, speed - speedError)
        // Over `[phi − e, phi + e]`, within (−180°, 180°) and about a course within 90°, the sine is largest at
        // the upper end or at 90° if that is inside, smallest at the lower end or at −90°.
        let top = phi + courseError >= 90 ? 1 : sin((phi + courseError) * .pi / 180)
        let bottom = phi - courseError <= -90 ? -1 : sin((phi - courseError) * .pi / 180)
        let hi = top >= 0 ? fast * top : slow * top
        let lo = bottom <= 0 ? fast * bottom : slow * bottom
        return (lo, hi)
    }

    /// The farthest to one side of the line any path strays: starting within `start` of the line with a
    /// sideways velocity towards that side of at most `outward`, ending within `end` of it with a velocity
    /// back from that side of at most `inward` (both m/s, negative for the other way), after `time` seconds
    /// with accelerations of at most `acceleration` (see the type's derivation). Infinity when no such path
    /// exists (the velocities at the ends contradict the acceleration): the model does not hold, and says
    /// nothing.
    package static func oneSide(
        start: Double, outward v: Double, end: Double, inward w: Double, time: Double, acceleration a: Double
    ) -> Double {
        let reach = max(start, end)
        // Where `y′ = 0` can be reached from the start (`τ ≥ −v/A` when it starts away from this side) and from
        // the end (`T − τ ≥ −w/A`).
        let earliest = max(0, -v) / a
        let latest = time - max(0, -w) / a
        // Moving away from this side at both ends, faster than the acceleration can turn round and back: no
        // path; away at one end only, so fast that it never stops doing so: the farthest is at an end.
        if v < 0, w < 0, earliest > latest { return .infinity }
        guard earliest <= latest else { return reach }
        // The two bounds on `y(τ)` where `y′(τ) = 0`. A velocity towards this side larger than `A·τ` cannot
        // have fallen to 0 by `τ`: any that could was at most `A·τ`, and `G` grows with the velocity, so the
        // bound takes `min(v, A·τ)` (at exactly `A·τ`, `A·τ²/2`). Both stay monotone in `τ`.
        func bound(_ v: Double, _ tau: Double) -> Double {
            let u = min(v, a * tau)
            return (a * tau + u) * (a * tau + u) / (4 * a) - u * u / (2 * a)
        }
        func f(_ tau: Double) -> Double { start + bound(v, tau) }
        func g(_ tau: Double) -> Double { end + bound(w, time - tau) }
        // Where `f` (rising) meets `g` (falling): any `τ₀` gives a bound, `max(f(τ₀), g(τ₀))`, the least
        // where they meet. Where neither velocity is cut to `A·τ`, `f = g` is linear in `τ` (a difference of
        // squares): `τ₀` at once; otherwise, or if rounding left them apart, bisection.
        let k = a * time + v + w
        var tau = (earliest + latest) / 2
        if k > 1e-9 {
            tau = ((4 * a * (end - start) + 2 * (v * v - w * w)) / k + a * time - v + w) / (2 * a)
            tau = min(latest, max(earliest, tau))
        }
        if abs(f(tau) - g(tau)) > 0.001 {
            var (lo, hi) = (earliest, latest)
            for _ in 0..<40 {
                let mid = (lo + hi) / 2
                if f(mid) < g(mid) { lo = mid } else { hi = mid }
            }
            tau = (lo + hi) / 2
        }
        return max(reach, f(tau), g(tau))
    }

    /// The farthest any path strays from the line either side (metres), or infinity when the inputs say
    /// nothing (non-finite, no time, no acceleration bound).
    package static func reach(
        accuracies: (Double, Double), starting: (lo: Double, hi: Double), ending: (lo: Double, hi: Double),
        time: Double, acceleration: Double
    ) -> Double {
        guard time > 0, acceleration > 0, acceleration.isFinite, time.isFinite else { return .infinity }
        let right = oneSide(
            start: accuracies.0, outward: starting.hi, end: accuracies.1, inward: -ending.lo, time: time,
            acceleration: acceleration)
        let left = oneSide(
            start: accuracies.0, outward: -starting.lo, end: accuracies.1, inward: ending.hi, time: time,
            acceleration: acceleration)
        // The sideways velocities at the two ends must be within `A·T` of each other for any path to join them.
        let gap = max(0, starting.lo - ending.hi, ending.lo - starting.hi)
        guard gap <= acceleration * time else { return .infinity }
        let both = max(right, left)
        return both.isFinite ? both : .infinity
    }
}
