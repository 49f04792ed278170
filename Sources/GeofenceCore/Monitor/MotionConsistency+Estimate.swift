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
        /// The estimated velocity (earth-centred axes, m/s), the covariance of the position's and the velocity's
        /// errors along any one axis (m²/s), and the variance of the random accelerations (m²/s⁴), each the blend
        /// of both models' by their weights: what `recollection(lag:)` carries the estimate back with.
        package var velocity: GeocentricPoint
        package var positionVelocity: Double
        package var accelerationVariance: Double

        /// Where this estimate puts its subject `lag` seconds earlier, knowing what came after: its position
        /// carried back along its velocity, with the variance `pp − 2·lag·pv + lag²·vv` (less than `pp` where the
        /// fixes since have pinned the velocity down) plus what the accelerations could have changed over the
        /// lag, `q·lag³/3`. Every term is linear in the models' covariances, so the blend of both models'
        /// recollections is the recollection of their blend.
        package func recollection(lag: Double) -> Estimate {
            let s = max(0, lag)
            let pp =
                max(0, sigma * sigma - 2 * s * positionVelocity + s * s * speedSigma * speedSigma)
                + accelerationVariance * s * s * s / 3
            var earlier = self
            earlier.position = GeocentricPoint(
                x: position.x - velocity.x * s, y: position.y - velocity.y * s, z: position.z - velocity.z * s)
            earlier.sigma = pp.squareRoot()
            return earlier
        }

        /// The lag (seconds, from 0 to `limit`) at which this estimate knows its subject's position best: where
        /// the uncertainty of `recollection(lag:)` without the accelerations' share is least, `pv / vv`.
        package func clearestLag(limit: Double) -> Double {
            let vv = speedSigma * speedSigma
            guard vv > 0, positionVelocity > 0 else { return 0 }
            return min(max(0, limit), positionVelocity / vv)
        }
    }

    /// The track's estimate at the time of its last fix taken in.
    @inline(__always)
    package func estimate(of t: Track) -> Estimate {
        let w = t.steadyWeight
        let pp = w * t.steady.pp + (1 - w) * t.manoeuvre.pp
        let pv = w * t.steady.pv + (1 - w) * t.manoeuvre.pv
        let vv = w * t.steady.vv + (1 - w) * t.manoeuvre.vv
        let v = t.velocity
        return Estimate(
            position: t.position, sigma: pp.squareRoot(), speed: (v.x * v.x + v.y * v.y + v.z * v.z).squareRoot(),
            speedSigma: vv.squareRoot(), steadyWeight: w, velocity: v, positionVelocity: pv,
            accelerationVariance: accelerationVariance(steadyWeight: w))
    }

    /// The track's expectation at `time` (after its last fix), before any fix of that time is taken in:
    /// where its velocity carries it, each model's uncertainty grown as `update` grows it.
    @inline(__always)
    package func prediction(of t: Track, at time: Double) -> Estimate {
        let dt = max(0, time - t.time)
        let toManoeuvre = min(0.5, Self.toManoeuvre * dt)
        let toSteady = min(0.5, Self.toSteady * dt)
        let mu = t.steadyWeight
        let steadyNext = mu * (1 - toManoeuvre) + (1 - mu) * toSteady
        let steady = t.steady.predicted(dt: dt, q: steadyAcceleration * steadyAcceleration)
        let manoeuvre = t.manoeuvre.predicted(dt: dt, q: manoeuvreAcceleration * manoeuvreAcceleration)
        let pp = steadyNext * steady.pp + (1 - steadyNext) * manoeuvre.pp
        let pv = steadyNext * steady.pv + (1 - steadyNext) * manoeuvre.pv
        let vv = steadyNext * steady.vv + (1 - steadyNext) * manoeuvre.vv
        let v = t.velocity
        return Estimate(
            position: GeocentricPoint(
                x: t.position.x + v.x * dt, y: t.position.y + v.y * dt, z: t.position.z + v.z * dt),
            sigma: pp.squareRoot(), speed: (v.x * v.x + v.y * v.y + v.z * v.z).squareRoot(),
            speedSigma: vv.squareRoot(),
            steadyWeight: steadyNext, velocity: v, positionVelocity: pv,
            accelerationVariance: accelerationVariance(steadyWeight: steadyNext))
    }

    /// The random accelerations' variance of the two models blended by the steady model's weight.
    private func accelerationVariance(steadyWeight w: Double) -> Double {
        w * steadyAcceleration * steadyAcceleration + (1 - w) * manoeuvreAcceleration * manoeuvreAcceleration
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
