import Foundation

/// Karney's solution of the inverse geodesic problem on WGS84: the shortest path between two points.
///
/// A port of GeographicLib's `geod_inverse` (C. F. F. Karney, "Algorithms for geodesics",
/// J. Geodesy 87:43–55, 2013, with the addenda at geographiclib.sourceforge.io), restricted to what
/// `Geodesic.inverse` returns (distance and azimuths) and to an oblate ellipsoid (f > 0).
///
/// The idea: map the ellipsoid onto an auxiliary sphere using the reduced latitude β
/// (tan β = (1 − f) tan φ). A geodesic becomes a great circle there with the same azimuths, since
/// Clairaut's relation sin α cos β = sin α₀ holds on both; only the distance along it (from the arc
/// length σ) and the longitude it covers need correcting, by the series in `GeodesicSeries`. The inverse problem
/// then becomes: find the starting azimuth α₁ whose great circle, with the longitude correction,
/// reaches the target longitude. That one-dimensional root is found by Newton's method on α₁,
/// started from a spherical estimate or, for nearly antipodal points where Newton would wander, from
/// the astroid approximation (Karney §5), with bisection as a safety net.
///
/// Angles are carried as (sin, cos) pairs rather than radians wherever possible: this avoids the
/// cancellation and branch cuts of inverse trig, and keeps exact values (0, ±1) exact.
package enum KarneyInverse {
    /// Distance in metres and the azimuths at both ends as unnormalised (sin, cos) pairs.
    struct Solution {
        var distance: Double
        var sinAzimuth1: Double
        var cosAzimuth1: Double
        var sinAzimuth2: Double
        var cosAzimuth2: Double
    }

    // MARK: Tolerances (as in GeographicLib)

    /// Replaces exact zeros of cos β at the poles so that the formulas stay finite; the resulting
    /// error is far below a rounding error.
    private static let tiny = Double.leastNormalMagnitude.squareRoot()
    private static let tol0 = Double.ulpOfOne
    private static let tol1 = 200 * tol0
    private static let tol2 = tol0.squareRoot()
    private static let tolb = tol0
    private static let xthresh = 1000 * tol2
    /// Newton iterations before falling back to pure bisection; bisection then needs at most one
    /// step per bit of the mantissa.
    private static let maxNewtonIterations = 20
    private static let maxIterations = maxNewtonIterations + Double.significandBitCount + 1 + 10
    /// Below this arc length (≈ 3.6e-8 rad, some 23 cm) the spherical solution with a mean radius is
    /// already exact to rounding: its relative error grows like σ² f / 2, and this is where that
    /// reaches 1/100 of an epsilon.
    private static let reallyShortArc =
        0.1 * tol2 / (max(0.001, abs(f)) * min(1.0, 1 - f / 2) / 2).squareRoot()

    private static let a = WGS84.equatorialRadius
    private static let b = WGS84.polarRadius
    private static let f = WGS84.flattening
    private static let f1 = WGS84.oneMinusFlattening
    private static let ep2 = WGS84.secondEccentricitySquared
    private static let n = WGS84.thirdFlattening

    // MARK: The inverse problem

    static func solve(_ p1: Coordinate, _ p2: Coordinate) -> Solution {
        // Bring the problem to a canonical form: 0 ≤ λ₁₂ ≤ 180°, −90° ≤ φ₁ ≤ 0, φ₁ ≤ φ₂ ≤ −φ₁.
        // Fewer cases to handle, and symmetric inputs give exactly symmetric answers. The three signs
        // record the transformation so the azimuths can be mapped back at the end.
        var (lon12, lon12Error) = Degrees.difference(from: p1.longitude, to: p2.longitude)
        var lonSign: Double = lon12.sign == .minus ? -1 : 1
        lon12 *= lonSign
        lon12Error *= lonSign
        let lam12 = lon12 * Degrees.toRadians
        let (slam12, clam12) = Degrees.sinCos(lon12, plus: lon12Error)
        // The supplement 180° − λ₁₂, to full precision, for the nearly antipodal equatorial test.
        let lon12Supplement = (180 - lon12) - lon12Error

        // Latitudes beyond ±90° are invalid: NaN makes the whole answer NaN. Tiny latitudes round to 0
        // so that points within a picometre of the equator take the equatorial branch.
        var lat1 = Degrees.round(abs(p1.latitude) > 90 ? .nan : p1.latitude)
        var lat2 = Degrees.round(abs(p2.latitude) > 90 ? .nan : p2.latitude)
        // Put the point with the larger |latitude| first (a NaN latitude goes first too).
        let swapSign: Double = abs(lat1) < abs(lat2) || lat2.isNaN ? -1 : 1
        if swapSign < 0 {
            lonSign = -lonSign
            swap(&lat1, &lat2)
        }
        let latSign: Double = (-lat1).sign == .minus ? -1 : 1
        lat1 *= latSign
        lat2 *= latSign

        // Reduced latitudes β as (sin, cos); cos β is kept off exact 0 at the poles so that the
        // azimuth there is defined by the longitude, as the limit from nearby points would be.
        let (sbet1, cbet1) = reducedLatitude(lat1)
        var (sbet2, cbet2) = reducedLatitude(lat2)

        // When |β₁| = |β₂| the two latitudes must be treated as exactly equal, or the Newton iteration
        // meets a singularity; force equality where rounding broke it. Which of cos or sin is
        // the sensitive measure depends on whether |β| is above or below 45°.
        if cbet1 < -sbet1 {
            if cbet2 == cbet1 { sbet2 = Double(signOf: sbet2, magnitudeOf: sbet1) }
        } else {
            if abs(sbet2) == -sbet1 { cbet2 = cbet1 }
        }

        // dn = √(1 + e′² sin²β): the ratio between the ellipsoidal and spherical scales at β.
        let dn1 = (1 + ep2 * sbet1 * sbet1).squareRoot()
        let dn2 = (1 + ep2 * sbet2 * sbet2).squareRoot()

        let ends = Ends(sbet1: sbet1, cbet1: cbet1, dn1: dn1, sbet2: sbet2, cbet2: cbet2, dn2: dn2)
        var salp1 = 0.0
        var calp1 = 0.0
        var salp2 = 0.0
        var calp2 = 0.0
        var s12 = 0.0

        // Case 1: both points on one meridian (or point 1 at a pole). The meridian is a geodesic, and
        // the shortest one unless the points are nearly antipodal across the pole; the reduced length
        // m₁₂ tells which: it turns negative past the conjugate point.
        var meridian = lat1 == -90 || slam12 == 0
        if meridian {
            calp1 = clam12
            salp1 = slam12  // head towards the target longitude
            calp2 = 1
            salp2 = 0  // arrive heading north
            // On a meridian tan β = tan σ cos α.
            let ssig1 = sbet1
            let csig1 = calp1 * cbet1
            let ssig2 = sbet2
            let csig2 = calp2 * cbet2
            let sig12 = Foundation.atan2(max(0, csig1 * ssig2 - ssig1 * csig2) + 0, csig1 * csig2 + ssig1 * ssig2)
            var lengths = Lengths(
                eps: n, sig12: sig12, ssig1: ssig1, csig1: csig1, ssig2: ssig2, csig2: csig2, ends: ends,
                wantDistance: true, wantReducedLength: true)
            if sig12 < tol2 || lengths.m12b >= 0 {
                // Zero-length lines may come out a rounding error negative.
                if sig12 < 3 * tiny || (sig12 < tol0 && (lengths.s12b < 0 || lengths.m12b < 0)) {
                    lengths.s12b = 0
                }
                s12 = lengths.s12b * b
            } else {
                meridian = false  // past the conjugate point: a shorter path leaves the meridian
            }
        }

        if !meridian && sbet1 == 0 && lon12Supplement >= f * 180 {
            // Case 2: both points on the equator (sbet1 == 0 implies sbet2 == 0 in canonical form),
            // and not so nearly antipodal that the shortest path leaves the equator over a pole: the
            // equator is a geodesic while λ₁₂ ≤ (1 − f)·180°.
            calp1 = 0
            calp2 = 0
            salp1 = 1
            salp2 = 1
            s12 = a * lam12
        } else if !meridian {
            // Case 3: the general case.
            let start = startingAzimuth(ends, lam12: lam12, slam12: slam12, clam12: clam12)
            salp1 = start.salp1
            calp1 = start.calp1
            if let shortLine = start.shortLine {
                // Short enough that the spherical solution (with a mean radius) is exact.
                s12 = shortLine.sig12 * b * shortLine.dnm
                salp2 = shortLine.salp2
                calp2 = shortLine.calp2
            } else {
                let hit = newton(ends, salp1: &salp1, calp1: &calp1, slam12: slam12, clam12: clam12)
                salp2 = hit.salp2
                calp2 = hit.calp2
                let lengths = Lengths(
                    eps: hit.eps, sig12: hit.sig12, ssig1: hit.ssig1, csig1: hit.csig1, ssig2: hit.ssig2,
                    csig2: hit.csig2, ends: ends, wantDistance: true, wantReducedLength: false)
                s12 = lengths.s12b * b
            }
        }

        // Undo the canonical transformation.
        if swapSign < 0 {
            swap(&salp1, &salp2)
            swap(&calp1, &calp2)
        }
        salp1 *= swapSign * lonSign
        calp1 *= swapSign * latSign
        salp2 *= swapSign * lonSign
        calp2 *= swapSign * latSign
        return Solution(
            distance: 0 + s12,  // 0 + turns -0 into +0
            sinAzimuth1: salp1, cosAzimuth1: calp1, sinAzimuth2: salp2, cosAzimuth2: calp2)
    }

    /// (sin β, cos β) for the reduced latitude β of a geodetic latitude φ: tan β = (1 − f) tan φ.
    private static func reducedLatitude(_ lat: Double) -> (Double, Double) {
        let (sinLat, cosLat) = Degrees.sinCos(lat)
        // libm's hypot here, correctly rounded in practice, keeps (sin β, cos β) on the unit circle to
        // the last bit; everything downstream inherits any error in it (see `length`).
        let r = hypot(f1 * sinLat, cosLat)
        return (f1 * sinLat / r, max(tiny, cosLat / r))
    }

    /// The reduced latitudes of both (canonical) end points, and their scale factors dn.
    private struct Ends {
        var sbet1: Double
        var cbet1: Double
        var dn1: Double
        var sbet2: Double
        var cbet2: Double
        var dn2: Double
    }

    // MARK: Starting guess

    private struct ShortLine {
        var sig12: Double
        var salp2: Double
        var calp2: Double
        var dnm: Double
    }

    /// A first estimate of α₁; for really short lines, the final answer (`shortLine`).
    private static func startingAzimuth(_ e: Ends, lam12: Double, slam12: Double, clam12: Double)
        -> (salp1: Double, calp1: Double, shortLine: ShortLine?)
    {
        let (sbet1, cbet1, sbet2, cbet2) = (e.sbet1, e.cbet1, e.sbet2, e.cbet2)
        // β₁₂ = β₂ − β₁ in [0, π); β₁₂ₐ = β₂ + β₁ in (−π, 0]. The latter is summed in two statements,
        // as GeographicLib does, so that no fused multiply-add changes its rounding.
        let sbet12 = sbet2 * cbet1 - cbet2 * sbet1
        let cbet12 = cbet2 * cbet1 + sbet2 * sbet1
        var sbet12a = sbet2 * cbet1
        sbet12a += cbet2 * sbet1

        // For short lines, solve on a sphere whose radius is the ellipsoid's at the mid-latitude:
        // ω₁₂ = λ₁₂ / ((1 − f) dn(βₘ)).
        let shortline = cbet12 >= 0 && sbet12 < 0.5 && cbet2 * lam12 < 0.5
        var somg12: Double
        var comg12: Double
        var dnm = Double.nan
        if shortline {
            // sin²((β₁ + β₂)/2) = (sβ₁ + sβ₂)² / ((sβ₁ + sβ₂)² + (cβ₁ + cβ₂)²)
            var sbetm2 = (sbet1 + sbet2) * (sbet1 + sbet2)
            sbetm2 /= sbetm2 + (cbet1 + cbet2) * (cbet1 + cbet2)
            dnm = (1 + ep2 * sbetm2).squareRoot()
            let omg12 = lam12 / (f1 * dnm)
            somg12 = sin(omg12)
            comg12 = cos(omg12)
        } else {
            somg12 = slam12
            comg12 = clam12
        }

        // Azimuth of the great circle from β₁ to β₂ across ω₁₂ on the auxiliary sphere, written so as
        // to avoid cancellation both for small ω₁₂ (first form) and ω₁₂ near π (second form).
        var salp1 = cbet2 * somg12
        var calp1 =
            comg12 >= 0
            ? sbet12 + cbet2 * sbet1 * somg12 * somg12 / (1 + comg12)
            : sbet12a - cbet2 * sbet1 * somg12 * somg12 / (1 - comg12)

        let ssig12 = length(salp1, calp1)
        let csig12 = sbet1 * sbet2 + cbet1 * cbet2 * comg12

        if shortline && ssig12 < reallyShortArc {
            var salp2 = cbet1 * somg12
            var calp2 = sbet12 - cbet1 * sbet2 * (comg12 >= 0 ? somg12 * somg12 / (1 + comg12) : 1 - comg12)
            (salp2, calp2) = normalized(salp2, calp2)
            let line = ShortLine(sig12: Foundation.atan2(ssig12, csig12), salp2: salp2, calp2: calp2, dnm: dnm)
            return (salp1, calp1, line)
        } else if abs(n) >= 0.1 || csig12 >= 0 || ssig12 >= 6 * abs(n) * Double.pi * cbet1 * cbet1 {
            // Not nearly antipodal: the spherical estimate is good enough for Newton.
        } else {
            // Nearly antipodal. Near the antipode the spherical estimate is poor (on the ellipsoid, the
            // geodesics from a point do not all meet at its antipode but touch an astroid-shaped
            // envelope around it), so scale to coordinates in which the antipode is the origin and the
            // cusp of that astroid is at (x, y) = (−1, 0), and solve the astroid equation instead.
            let lam12x = Foundation.atan2(-slam12, -clam12)  // λ₁₂ − π
            let k2 = sbet1 * sbet1 * ep2
            let eps = k2 / (2 * (1 + (1 + k2).squareRoot()) + k2)
            let lamscale = f * cbet1 * GeodesicSeries.a3(eps) * Double.pi
            let betscale = lamscale * cbet1
            let x = lam12x / lamscale  // x: scaled longitude offset from the antipode
            let y = sbet12a / betscale  // y: scaled latitude offset from the antipode
            if y > -tol1 && x > -1 - xthresh {
                // On or just beside the cut through the antipode (the points are on opposite sides of
                // the equator, nearly symmetric): the geodesic starts nearly meridional.
                salp1 = min(1.0, -x)
                calp1 = -(1 - salp1 * salp1).squareRoot()
            } else {
                // Estimate ω₁₂ from the astroid root and use the spherical formula for α₁; this
                // saves Newton steps compared with taking α₁ from the astroid directly.
                let k = astroid(x, y)
                let omg12a = lamscale * (-x * k / (1 + k))  // π − ω₁₂, small
                somg12 = sin(omg12a)
                comg12 = -cos(omg12a)
                salp1 = cbet2 * somg12
                calp1 = sbet12a - cbet2 * sbet1 * somg12 * somg12 / (1 - comg12)
            }
        }
        // The sanity check is written backwards so that a NaN passes through to the result.
        if !(salp1 <= 0) {
            (salp1, calp1) = normalized(salp1, calp1)
        } else {
            salp1 = 1
            calp1 = 0
        }
        return (salp1, calp1, nil)
    }

    /// The positive root k of k⁴ + 2k³ − (x² + y² − 1)k² − 2y²k − y² = 0 (Karney 2013, eq. 55).
    ///
    /// Solved in closed form, like a cubic via Cardano, with each expression arranged to avoid
    /// cancellation; adapted from GeographicLib's `Geocentric::Reverse`.
    package static func astroid(_ x: Double, _ y: Double) -> Double {
        let p = x * x
        let q = y * y
        let r = (p + q - 1) / 6
        guard !(q == 0 && r <= 0) else {
            // y = 0 with |x| ≤ 1: the root is 0 (for small y it is |y| / √(1 − x²)).
            return 0
        }
        // Multiply the equations for s and t by r³ and r, so that r = 0 causes no division by zero.
        let s = p * q / 4  // r³ s
        let r2 = r * r
        let r3 = r * r2
        // Discriminant of the quadratic for T³; zero on the evolute p^(1/3) + q^(1/3) = 1.
        let disc = s * (s + 2 * r3)
        var u = r
        if disc >= 0 {
            var t3 = s + r3
            // Take the sign of the root that makes |T³| larger: less cancellation, same u.
            t3 += t3 < 0 ? -disc.squareRoot() : disc.squareRoot()  // (r t)³
            let t = cbrt(t3)  // r t, real root
            u += t + (t != 0 ? r2 / t : 0)  // t == 0 implies r2 / t → 0
        } else {
            // T is complex but u is real; pick the cube root that avoids cancellation (r < 0 here).
            let angle = Foundation.atan2((-disc).squareRoot(), -(s + r3))
            u += 2 * r * cos(angle / 3)
        }
        let v = (u * u + q).squareRoot()  // > 0
        let uv = u < 0 ? q / (v - u) : u + v  // u + v without cancellation; > 0
        let w = (uv - q) / (2 * v)
        return uv / ((uv + w * w).squareRoot() + w)  // k, rearranged to avoid cancellation
    }

    // MARK: Newton's method on α₁

    /// The great circle from β₁ at azimuth α₁, followed to latitude β₂.
    private struct Lambda12 {
        /// λ₁₂(α₁) minus the target longitude difference: the function whose root is wanted.
        var value: Double
        /// d(value)/dα₁, or NaN when not asked for.
        var derivative: Double
        var salp2: Double
        var calp2: Double
        var sig12: Double
        var ssig1: Double
        var csig1: Double
        var ssig2: Double
        var csig2: Double
        var eps: Double
    }

    /// Solves λ₁₂(α₁) = λ₁₂ for α₁, updating (salp1, calp1); returns the line through the solution.
    ///
    /// λ₁₂(α₁) − λ₁₂ has exactly one root in (0, π) with a positive slope there, so every evaluation
    /// narrows a bracket [α₁ₐ, α₁ᵦ] around it. A Newton step that goes uphill (negative derivative)
    /// or leaves (0, π) is replaced by bisection of the bracket. On WGS84 Newton converges in about
    /// three steps; bisection guards against more eccentric cases and pathological rounding.
    private static func newton(
        _ e: Ends, salp1: inout Double, calp1: inout Double, slam12: Double, clam12: Double
    ) -> Lambda12 {
        var iterations = 0
        var newtonConverging = false  // "tripn": relax the tolerance once Newton is nearly done
        var bracketCollapsed = false  // "tripb"
        var salp1a = tiny
        var calp1a = 1.0
        var salp1b = tiny
        var calp1b = -1.0
        while true {
            let line = lambda12(
                e, salp1: salp1, calp1: calp1, slam120: slam12, clam120: clam12,
                wantDerivative: iterations < maxNewtonIterations)
            let v = line.value
            // Written so that a NaN ends the loop.
            if bracketCollapsed || !(abs(v) >= (newtonConverging ? 8 : 1) * tol0) || iterations == maxIterations {
                return line
            }
            // Shrink the bracket (compare cot α₁, which decreases as α₁ goes from 0 to π).
            if v > 0 && (iterations > maxNewtonIterations || calp1 / salp1 > calp1b / salp1b) {
                salp1b = salp1
                calp1b = calp1
            } else if v < 0 && (iterations > maxNewtonIterations || calp1 / salp1 < calp1a / salp1a) {
                salp1a = salp1
                calp1a = calp1
            }
            iterations += 1
            if iterations < maxNewtonIterations && line.derivative > 0 {
                let dalp1 = -v / line.derivative
                if abs(dalp1) < Double.pi {
                    let sdalp1 = sin(dalp1)
                    let cdalp1 = cos(dalp1)
                    let nsalp1 = salp1 * cdalp1 + calp1 * sdalp1
                    if nsalp1 > 0 {
                        calp1 = calp1 * cdalp1 - salp1 * sdalp1
                        salp1 = nsalp1
                        (salp1, calp1) = normalized(salp1, calp1)
                        // Where the slope tends to 0 convergence is not quadratic, so the stopping
                        // test works with epsilon rather than √epsilon.
                        newtonConverging = abs(v) <= 16 * tol0
                        continue
                    }
                }
            }
            // Bisection.
            salp1 = (salp1a + salp1b) / 2
            calp1 = (calp1a + calp1b) / 2
            (salp1, calp1) = normalized(salp1, calp1)
            newtonConverging = false
            bracketCollapsed =
                abs(salp1a - salp1) + (calp1a - calp1) < tolb || abs(salp1 - salp1b) + (calp1 - calp1b) < tolb
        }
    }

    /// Follows the geodesic from β₁ with azimuth α₁ to latitude β₂ and reports how far its longitude
    /// difference λ₁₂ misses the target (given as sin and cos of λ₁₂₀).
    private static func lambda12(
        _ e: Ends, salp1: Double, calp1 inCalp1: Double, slam120: Double, clam120: Double, wantDerivative: Bool
    ) -> Lambda12 {
        let (sbet1, cbet1, dn1, sbet2, cbet2) = (e.sbet1, e.cbet1, e.dn1, e.sbet2, e.cbet2)
        var calp1 = inCalp1
        // A line heading due north or south from the equator is the degenerate meridian, handled
        // earlier; nudge it off so that the formulas below stay regular.
        if sbet1 == 0 && calp1 == 0 { calp1 = -tiny }

        // Clairaut: sin α₀ = sin α₁ cos β₁, with α₀ the azimuth at the equator crossing.
        let salp0 = salp1 * cbet1
        let calp0 = length(calp1, salp1 * sbet1)  // > 0

        // tan β₁ = tan σ₁ cos α₁ and tan ω₁ = sin α₀ tan σ₁ (σ, ω measured from the equator crossing).
        // The ω pair need not be normalised: only ratios of it are used.
        let (ssig1, csig1) = normalized(sbet1, calp1 * cbet1)
        let somg1 = salp0 * sbet1
        let comg1 = calp1 * cbet1

        // α₂ from Clairaut again; cos α₂ is computed from a difference of squares arranged to be
        // accurate, and is taken ≥ 0 (the first crossing of β₂ going north). When |β₂| = |β₁| the
        // symmetry is enforced exactly, since the Newton iteration is delicate there.
        let salp2 = cbet2 != cbet1 ? salp0 / cbet2 : salp1
        let calp2 =
            cbet2 != cbet1 || abs(sbet2) != -sbet1
            ? (calp1 * cbet1 * calp1 * cbet1
                + (cbet1 < -sbet1 ? (cbet2 - cbet1) * (cbet1 + cbet2) : (sbet1 - sbet2) * (sbet1 + sbet2)))
                .squareRoot() / cbet2
            : abs(calp1)
        let (ssig2, csig2) = normalized(sbet2, calp2 * cbet2)
        let somg2 = salp0 * sbet2
        let comg2 = calp2 * cbet2

        // σ₁₂ = σ₂ − σ₁ and ω₁₂ = ω₂ − ω₁, both limited to [0, π].
        let sig12 = Foundation.atan2(max(0, csig1 * ssig2 - ssig1 * csig2) + 0, csig1 * csig2 + ssig1 * ssig2)
        let somg12 = max(0, comg1 * somg2 - somg1 * comg2) + 0
        let comg12 = comg1 * comg2 + somg1 * somg2
        // η = ω₁₂ − λ₁₂₀, computed as one angle difference to keep precision.
        let eta = Foundation.atan2(somg12 * clam120 - comg12 * slam120, comg12 * clam120 + somg12 * slam120)

        // λ₁₂ = ω₁₂ − f sin α₀ A₃ (σ₁₂ + B₃(σ₂) − B₃(σ₁))   (Karney eq. 8 with the series of eq. 23)
        let k2 = calp0 * calp0 * ep2
        let eps = k2 / (2 * (1 + (1 + k2).squareRoot()) + k2)
        let c3 = GeodesicSeries.c3(eps)
        let b312 =
            GeodesicSeries.sinSeries(sin: ssig2, cos: csig2, c3) - GeodesicSeries.sinSeries(sin: ssig1, cos: csig1, c3)
        let domg12 = -f * GeodesicSeries.a3(eps) * salp0 * (sig12 + b312)
        let value = eta + domg12

        var derivative = Double.nan
        if wantDerivative {
            if calp2 == 0 {
                // Meridional arrival: the general formula is 0/0; this is its limit (Karney eq. 47).
                derivative = -2 * f1 * dn1 / sbet1
            } else {
                // dλ₁₂/dα₁ = m₁₂ / (a cos α₂ cos β₂) (Karney eq. 46), and m₁₂ / a = (1 − f) m₁₂ / b.
                let lengths = Lengths(
                    eps: eps, sig12: sig12, ssig1: ssig1, csig1: csig1, ssig2: ssig2, csig2: csig2, ends: e,
                    wantDistance: false, wantReducedLength: true)
                derivative = lengths.m12b * f1 / (calp2 * cbet2)
            }
        }
        return Lambda12(
            value: value, derivative: derivative, salp2: salp2, calp2: calp2, sig12: sig12, ssig1: ssig1,
            csig1: csig1, ssig2: ssig2, csig2: csig2, eps: eps)
    }

    // MARK: Lengths

    /// Distance s₁₂ and reduced length m₁₂ along a geodesic, both divided by b.
    private struct Lengths {
        var s12b = Double.nan
        var m12b = Double.nan

        init(
            eps: Double, sig12: Double, ssig1: Double, csig1: Double, ssig2: Double, csig2: Double, ends e: Ends,
            wantDistance: Bool, wantReducedLength: Bool
        ) {
            var a1 = GeodesicSeries.a1Minus1(eps)
            let c1 = GeodesicSeries.c1(eps)
            var a2 = 0.0
            var c2 = GeodesicSeries.Terms(repeating: 0)
            var m0 = 0.0
            if wantReducedLength {
                a2 = GeodesicSeries.a2Minus1(eps)
                c2 = GeodesicSeries.c2(eps)
                m0 = a1 - a2  // the secular coefficient, A₁ − A₂, from the "minus 1" forms for precision
                a2 += 1
            }
            a1 += 1
            // J₁₂ = (A₁ − A₂) σ₁₂ + I₁(σ₁₂) − I₂(σ₁₂) in the integrals' series form (Karney eq. 40).
            var j12 = 0.0
            if wantDistance {
                let b1 =
                    GeodesicSeries.sinSeries(sin: ssig2, cos: csig2, c1)
                    - GeodesicSeries.sinSeries(sin: ssig1, cos: csig1, c1)
                s12b = a1 * (sig12 + b1)
                if wantReducedLength {
                    let b2 =
                        GeodesicSeries.sinSeries(sin: ssig2, cos: csig2, c2)
                        - GeodesicSeries.sinSeries(sin: ssig1, cos: csig1, c2)
                    j12 = m0 * sig12 + (a1 * b1 - a2 * b2)
                }
            } else if wantReducedLength {
                // Only m₁₂ wanted: fold both series into one to halve the Clenshaw work.
                for l in 1...GeodesicSeries.order { c2[l] = a1 * c1[l] - a2 * c2[l] }
                j12 =
                    m0 * sig12
                    + (GeodesicSeries.sinSeries(sin: ssig2, cos: csig2, c2)
                        - GeodesicSeries.sinSeries(sin: ssig1, cos: csig1, c2))
            }
            if wantReducedLength {
                // m₁₂ = dn₂ cos σ₁ sin σ₂ − dn₁ sin σ₁ cos σ₂ − cos σ₁ cos σ₂ J₁₂   (Karney eq. 38)
                // The parentheses keep the first two products' cancellation exact for coincident points.
                m12b = e.dn2 * (csig1 * ssig2) - e.dn1 * (ssig1 * csig2) - csig1 * csig2 * j12
            }
        }
    }

    /// (x, y) scaled to unit length.
    static func normalized(_ x: Double, _ y: Double) -> (Double, Double) {
        let r = length(x, y)
        return (x / r, y / r)
    }

    /// √(x² + y²). Unlike libm's `hypot` this does not guard against overflow and underflow, which
    /// cannot happen here: the arguments are sines and cosines, or small multiples of them, and the
    /// smallest ones used (`tiny` ≈ 1.5e-154) still square to a normal number. `hypot` was a tenth of
    /// the solver's run time.
    private static func length(_ x: Double, _ y: Double) -> Double {
        (x * x + y * y).squareRoot()
    }
}
