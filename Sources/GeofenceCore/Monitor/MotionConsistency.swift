import Foundation

/// Tells a fix that agrees with a subject's motion from a lying one (an outlier whose stated accuracy is
/// wrong), from the fixes before it.
///
/// Each subject has a small tracking filter: two Kalman filters of a point moving at a nearly constant
/// velocity, one *steady* (random accelerations of `steadyAcceleration`, a parked or cruising vehicle)
/// and one *manoeuvring* (`manoeuvreAcceleration`: braking, turning, pulling away), mixed by how well each
/// has explained the fixes so far (an interacting multiple model filter, IMM). A fix's error is taken to
/// have a standard deviation of half its stated accuracy (gpsd's `eph` is a ~95 % radius). Each fix is
/// compared with where the filter expects the subject at that fix's time: a fix farther off than `gate`
/// standard deviations of that expectation is an outlier, changes no state and does not move the filter.
/// The expectation's uncertainty grows with the time since the last fix taken in, so after a gap (a
/// tunnel, a restart) any plausible place is accepted.
///
/// What that buys: a receiver parked for a minute knows where it is to a few metres, so a fix 30 m off
/// claiming 4 m is far outside the gate, and so are the second and third of a burst of such fixes, while
/// honest jitter within the stated accuracy is well inside it; a vehicle at motorway speed is expected
/// where its velocity takes it, so a single fix in a small region on its path is believed at once, with
/// no second fix to wait for. A lie that moves no farther than a vehicle's accelerations allow over its
/// duration cannot be told from motion by any rule: the band then decides, as for an honest fix.
///
/// A filter that rejects `resyncRun` fixes in a row that agree with each other starts over from them: a
/// wrong start (the first fix was the lie) can never lock a subject out.
public struct MotionConsistency: Sendable, Equatable {
    /// Standard deviation of the random accelerations of the steady model, m/s².
    public var steadyAcceleration: Double
    /// Standard deviation of the random accelerations of the manoeuvring model, m/s².
    public var manoeuvreAcceleration: Double
    /// How many standard deviations of the expected position a fix may be off (in the plane).
    public var gate: Double
    /// Smallest standard deviation a fix's error is given (metres): receivers round their accuracy.
    public var minimumError: Double

    public init(
        steadyAcceleration: Double = 0.3, manoeuvreAcceleration: Double = 4, gate: Double = 4,
        minimumError: Double = 1
    ) {
        self.steadyAcceleration = steadyAcceleration
        self.manoeuvreAcceleration = manoeuvreAcceleration
        self.gate = gate
        self.minimumError = minimumError
    }

    /// Consecutive rejected fixes, agreeing with each other, after which the filter starts over from them.
    /// More than the bursts of lying fixes receivers produce (two or three).
    public static let resyncRun: UInt8 = 5
    /// The speed a run of outliers may move at between its fixes and still count as one run (m/s).
    static let runSpeed = 60.0
    /// Velocity variance of a track with no velocity yet: (40 m/s)².
    static let unknownSpeedVariance = 1600.0
    /// Switching rates between the models, per second: steady to manoeuvring, and back.
    static let toManoeuvre = 0.05
    static let toSteady = 0.1

    /// One model's estimate: position and velocity (earth-centred axes, a fix being a point on the
    /// ellipsoid), and their covariance along any one axis (the axes share it): p², pv, v².
    struct Estimate: Sendable, Equatable {
        var position: GeocentricPoint
        var velocity: GeocentricPoint
        var pp: Double
        var pv: Double
        var vv: Double

        /// The estimate `dt` seconds on, with random accelerations of variance `q`.
        func predicted(dt: Double, q: Double) -> Estimate {
            Estimate(
                position: GeocentricPoint(
                    x: position.x + velocity.x * dt, y: position.y + velocity.y * dt, z: position.z + velocity.z * dt),
                velocity: velocity,
                pp: pp + 2 * dt * pv + dt * dt * vv + q * dt * dt * dt / 3,
                pv: pv + dt * vv + q * dt * dt / 2,
                vv: vv + q * dt)
        }
    }

