/// Earth-centred, earth-fixed cartesian point on the WGS84 ellipsoid surface (metres).
///
/// x points to (0°, 0°), y to (0°, 90°E), z to the north pole. Converting costs a few trigonometric
/// calls; after that, `chord(to:)` and `Geodesic.distanceBounds(chord:)` bound the geodesic distance
/// in a few nanoseconds, so convert fixed points (region centres) once and reuse them.
package struct GeocentricPoint: Sendable, Equatable {
    package var x: Double
    package var y: Double
    package var z: Double

    /// The point on the ellipsoid surface (height 0) at `c`. Degree-exact trigonometry puts the poles
    /// exactly on the z axis and the equator exactly at z = 0.
    ///
    /// Inlinable, as are `WGS84`'s constants: every fix and every index query converts a point, and from
    /// another module the call and the constants' lazy initialization checks cost more than the arithmetic.
    @inlinable
    package init(_ c: Coordinate) {
        let (sinLat, cosLat) = Degrees.sinCos(c.latitude)
        let (sinLon, cosLon) = Degrees.sinCos(c.longitude)
        let e2 = WGS84.eccentricitySquared
        // Prime-vertical radius of curvature N = a / √(1 − e² sin²φ): the distance along the normal
        // from the surface to the polar axis.
        let primeVerticalRadius = WGS84.equatorialRadius / (1 - e2 * sinLat * sinLat).squareRoot()
        x = primeVerticalRadius * cosLat * cosLon
        y = primeVerticalRadius * cosLat * sinLon
        z = primeVerticalRadius * (1 - e2) * sinLat
    }

    /// A point from its coordinates (metres), on the surface or not.
    package init(x: Double, y: Double, z: Double) {
        self.x = x
        self.y = y
        self.z = z
    }

    /// Latitude and longitude (degrees) of a point on the ellipsoid's surface, computed back from its
    /// position: within a few units in the last place of the degrees it was made from (`init(_:)`), except
    /// for a longitude at a pole, which the position does not keep.
    ///
    /// On the surface x² + y² = (N cos φ)² and z = N (1 − e²) sin φ, so tan φ = z / ((1 − e²) √(x² + y²))
    /// exactly: no iteration is needed.
    package var latitudeAndLongitude: (latitude: Double, longitude: Double) {
        let latitude = Degrees.atan2(z, (1 - WGS84.eccentricitySquared) * (x * x + y * y).squareRoot())
        return (latitude, Degrees.atan2(y, x))
    }

    /// The straight-line (through the earth) distance to `other`, in metres.
    @inlinable
    package func chord(to other: GeocentricPoint) -> Double {
        let dx = x - other.x
        let dy = y - other.y
        let dz = z - other.z
        return (dx * dx + dy * dy + dz * dz).squareRoot()
    }
}

