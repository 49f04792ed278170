/// The WGS84 ellipsoid: its two defining constants and the derived quantities the geodesy code uses.
///
/// Computed properties of literals rather than stored globals: the optimizer folds each into a constant where
/// it is used (the same IEEE arithmetic as at run time, so the same value), also from other modules, where a
/// global `let` computed from other globals is read through a lazy-initialization check (`swift_once`) on every
/// use: the ECEF conversion of every fix and `Geodesic.distanceBounds` of every candidate read them.
package enum WGS84 {
    /// Equatorial radius a, metres.
    @inlinable package static var equatorialRadius: Double { 6_378_137.0 }
    /// Flattening f = (a − b) / a.
    @inlinable static var flattening: Double { 1 / 298.257_223_563 }
    /// 1 − f = b / a.
    @inlinable static var oneMinusFlattening: Double { 1 - flattening }
    /// Polar semi-axis b = a(1 − f), metres.
    @inlinable package static var polarRadius: Double { equatorialRadius * oneMinusFlattening }
    /// First eccentricity squared e² = f(2 − f).
    @inlinable static var eccentricitySquared: Double { flattening * (2 - flattening) }
    /// Second eccentricity squared e′² = e² / (1 − e²).
    @inlinable static var secondEccentricitySquared: Double {
        eccentricitySquared / (oneMinusFlattening * oneMinusFlattening)
    }
    /// Third flattening n = f / (2 − f), the small parameter of Karney's series.
    @inlinable static var thirdFlattening: Double { flattening / (2 - flattening) }

    /// The smallest radius of curvature anywhere on the surface, in any direction: the meridian
    /// radius at the equator, M₀ = a(1 − e²) ≈ 6 335 439 m.
    @inlinable package static var minimumRadiusOfCurvature: Double { equatorialRadius * (1 - eccentricitySquared) }
    /// The largest radius of curvature anywhere on the surface, in any direction: at the poles,
    /// a² / b ≈ 6 399 594 m.
    @inlinable package static var maximumRadiusOfCurvature: Double { equatorialRadius * equatorialRadius / polarRadius }
}