    /// One subject's filter.
    public struct Track: Sendable, Equatable {
        var steady: Estimate
        var manoeuvre: Estimate
        /// Probability that the subject moves as the steady model says.
        var steadyWeight: Double
        /// Fix time of the last fix taken in (seconds since 1970).
        var time: Double
        /// The current run of rejected fixes that agree with each other, and its last one.
        var run: UInt8 = 0
        var runLast: GeocentricPoint
        var runTime: Double = 0
        var runAccuracy: Double = 0
    }

    /// What the gate said about a fix.
    public enum Verdict: Sendable, Equatable {
        /// The first fix of a track: nothing to judge it against.
        case first
        case agrees
        case outlier
        /// The fix ended a run of rejected fixes that agree with each other: the filter starts over.
        case resynchronized
    }

    /// A track that starts at `point`, with an unknown velocity.
    public func start(at point: GeocentricPoint, time: Double, accuracy: Double) -> Track {
        let estimate = Estimate(
            position: point, velocity: GeocentricPoint(x: 0, y: 0, z: 0), pp: measurementVariance(accuracy), pv: 0,
            vv: Self.unknownSpeedVariance)
        return Track(steady: estimate, manoeuvre: estimate, steadyWeight: 0.5, time: time, runLast: point)
    }

    func measurementVariance(_ accuracy: Double) -> Double {
        let sigma = max(minimumError, accuracy / 2)
        return sigma * sigma
    }

    /// Judges a fix against the track and, when it agrees (or resynchronizes), takes it in.
    public func update(_ track: inout Track?, point: GeocentricPoint, time: Double, accuracy: Double) -> Verdict {
        guard var t = track else {
            track = start(at: point, time: time, accuracy: accuracy)
            return .first
        }
        let dt = time - t.time
        guard dt > 0 else { return .agrees }

        // Mixing: each model starts from a blend of both, weighted by how likely a switch was.
        let toManoeuvre = 1 - exp(-Self.toManoeuvre * dt)
        let toSteady = 1 - exp(-Self.toSteady * dt)
        let mu = t.steadyWeight
        let steadyNext = mu * (1 - toManoeuvre) + (1 - mu) * toSteady
        let fromSteadyIntoSteady = steadyNext > 0 ? mu * (1 - toManoeuvre) / steadyNext : 0.5
        let fromSteadyIntoManoeuvre = (1 - steadyNext) > 0 ? mu * toManoeuvre / (1 - steadyNext) : 0.5
        let steadyStart = Self.mix(t.steady, t.manoeuvre, weight: fromSteadyIntoSteady)
        let manoeuvreStart = Self.mix(t.steady, t.manoeuvre, weight: fromSteadyIntoManoeuvre)

        let steady = steadyStart.predicted(dt: dt, q: steadyAcceleration * steadyAcceleration)
        let manoeuvre = manoeuvreStart.predicted(dt: dt, q: manoeuvreAcceleration * manoeuvreAcceleration)
        let r = measurementVariance(accuracy)

        // The gate, on the blend of both predictions.
        let expected = Self.mix(steady, manoeuvre, weight: steadyNext)
        let s = expected.pp + r
        let squared = Self.squaredDistance(point, expected.position)
        guard squared <= gate * gate * s else {
            return reject(&track, &t, point: point, time: time, accuracy: accuracy)
        }

        // Each model takes the fix in; their weights follow how likely each made it.
        let (steadyAfter, steadyLikelihood) = Self.correct(steady, point: point, r: r)
        let (manoeuvreAfter, manoeuvreLikelihood) = Self.correct(manoeuvre, point: point, r: r)
        let steadyMass = steadyNext * steadyLikelihood
        let total = steadyMass + (1 - steadyNext) * manoeuvreLikelihood
        t.steadyWeight = total > 0 ? min(max(steadyMass / total, 1e-6), 1 - 1e-6) : steadyNext
        t.steady = steadyAfter
        t.manoeuvre = manoeuvreAfter
        t.time = time
        t.run = 0
        track = t
        return .agrees
    }

