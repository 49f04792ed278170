import Foundation

/// Trigonometry on angles in degrees, done so that exact angles (0, 90, 180, …) give exact results.
///
/// Converting degrees to radians first would turn `sin(180°)` into `1.2e-16` instead of 0, and the
/// geodesic solver relies on exact zeros to recognise meridians, the equator and coincident points.
/// These follow GeographicLib's `Math` helpers closely, because the solver's special cases were
/// tuned against exactly this arithmetic.
@usableFromInline
enum Degrees {
    @inlinable static var toRadians: Double { Double.pi / 180 }

    /// `(sin x, cos x)` for `x` in degrees.
    ///
    /// The angle is first reduced to [-45°, 45°] plus a whole number of quadrants. The reduction is
    /// exact (Sterbenz), so the only rounding is in the final `sin`/`cos` of a small angle, and
    /// multiples of 90° come out exact. Inlinable (`GeocentricPoint.init` converts every fix and every
    /// query point); an angle already within ±360° (every latitude and longitude) is its own remainder, so
    /// the `fmod` call is skipped for it, with the same result.
    @inlinable
    static func sinCos(_ x: Double) -> (sin: Double, cos: Double) {
        guard x.isFinite else { return (.nan, .nan) }
        var r = abs(x) < 360 ? x : x.truncatingRemainder(dividingBy: 360)
        let q = Int((r / 90).rounded(.toNearestOrEven))
        r -= 90 * Double(q)
        return rotateByQuadrants(sin: Foundation.sin(r * toRadians), cos: Foundation.cos(r * toRadians), q, sign: x)
    }

    /// `(sin x, cos x)` for `x` in degrees within ±360°, to 2e-9: for an angle known to degrees (a course), where
    /// libm's `sin` and `cos` (some 180 instructions together, for every fix with a course) buy nothing. The same
    /// reduction to [-45°, 45°] as `sinCos(_:)`, then their Taylor series to r⁹ and r¹⁰ (|r| ≤ π/4: the first term
    /// left out is below 2e-9), turned by the same `rotateByQuadrants`: multiples of 90° come out exact. Not for
    /// geodesy, whose solver was tuned against libm's values. An angle beyond ±360° (or not finite) goes to
    /// `sinCos(_:)`.
    @inlinable
    static func roughSinCos(_ x: Double) -> (sin: Double, cos: Double) {
        guard abs(x) < 360 else { return sinCos(x) }
        let q = Int((x / 90).rounded(.toNearestOrEven))
        let r = (x - 90 * Double(q)) * toRadians
        let r2 = r * r
        let s = r * (1 + r2 * (-1.0 / 6 + r2 * (1.0 / 120 + r2 * (-1.0 / 5040 + r2 * (1.0 / 362_880)))))
        let c = 1 + r2 * (-0.5 + r2 * (1.0 / 24 + r2 * (-1.0 / 720 + r2 * (1.0 / 40_320 - r2 / 3_628_800))))
        return rotateByQuadrants(sin: s, cos: c, q, sign: x)
    }

    /// `(sin, cos)` of `x + t` in degrees, where `t` is a tiny correction to `x` (the rounding error of
    /// a longitude difference) and `x` is in [-180°, 180°].
    static func sinCos(_ x: Double, plus t: Double) -> (sin: Double, cos: Double) {
        let q = x.isFinite ? Int((x / 90).rounded(.toNearestOrEven)) : 0
        let r = round(x - 90 * Double(q) + t) * toRadians
        return rotateByQuadrants(sin: Foundation.sin(r), cos: Foundation.cos(r), q, sign: x)
    }

    /// Rotates `(s, c)` by `q` quarter turns; a zero sine keeps the sign of the original angle.
    @inlinable
    static func rotateByQuadrants(sin s: Double, cos c: Double, _ q: Int, sign: Double)
        -> (sin: Double, cos: Double)
    {
        var (s, c) = (s, c)
        switch q & 3 {  // q & 3 is q mod 4 for negative q too
        case 1: (s, c) = (c, -s)
        case 2: (s, c) = (-s, -c)
        case 3: (s, c) = (-c, s)
        default: break
        }
        c += 0  // turns -0 into +0
        if s == 0 { s = Double(signOf: sign, magnitudeOf: s) }
        return (s, c)
    }

    /// `atan2(y, x)` in degrees, exact at multiples of 45° and with the result in [-180°, 180°].
    static func atan2(_ y: Double, _ x: Double) -> Double {
        var (y, x) = (y, x)
        var q = 0
        if abs(y) > abs(x) {
            q = 2
            (x, y) = (y, x)
        }
        if x < 0 {
            q += 1
            x = -x
        }
        // Here |y| <= x, so the atan2 below lies in [-45°, 45°] and the quadrant fix-ups are exact.
        let angle = Foundation.atan2(y, x) / toRadians
        switch q {
        case 1: return Double(signOf: y, magnitudeOf: 180) - angle
        case 2: return 90 - angle
        case 3: return -90 + angle
        default: return angle
        }
    }

    /// Rounds tiny angles to a grid of 2⁻⁵⁷ degrees (about 0.7 pm on the earth).
    ///
    /// This makes a latitude of 1e-200 exactly 0, so nearly-equatorial points take the equatorial
    /// branch instead of a numerically singular one; the rounding is far below any meaningful error.
    static func round(_ x: Double) -> Double {
        let z = 1.0 / 16
        var y = abs(x)
        // z - (z - y) is not y: it drops the bits of y below the ulp of 1/16.
        if y < z { y = z - (z - y) }
        return Double(signOf: x, magnitudeOf: y)
    }

    /// `y - x` reduced to [-180°, 180°], together with the rounding error of that difference.
    ///
    /// Both angles are reduced modulo 360° before subtracting, so longitudes such as 179.99° and
    /// -179.99° differ by 0.02° to full precision; the error term lets the caller keep even the bits
    /// lost in the subtraction.
    static func difference(from x: Double, to y: Double) -> (difference: Double, error: Double) {
        var (d, t) = exactSum((-x).remainder(dividingBy: 360), y.remainder(dividingBy: 360))
        (d, t) = exactSum(d.remainder(dividingBy: 360), t)
        if d == 0 || abs(d) == 180 {
            // The sign matters at ±180° and 0: it tells which way round the difference goes.
            d = Double(signOf: t == 0 ? y - x : -t, magnitudeOf: d)
        }
        return (d, t)
    }

    /// Error-free sum: `u + v == sum + error` exactly (Knuth's TwoSum).
    static func exactSum(_ u: Double, _ v: Double) -> (sum: Double, error: Double) {
        let s = u + v
        var up = s - v
        var vpp = s - up
        up -= u
        vpp -= v
        return (s, s == 0 ? s : 0 - (up + vpp))
    }
}
