import Foundation

extension MotionConsistency {
    /// Where a track puts its subject, read-only: the fused position of every fix taken in (outliers
    /// left out) and how uncertain it is. The decisions on the track (`RegionMonitor+Fused.swift`) read it.
    package struct Estimate: Sendable, Equatable {
        /// The estimated position (earth-centred axes; within millimetres of the ellipsoid over the
        /// distances a track covers between two fixes).
        package var position: GeocentricPoint
        /// Standard deviation of the position along any one direction (metres): the blend of both models'.
        package var sigma: Double
        /// The estimated speed (m/s) and the standard deviation of the velocity along any one direction.
        package var speed: Double
        package var speedSigma: Double
        /// How likely the subject moves as the steady model says (cruising or parked, not manoeuvring).
        package var steadyWeight: Double
    }

    /// The track's estimate at the time of its last fix taken in.
    package func estimate(of t: Track) -> Estimate {
        let w = t.steadyWeight
        let pp = w * t.steady.pp + (1 - w) * t.manoeuvre.pp
        let vv = w * t.steady.vv + (1 - w) * t.manoeuvre.vv
        let v = t.velocity
        return Estimate(
            position: t.position, sigma: pp.squareRoot(), speed: (v.x * v.x + v.y * v.y + v.z * v.z).squareRoot(),
            speedSigma: vv.squareRoot(), steadyWeight: w)
    }

    /// The track's expectation at `time` (after its last fix), before any fix of that time is taken in:
    /// where its velocity carries it, each model's uncertainty grown as `update` grows it.
    package func prediction(of t: Track, at time: Double) -> Estimate {
        let dt = max(0, time - t.time)
        let toManoeuvre = min(0.5, Self.toManoeuvre * dt)
        let toSteady = min(0.5, Self.toSteady * dt)
        let mu = t.steadyWeight
        let steadyNext = mu * (1 - toManoeuvre) + (1 - mu) * toSteady
        let steady = t.steady.predicted(dt: dt, q: steadyAcceleration * steadyAcceleration)
        let manoeuvre = t.manoeuvre.predicted(dt: dt, q: manoeuvreAcceleration * manoeuvreAcceleration)
        let pp = steadyNext * steady.pp + (1 - steadyNext) * manoeuvre.pp
        let vv = steadyNext * steady.vv + (1 - steadyNext) * manoeuvre.vv
        let v = t.velocity
        return Estimate(
            position: GeocentricPoint(
                x: t.position.x + v.x * dt, y: t.position.y + v.y * dt, z: t.position.z + v.z * dt),
            sigma: pp.squareRoot(), speed: (v.x * v.x + v.y * v.y + v.z * v.z).squareRoot(),
            speedSigma: vv.squareRoot(),
            steadyWeight: steadyNext)
    }
}

extension MotionConsistency.Track {
    /// `motion.prediction(of: self, at:)`, for a track read in place where it is kept (an optional's `?.`).
    @inline(__always)
    func prediction(by motion: MotionConsistency, at time: Double) -> MotionConsistency.Estimate {
        motion.prediction(of: self, at: time)
    }

    /// `motion.estimate(of: self)`, read in place.
    @inline(__always)
    func estimate(by motion: MotionConsistency) -> MotionConsistency.Estimate { motion.estimate(of: self) }
}

extension MotionConsistency {
    /// Where the track puts its subject `lag` seconds before its last fix taken in, knowing the fixes after that
    /// time too: its position carried back along its velocity. Its uncertainty is each model's position and
    /// velocity uncertainty carried back with their correlation (`pp − 2·lag·pv + lag²·vv`, less than `pp` where
    /// the fixes since have pinned the velocity down) plus what the model's accelerations could have changed
    /// over the lag (`q·lag³/3`), blended by the models' weights. Read by the decisions on the track
    /// (`RegionMonitor+Fused.swift`).
    package func recollection(of t: Track, lag: Double) -> Estimate {
        let s = max(0, lag)
        func back(_ c: Covariance, q: Double) -> Double {
            max(0, c.pp - 2 * s * c.pv + s * s * c.vv) + q * s * s * s / 3
        }
        let w = t.steadyWeight
        let pp =
            w * back(t.steady, q: steadyAcceleration * steadyAcceleration) + (1 - w)
            * back(t.manoeuvre, q: manoeuvreAcceleration * manoeuvreAcceleration)
        let vv = w * t.steady.vv + (1 - w) * t.manoeuvre.vv
        let v = t.velocity
        return Estimate(
            position: GeocentricPoint(x: t.position.x - v.x * s, y: t.position.y - v.y * s, z: t.position.z - v.z * s),
            sigma: pp.squareRoot(), speed: (v.x * v.x + v.y * v.y + v.z * v.z).squareRoot(),
            speedSigma: vv.squareRoot(), steadyWeight: w)
    }

    /// The lag (seconds, from 0 to `limit`) at which the track knows its subject's position best: where the
    /// position's uncertainty carried back along the velocity (`pp − 2·lag·pv + lag²·vv`, both models blended)
    /// is least, `pv / vv`.
    package func clearestLag(of t: Track, limit: Double) -> Double {
        let w = t.steadyWeight
        let pv = w * t.steady.pv + (1 - w) * t.manoeuvre.pv
        let vv = w * t.steady.vv + (1 - w) * t.manoeuvre.vv
        guard vv > 0, pv > 0 else { return 0 }
        return min(max(0, limit), pv / vv)
    }

    /// The time of a track's last fix taken in (seconds since 1970).
    package func time(of t: Track) -> Double { t.time }
}