    private func reject(
        _ track: inout Track?, _ t: inout Track, point: GeocentricPoint, time: Double, accuracy: Double
    ) -> Verdict {
        // A run of outliers that agree with each other (each within reach of the one before at a vehicle's
        // speeds) may be the truth the track lost.
        let reach = 2 * (accuracy + t.runAccuracy) + Self.runSpeed * (time - t.runTime)
        if t.run > 0, point.chord(to: t.runLast) <= reach {
            t.run += 1
        } else {
            t.run = 1
        }
        if t.run >= Self.resyncRun {
            let span = max(time - t.runTime, 1e-3)
            var fresh = start(at: point, time: time, accuracy: accuracy)
            let velocity = GeocentricPoint(
                x: (point.x - t.runLast.x) / span, y: (point.y - t.runLast.y) / span,
                z: (point.z - t.runLast.z) / span)
            fresh.steady.velocity = velocity
            fresh.manoeuvre.velocity = velocity
            track = fresh
            return .resynchronized
        }
        t.runLast = point
        t.runTime = time
        t.runAccuracy = accuracy
        track = t
        return .outlier
    }

    /// The blend of two estimates, `weight` of the first: their mean, and a covariance that includes their
    /// spread (shared out over the two axes of the plane).
    static func mix(_ a: Estimate, _ b: Estimate, weight w: Double) -> Estimate {
        func blend(_ p: GeocentricPoint, _ q: GeocentricPoint) -> GeocentricPoint {
            GeocentricPoint(x: w * p.x + (1 - w) * q.x, y: w * p.y + (1 - w) * q.y, z: w * p.z + (1 - w) * q.z)
        }
        let position = blend(a.position, b.position)
        let velocity = blend(a.velocity, b.velocity)
        let spreadA = squaredDistance(a.position, position) / 2
        let spreadB = squaredDistance(b.position, position) / 2
        let speedSpreadA = squaredDistance(a.velocity, velocity) / 2
        let speedSpreadB = squaredDistance(b.velocity, velocity) / 2
        return Estimate(
            position: position, velocity: velocity,
            pp: w * (a.pp + spreadA) + (1 - w) * (b.pp + spreadB),
            pv: w * a.pv + (1 - w) * b.pv,
            vv: w * (a.vv + speedSpreadA) + (1 - w) * (b.vv + speedSpreadB))
    }

    /// A model's estimate after a fix, and the likelihood of that fix under the model (in the plane).
    static func correct(_ e: Estimate, point: GeocentricPoint, r: Double) -> (Estimate, Double) {
        let s = e.pp + r
        let kp = e.pp / s
        let kv = e.pv / s
        let innovation = GeocentricPoint(
            x: point.x - e.position.x, y: point.y - e.position.y, z: point.z - e.position.z)
        let after = Estimate(
            position: GeocentricPoint(
                x: e.position.x + kp * innovation.x, y: e.position.y + kp * innovation.y,
                z: e.position.z + kp * innovation.z),
            velocity: GeocentricPoint(
                x: e.velocity.x + kv * innovation.x, y: e.velocity.y + kv * innovation.y,
                z: e.velocity.z + kv * innovation.z),
            pp: (1 - kp) * e.pp, pv: (1 - kp) * e.pv, vv: e.vv - kv * e.pv)
        let squared = innovation.x * innovation.x + innovation.y * innovation.y + innovation.z * innovation.z
        return (after, exp(-squared / (2 * s)) / (2 * Double.pi * s))
    }

    static func squaredDistance(_ a: GeocentricPoint, _ b: GeocentricPoint) -> Double {
        let dx = a.x - b.x
        let dy = a.y - b.y
        let dz = a.z - b.z
        return dx * dx + dy * dy + dz * dz
    }
}