extension Geodesic {
    /// Guaranteed bounds on the geodesic distance given the straight-line chord between two surface
    /// points.
    ///
    /// For `chord` ≤ 1000 km, `lower ≤ Geodesic.distance ≤ upper` with
    ///
    ///     lower = c + μ² c³ / 24 − δ,                 μ² = 0.99 / R₊²
    ///     upper = c + c³ / (24 R₋²) + c⁵ / (208 R₋⁴) + δ
    ///
    /// where c is the chord, R₋ = a(1 − e²) ≈ 6 335 439 m and R₊ = a² / b ≈ 6 399 594 m are the
    /// smallest and largest radii of curvature of WGS84, and δ = 1 µm absorbs rounding. The interval
    /// is about 0.03 mm wide at 10 km and 1 mm at 32 km (it grows as c³). Beyond 1000 km, or for a
    /// NaN chord, `upper` is +infinity; `lower` stays valid for any finite chord.
    ///
    /// Why this holds. Let s be the length of the shortest geodesic and c its chord.
    ///
    /// *Upper bound.* A geodesic has no sideways (geodesic) curvature, so its curvature as a space
    /// curve is the surface's normal curvature in its direction, which on WGS84 is at most
    /// κ = 1/R₋ (the meridian radius M is smallest at the equator, and the normal curvature in any
    /// direction lies between 1/M and 1/N ≤ 1/M). By Schur's comparison theorem, a curve of length
    /// s ≤ 2π/κ with curvature ≤ κ has a chord at least that of a circular arc of the same length and
    /// curvature κ: c ≥ (2/κ) sin(κs/2). The shortest geodesic is at most 3 quarter-meridians long
    /// (down the first point's meridian to the nearer pole, then along the other's), under 2π/κ; and
    /// if κs were above π the inequality would force c > 8800 km. So for c ≤ 1000 km, κs ≤ π, the
    /// sine is increasing there, and s ≤ (2/κ) asin(κc/2). Expanding asin(x) = x + x³/6 + 3x⁵/40 + …,
    /// whose coefficients decrease, the tail from x⁵ on is at most (3/40) x⁵ / (1 − x²) ≤ x⁵ / 13 for
    /// x = κc/2 ≤ 0.08, giving the polynomial above (about κ²c³/24 over the chord: 1.04 mm at 10 km).
    ///
    /// *Lower bound.* s ≥ c always, but the geodesic also bends by at least the smallest curvature
    /// 1/R₊, and that bending is consistently towards the earth. With T(t) the unit tangent at arc
    /// length t, s − c = ½∫|T − u|² dt for u the chord direction, which is at least ½∫|T − T̄|² dt
    /// (T̄ the mean of T): at least s/2 times the variance of T, hence of T·w for any unit w. Take w
    /// as the surface normal n at the midpoint: d(−T·w)/dt = k(t) n(t)·w ≥ (1/R₊) cos θ, where
    /// θ ≤ κs/2 is how far the normal turns over half the line. A function with slope ≥ μ on [0, s]
    /// has variance ≥ μ²s²/12, so s − c ≥ μ²s³/24 ≥ μ²c³/24 with μ = cos(κs/2)/R₊; for c ≤ 1000 km,
    /// s ≤ 1001.1 km and cos²(κs/2) ≥ 0.9937 ≥ 0.99.
    ///
    /// *Rounding.* Each ECEF coordinate (at most 6.4e6 m) passes through about ten roundings of
    /// relative size 2⁻⁵³ (degree-to-radian, sin, cos, the radius, products): under 1e-8 m per
    /// coordinate, so under 4e-8 m on the chord, plus a few ulps of c (1e-9 m at 1000 km) for the
    /// chord and the polynomials. δ = 1 µm covers that more than twenty times over, and is far
    /// smaller than the interval itself.
    @inlinable
    package static func distanceBounds(chord: Double) -> (lower: Double, upper: Double) {
        let c = chord
        guard c <= DistanceBounds.maximumChord else {
            // Only s ≥ c remains; a NaN chord (from an invalid coordinate) bounds nothing.
            return c.isNaN ? (0, .infinity) : (max(0, c - DistanceBounds.roundingSlack), .infinity)
        }
        let c2 = c * c
        let upper = c * (1 + c2 * (DistanceBounds.upperCubic + c2 * DistanceBounds.upperQuintic))
        let lower = c * (1 + c2 * DistanceBounds.lowerCubic)
        return (max(0, lower - DistanceBounds.roundingSlack), upper + DistanceBounds.roundingSlack)
    }
}

/// The constants of `Geodesic.distanceBounds(chord:)`, derived in its documentation.
///
/// Computed properties of literals, not stored globals, as `WGS84`'s are: the optimizer folds them into
/// constants (the same IEEE arithmetic as at run time, so the same values), where a global `let` computed
/// from other globals was read through a lazy-initialization check (`swift_once`) on every call.
package enum DistanceBounds {
    /// Longest chord for which the bounds are finite: far below 8800 km, where the upper bound's proof
    /// would break down, and short enough for the 0.99 tilt factor and the x⁵/13 tail.
    @inlinable package static var maximumChord: Double { 1_000_000.0 }
    /// Absolute allowance for rounding in the ECEF conversion, the chord and the bound polynomials.
    @inlinable package static var roundingSlack: Double { 1e-6 }
    /// Lower bound on cos²(θ), θ the largest angle the surface normal turns over half of a geodesic
    /// whose chord is at most `maximumChord`.
    @inlinable package static var normalTiltFactor: Double { 0.99 }
    /// 1 / (24 R₋²).
    @inlinable static var upperCubic: Double {
        1 / (24 * WGS84.minimumRadiusOfCurvature * WGS84.minimumRadiusOfCurvature)
    }
    /// 1 / (208 R₋⁴).
    @inlinable static var upperQuintic: Double {
        1
            / (208
                * (WGS84.minimumRadiusOfCurvature * WGS84.minimumRadiusOfCurvature * WGS84.minimumRadiusOfCurvature
                    * WGS84.minimumRadiusOfCurvature))
    }
    /// μ² / 24 with μ² = 0.99 / R₊².
    @inlinable static var lowerCubic: Double {
        normalTiltFactor / (24 * WGS84.maximumRadiusOfCurvature * WGS84.maximumRadiusOfCurvature)
    }
}
