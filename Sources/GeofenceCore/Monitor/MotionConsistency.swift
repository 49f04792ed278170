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
/// tunnel, a restart) any plausible place is accepted. A fix taken in that reports a speed and course (the
/// receiver's Doppler velocity) moves the track's velocity towards it too (`update(_:point:time:accuracy:velocity:)`),
/// so that the track follows a truck that brakes or pulls away from its first fix doing so.
///
/// What that buys: a receiver parked for a minute knows where it is to a few metres, so a fix 30 m off
/// claiming 4 m is far outside the gate, while honest jitter within the stated accuracy is well inside it; a vehicle at motorway speed is expected
/// where its velocity takes it, so a single fix in a small region on its path is believed at once, with
/// no second fix to wait for. A lie that moves no farther than a vehicle's accelerations allow over its
/// duration cannot be told from motion by any rule: the band then decides, as for an honest fix.
///
/// Receivers lie in bursts of two or three, and every refused second widens the expectation (mostly the
/// manoeuvring model's: a parked receiver's 4σ gate grows from 15-25 m to 20-36 m after one refused second
/// and 30-50 m after two), so that the gate alone would let the second or third lie of a burst through. A fix
/// that follows a refused one must therefore also be likelier honest than another lie: the density the
/// models give it must exceed `burstOdds` times that of a lie landing anywhere within `lieSpread`. A fix
/// near where the subject is expected passes at once; a lie 30 m off does not however wide the gate has grown.
/// The odds grow with the seconds since the last fix taken in (×1 to ×4 at most): a longer burst widens the
/// gate further, and the longer it has gone on, the likelier its next fix is one more of it. For a track that
/// shows no motion, the steady model judges such a fix also where the subject stood, not only where its
/// velocity (a parked receiver's noise, 1-2 m/s) would carry it over the burst.
/// The price: a subject whose motion changed sharply during the burst may be refused until a run starts the
/// filter over (below).
///
/// A filter that rejects `resyncRun` fixes in a row that agree with each other starts over from them: a
/// wrong start (the first fix was the lie) can never lock a subject out. The run must agree *as a track*: it
/// has its own small filter (a nearly constant velocity, random accelerations of `manoeuvreAcceleration`),
/// and a refused fix joins the run only within `runGate` standard deviations of where that filter expects
/// it. Honest fixes the main filter refused (its estimate overshot a hard brake) and the lies of a burst
/// that follows at once then make two runs, not one: a lie 30-80 m off is no continuation of the honest
/// fixes' motion, nor they of the lies'. So a burst shorter than `resyncRun` can never start the filter over,
/// whatever came before it. A run of `shortRun` fixes that were all within the gate (refused only as likely
/// lies of a burst) and whose velocity continues the track's starts it over sooner: the honest fixes of a
/// subject that pulled away during a burst. A burst's first lie, and mostly its second, is outside the gate,
/// so that a burst of six puts at most four lies in such a run.
package struct MotionConsistency: Sendable, Equatable {
    /// Standard deviation of the random accelerations of the steady model, m/s².
    package var steadyAcceleration: Double
    /// Standard deviation of the random accelerations of the manoeuvring model, m/s².
    package var manoeuvreAcceleration: Double
    /// How many standard deviations of the expected position a fix may be off (in the plane).
    package var gate: Double
    /// For a fix that follows a refused one: how many times likelier, before it is seen, it is another lie
    /// of the burst than an honest fix. It is taken in only if the models make it likelier honest than a lie
    /// landing anywhere within `lieSpread` of the truth.
    package var burstOdds: Double
    /// Smallest standard deviation a fix's error is given (metres): receivers round their accuracy.
    package var minimumError: Double

    package init(
        steadyAcceleration: Double = 0.3, manoeuvreAcceleration: Double = 4, gate: Double = 4,
        burstOdds: Double = 2, minimumError: Double = 1
    ) {
        self.steadyAcceleration = steadyAcceleration
        self.manoeuvreAcceleration = manoeuvreAcceleration
        self.gate = gate
        self.burstOdds = burstOdds
        self.minimumError = minimumError
    }

    /// Consecutive rejected fixes, agreeing with each other as a track, after which the filter starts over
    /// from them. More than the bursts of lying fixes receivers produce (two or three) and than the longest
    /// burst the suite places (six).
    package static let resyncRun: UInt8 = 7
    /// How many standard deviations of the run's own expectation a refused fix may be off and still continue
    /// the run.
    static let runGate = 3.0
    /// How soon after a refused fix (seconds) the next is judged as a likely lie: a burst's fixes come one after
    /// another; after a gap, the subject may be anywhere and a lie is no likelier than before.
    static let burstSpan = 10.0
    /// The most `burstOdds` grows to, one time more for each second since the last fix taken in: a burst of
    /// four to six lies widens the gate for as many seconds, and the odds that the next fix is another lie
    /// grow with it; capped, so that a sparse reporter's honest fix after a long gap is not refused for it. At
    /// ×3 a track braked hard onto its stop took the sixth lie of a burst, 19 m from where it overshot.
    static let burstOddsGrowth = 4.0
    /// A track whose speed is within this many standard deviations of its velocity shows no motion: after a
    /// refused fix, the next is judged also against where the subject stood (`advance`).
    static let stillSpeed = 3.0
    /// Consecutive refused fixes after which the filter starts over from them when every one of them was
    /// within the gate (refused only as a likely lie of a burst, never as too far from where the subject was
    /// expected) and their run's velocity continues the track's (`continues`): the honest fixes of a subject
    /// that pulled away during a burst. A burst's first lie is outside the gate (30-80 m off, against a gate of
    /// 15-25 m), and so mostly is its second: of a burst of six, at most four lies are within it.
    static let shortRun: UInt8 = 5
    /// How far from the truth a lie of a burst may land (metres): its density is one over that disc's area.
    static let lieSpread = 100.0
    /// The speed a run of outliers may move at between its first two fixes and still count as one run (m/s):
    /// the run's filter starts with a velocity of 0, this speed `runGate` standard deviations away.
    static let runSpeed = 60.0
    /// Velocity variance of a track with no velocity yet: (40 m/s)².
    static let unknownSpeedVariance = 1600.0
    /// Switching rates between the models, per second: steady to manoeuvring, and back (a chance of
    /// `rate · dt` between two fixes `dt` apart, at most one half).
    static let toManoeuvre = 0.05
    static let toSteady = 0.1

    /// One model's uncertainty: the covariance of position and velocity along any one axis (the axes share
    /// it): p², pv, v².
    struct Covariance: Sendable, Equatable {
        var pp: Double
        var pv: Double
        var vv: Double

        /// The covariance `dt` seconds on, with random accelerations of variance `q`.
        @inline(__always)
        func predicted(dt: Double, q: Double) -> Covariance {
            Covariance(
                pp: pp + 2 * dt * pv + dt * dt * vv + q * dt * dt * dt / 3, pv: pv + dt * vv + q * dt * dt / 2,
                vv: vv + q * dt)
        }

        @inline(__always)
        static func blend(_ a: Covariance, _ b: Covariance, weight w: Double) -> Covariance {
            Covariance(
                pp: w * a.pp + (1 - w) * b.pp, pv: w * a.pv + (1 - w) * b.pv, vv: w * a.vv + (1 - w) * b.vv)
        }
    }

    /// One subject's filter: one estimate of position and velocity (earth-centred axes, a fix being a point
    /// on the ellipsoid), seen by both models, each with its own uncertainty.
    package struct Track: Sendable, Equatable {
        var position: GeocentricPoint
        var velocity: GeocentricPoint
        var steady: Covariance
        var manoeuvre: Covariance
        /// Probability that the subject moves as the steady model says.
        var steadyWeight: Double
        /// Fix time of the last fix taken in (seconds since 1970).
        var time: Double
        /// The current run of rejected fixes that agree with each other as a track: how many, the run's
        /// filtered position at its last fix's time, and that fix's accuracy.
        var run: UInt8 = 0
        var runLast: GeocentricPoint
        var runTime: Double = 0
        var runAccuracy: Double = 0
        /// The run's own filter: its velocity and uncertainty (along any one axis).
        var runVelocity = GeocentricPoint(x: 0, y: 0, z: 0)
        var runCovariance = Covariance(pp: 0, pv: 0, vv: 0)
        /// Whether every fix of the run was within the gate (refused only as a likely lie of a burst).
        var runInGate = false
    }

    /// What the gate said about a fix.
    package enum Verdict: Sendable, Equatable {
        /// The first fix of a track: nothing to judge it against.
        case first
        case agrees
        case outlier
        /// The fix ended a run of rejected fixes that agree with each other: the filter starts over.
        case resynchronized
    }

    /// A track that starts at `point`, with an unknown velocity.
    package func start(at point: GeocentricPoint, time: Double, accuracy: Double) -> Track {
        let covariance = Covariance(pp: measurementVariance(accuracy), pv: 0, vv: Self.unknownSpeedVariance)
        return Track(
            position: point, velocity: GeocentricPoint(x: 0, y: 0, z: 0), steady: covariance, manoeuvre: covariance,
            steadyWeight: 0.5, time: time, runLast: point)
    }

    @inline(__always)
    func measurementVariance(_ accuracy: Double) -> Double {
        let sigma = max(minimumError, accuracy / 2)
        return sigma * sigma
    }

    /// Judges a fix against the track and, when it agrees (or resynchronizes), takes it in.
    package func update(
        _ track: inout Track?, point: GeocentricPoint, time: Double, accuracy: Double,
        velocity: GeocentricPoint? = nil
    ) -> Verdict {
        // Not `track != nil`: `Track` is `Equatable`, and that compared the track with a nil built for it, copying
        // some 200 bytes twice a fix.
        if case .none = track {
            track = start(at: point, time: time, accuracy: accuracy)
            return .first
        }
        return advance(&track!, point: point, time: time, accuracy: accuracy, velocity: velocity)
    }

    /// How far a velocity a fix reports may be off (gpsd's `epd` and `eps` are not read): its speed by
    /// `reportedSpeedError` (m/s), its course by `reportedCourseError` (degrees). The pass rule assumes the same
    /// (`RegionMonitor.speedError`, `courseError`).
    static let reportedSpeedError = 1.0
    static let reportedCourseError = 5.0
    /// `sin(reportedCourseError)`: the sideways error of a reported velocity, per m/s of speed.
    static let reportedSideways = sin(reportedCourseError * .pi / 180)

    /// A fix taken in with the velocity it reports: one Kalman update of position and velocity together (per axis,
    /// the two measured at once, their errors independent), for both models, the models' weights following how
    /// likely each made the two. The same as taking in the position and then the velocity, but one
    /// chain of dependent arithmetic, not two: one division for both models' inverses, one `exp`, one division for
    /// the weight. This runs for every fix with a speed and course.
    ///
    /// Per axis, with a model's predicted covariance `P = [[A, B], [B, C]]` and the errors `r` (position) and `rv`
    /// (velocity): `S = P + diag(r, rv)`, `D = det S`, the gain `K = P S⁻¹ = [[A(C+rv) − B², B·r], [B·rv, C(A+r) − B²]] / D`,
    /// and the covariance after is `(I − K) P`. A fix's position and its velocity each lie in the plane of the
    /// horizon, so a model's likelihood is `exp(−m/2) / D` (times constants both share), `m` the innovations'
    /// Mahalanobis distance summed over the axes.
    @inline(__always)
    private func takeJointly(
        _ t: inout Track, point: GeocentricPoint, dx: Double, dy: Double, dz: Double, steady: Covariance,
        manoeuvre: Covariance, steadyNext: Double, r: Double, measured: GeocentricPoint, time: Double
    ) {
        let v2 = measured.x * measured.x + measured.y * measured.y + measured.z * measured.z
        let rv = Self.reportedSpeedError * Self.reportedSpeedError + v2 * Self.reportedSideways * Self.reportedSideways
        let ex = measured.x - t.velocity.x
        let ey = measured.y - t.velocity.y
        let ez = measured.z - t.velocity.z
        let xx = dx * dx + dy * dy + dz * dz
        let xv = dx * ex + dy * ey + dz * ez
        let vv = ex * ex + ey * ey + ez * ez
        let aS = steady.pp + r
        let cS = steady.vv + rv
        let aM = manoeuvre.pp + r
        let cM = manoeuvre.vv + rv
        let dS = aS * cS - steady.pv * steady.pv
        let dM = aM * cM - manoeuvre.pv * manoeuvre.pv
        // Both determinants are at least r · rv > 0 (a covariance plus the errors, both positive), and their product
        // far from overflow: the speed is below 200 m/s (`RegionMonitor.reportedVelocity`).
        let inverse = 1 / (dS * dM)
        let inverseSteady = dM * inverse
        let inverseManoeuvre = dS * inverse
        let mS = (cS * xx - 2 * steady.pv * xv + aS * vv) * inverseSteady
        let mM = (cM * xx - 2 * manoeuvre.pv * xv + aM * vv) * inverseManoeuvre
        let exponent = min(max((mS - mM) / 2, -700), 700)
        let ratio = dS * inverseManoeuvre * exp(exponent)  // L(manoeuvre) / L(steady)
        let w = min(max(steadyNext / (steadyNext + (1 - steadyNext) * ratio), 1e-6), 1 - 1e-6)
        // Each model's gain, then their blend.
        let bS = steady.pv
        let bM = manoeuvre.pv
        let kppS = (steady.pp * cS - bS * bS) * inverseSteady
        let kpvS = bS * r * inverseSteady
        let kvpS = bS * rv * inverseSteady
        let kvvS = (steady.vv * aS - bS * bS) * inverseSteady
        let kppM = (manoeuvre.pp * cM - bM * bM) * inverseManoeuvre
        let kpvM = bM * r * inverseManoeuvre
        let kvpM = bM * rv * inverseManoeuvre
        let kvvM = (manoeuvre.vv * aM - bM * bM) * inverseManoeuvre
        let kpp = w * kppS + (1 - w) * kppM
        let kpv = w * kpvS + (1 - w) * kpvM
        let kvp = w * kvpS + (1 - w) * kvpM
        let kvv = w * kvvS + (1 - w) * kvvM
        t.position = GeocentricPoint(
            x: point.x - dx + kpp * dx + kpv * ex, y: point.y - dy + kpp * dy + kpv * ey,
            z: point.z - dz + kpp * dz + kpv * ez)
        t.velocity = GeocentricPoint(
            x: t.velocity.x + kvp * dx + kvv * ex, y: t.velocity.y + kvp * dy + kvv * ey,
            z: t.velocity.z + kvp * dz + kvv * ez)
        t.steady = Covariance(
            pp: (1 - kppS) * steady.pp - kpvS * bS, pv: (1 - kppS) * bS - kpvS * steady.vv,
            vv: (1 - kvvS) * steady.vv - kvpS * bS)
        t.manoeuvre = Covariance(
            pp: (1 - kppM) * manoeuvre.pp - kpvM * bM, pv: (1 - kppM) * bM - kpvM * manoeuvre.vv,
            vv: (1 - kvvM) * manoeuvre.vv - kvpM * bM)
        t.steadyWeight = w
        t.time = time
        t.run = 0
    }

    /// `update` of a track that has started (in place: a track is a few cache lines, and this runs for
    /// every fix).
    private func advance(
        _ t: inout Track, point: GeocentricPoint, time: Double, accuracy: Double, velocity measured: GeocentricPoint?
    ) -> Verdict {
        let dt = time - t.time
        guard dt > 0 else {
            // The same time again says nothing new; an earlier one means the clock stepped back (the fix
            // filter follows such a step after a consistent run): the motion starts over from here.
            if dt == 0 { return .agrees }
            t = start(at: point, time: time, accuracy: accuracy)
            return .resynchronized
        }

        // The chance that the subject switched model since the last fix (rate · dt, at most one half).
        let toManoeuvre = min(0.5, Self.toManoeuvre * dt)
        let toSteady = min(0.5, Self.toSteady * dt)
        let mu = t.steadyWeight
        let steadyNext = mu * (1 - toManoeuvre) + (1 - mu) * toSteady
        // Each model starts from a blend of both uncertainties, weighted by how likely a switch was.
        let intoSteady = mu * (1 - toManoeuvre) / steadyNext
        let intoManoeuvre = mu * toManoeuvre / (1 - steadyNext)
        let steady = Covariance.blend(t.steady, t.manoeuvre, weight: intoSteady).predicted(
            dt: dt, q: steadyAcceleration * steadyAcceleration)
        let manoeuvre = Covariance.blend(t.steady, t.manoeuvre, weight: intoManoeuvre).predicted(
            dt: dt, q: manoeuvreAcceleration * manoeuvreAcceleration)
        let r = measurementVariance(accuracy)

        // The gate, on the blend of both models' uncertainty.
        let dx = point.x - (t.position.x + t.velocity.x * dt)
        let dy = point.y - (t.position.y + t.velocity.y * dt)
        let dz = point.z - (t.position.z + t.velocity.z * dt)
        let squared = dx * dx + dy * dy + dz * dz
        let sSteady = steady.pp + r
        let sManoeuvre = manoeuvre.pp + r
        guard squared <= gate * gate * (steadyNext * sSteady + (1 - steadyNext) * sManoeuvre) else {
            return reject(&t, point: point, time: time, accuracy: accuracy, inGate: false)
        }
        // After a refused fix, the next is likely another lie: it must also be likelier honest than a lie (the
        // two models' planar densities, against a lie's, both times 2π). A lie lands within `lieSpread` of the
        // truth, and the truth within the distance the track's velocity carries it over the gap (a subject that
        // braked to a stop during the burst is anywhere between; the track overshoots it by up to 80 m): a fix
        // farther from the expectation than both is no such lie, and only the gate judges it (a vehicle that
        // really moved away, as far as its accelerations allow, is not held back).
        let v2 = t.velocity.x * t.velocity.x + t.velocity.y * t.velocity.y + t.velocity.z * t.velocity.z
        let reach = Self.lieSpread + v2.squareRoot() * dt
        if t.run > 0 && time - t.runTime <= Self.burstSpan && squared <= reach * reach {
            // The steady model stands for a subject parked or cruising. Parked, its velocity is its fixes' noise
            // (1-2 m/s for a receiver of 3-12 m): carried over a burst of four or five seconds it moves the
            // expectation 5-8 m, as often towards the burst's lies as away, and a lie 27-31 m off then passed.
            // For a track that shows no motion (its speed within `stillSpeed` standard deviations of zero), the
            // steady model judges the fix also where the subject stood, and the farther of the two counts; the
            // manoeuvring model (a subject pulling away) still judges it where the velocity carries it.
            var steadySquared = squared
            let vv = t.steadyWeight * t.steady.vv + (1 - t.steadyWeight) * t.manoeuvre.vv
            if v2 <= Self.stillSpeed * Self.stillSpeed * vv {
                let hx = point.x - t.position.x
                let hy = point.y - t.position.y
                let hz = point.z - t.position.z
                steadySquared = max(squared, hx * hx + hy * hy + hz * hz)
            }
            let density =
                steadyNext * exp(-steadySquared / (2 * sSteady)) / sSteady + (1 - steadyNext)
                * exp(-squared / (2 * sManoeuvre)) / sManoeuvre
            // The longer since the last fix taken in, the likelier the next is one more lie of the same burst,
            // as the gate it has to pass grows: the odds grow with the seconds (at most `burstOddsGrowth` times).
            let odds = burstOdds * min(Self.burstOddsGrowth, max(1, dt))
            guard density > odds * 2 / (Self.lieSpread * Self.lieSpread) else {
                return reject(&t, point: point, time: time, accuracy: accuracy, inGate: true)
            }
        }

        if let measured {
            takeJointly(
                &t, point: point, dx: dx, dy: dy, dz: dz, steady: steady, manoeuvre: manoeuvre, steadyNext: steadyNext,
                r: r, measured: measured, time: time)
            return .agrees
        }
        // The weights follow how likely each model made the fix (a ratio of two planar Gaussians: one
        // exponential), and the estimate moves by the blend of both models' gains.
        let inverseSteady = 1 / sSteady
        let inverseManoeuvre = 1 / sManoeuvre
        let exponent = min(max(squared / 2 * (inverseSteady - inverseManoeuvre), -700), 700)
        let ratio = sSteady * inverseManoeuvre * exp(exponent)  // L(manoeuvre) / L(steady)
        let weight = steadyNext / (steadyNext + (1 - steadyNext) * ratio)
        let w = min(max(weight, 1e-6), 1 - 1e-6)
        let kpSteady = steady.pp * inverseSteady
        let kpManoeuvre = manoeuvre.pp * inverseManoeuvre
        let kvSteady = steady.pv * inverseSteady
        let kvManoeuvre = manoeuvre.pv * inverseManoeuvre
        let kp = w * kpSteady + (1 - w) * kpManoeuvre
        let kv = w * kvSteady + (1 - w) * kvManoeuvre
        t.position = GeocentricPoint(
            x: point.x - dx + kp * dx, y: point.y - dy + kp * dy, z: point.z - dz + kp * dz)
        t.velocity = GeocentricPoint(
            x: t.velocity.x + kv * dx, y: t.velocity.y + kv * dy, z: t.velocity.z + kv * dz)
        t.steady = Covariance(
            pp: (1 - kpSteady) * steady.pp, pv: (1 - kpSteady) * steady.pv, vv: steady.vv - kvSteady * steady.pv)
        t.manoeuvre = Covariance(
            pp: (1 - kpManoeuvre) * manoeuvre.pp, pv: (1 - kpManoeuvre) * manoeuvre.pv,
            vv: manoeuvre.vv - kvManoeuvre * manoeuvre.pv)
        t.steadyWeight = w
        t.time = time
        t.run = 0
        return .agrees
    }

    /// Whether a run's track continues the main track's motion: its velocity within `gate` standard deviations
    /// of the main track's, grown as a manoeuvring subject's would be since its last fix taken in.
    private func continues(_ t: Track, time: Double) -> Bool {
        let dt = time - t.time
        let vv =
            t.manoeuvre.predicted(dt: dt, q: manoeuvreAcceleration * manoeuvreAcceleration).vv + t.runCovariance.vv
        let dx = t.runVelocity.x - t.velocity.x
        let dy = t.runVelocity.y - t.velocity.y
        let dz = t.runVelocity.z - t.velocity.z
        return dx * dx + dy * dy + dz * dz <= gate * gate * vv
    }

    /// The uncertainty of a run's filter at its first fix (of error variance `variance`): no velocity known.
    static func runStart(variance: Double) -> Covariance {
        Covariance(pp: variance, pv: 0, vv: runSpeed * runSpeed / (runGate * runGate))
    }

    private func reject(_ t: inout Track, point: GeocentricPoint, time: Double, accuracy: Double, inGate: Bool)
        -> Verdict
    {
        // A run of outliers that agree with each other as a track (each where the run's own filter expects
        // it, at a vehicle's accelerations) may be the truth the track lost.
        let r = measurementVariance(accuracy)
        let dt = time - t.runTime
        if t.run > 0 && dt > 0 {
            let c = t.runCovariance.predicted(dt: dt, q: manoeuvreAcceleration * manoeuvreAcceleration)
            let dx = point.x - (t.runLast.x + t.runVelocity.x * dt)
            let dy = point.y - (t.runLast.y + t.runVelocity.y * dt)
            let dz = point.z - (t.runLast.z + t.runVelocity.z * dt)
            let s = c.pp + r
            if dx * dx + dy * dy + dz * dz <= Self.runGate * Self.runGate * s {
                let kp = c.pp / s
                let kv = c.pv / s
                let run = t.run + 1
                t.runLast = GeocentricPoint(
                    x: point.x - dx + kp * dx, y: point.y - dy + kp * dy, z: point.z - dz + kp * dz)
                t.runVelocity = GeocentricPoint(
                    x: t.runVelocity.x + kv * dx, y: t.runVelocity.y + kv * dy, z: t.runVelocity.z + kv * dz)
                t.runCovariance = Covariance(pp: (1 - kp) * c.pp, pv: (1 - kp) * c.pv, vv: c.vv - kv * c.pv)
                t.runTime = time
                t.runAccuracy = accuracy
                t.runInGate = t.runInGate && inGate
                guard run >= Self.resyncRun || (t.runInGate && run >= Self.shortRun && continues(t, time: time))
                else {
                    t.run = run
                    return .outlier
                }
                // The filter starts over where the run's track is, at its velocity.
                let (position, velocity, covariance) = (t.runLast, t.runVelocity, t.runCovariance)
                t = start(at: position, time: time, accuracy: accuracy)
                t.velocity = velocity
                t.steady = covariance
                t.manoeuvre = covariance
                return .resynchronized
            }
        }
        t.run = 1
        t.runInGate = inGate
        t.runLast = point
        t.runTime = time
        t.runAccuracy = accuracy
        t.runVelocity = GeocentricPoint(x: 0, y: 0, z: 0)
        t.runCovariance = Self.runStart(variance: r)
        return .outlier
    }
}
