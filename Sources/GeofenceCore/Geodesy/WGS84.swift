/// The WGS84 ellipsoid: its two defining constants and the derived quantities the geodesy code uses.
package enum WGS84 {
    /// Equatorial radius a, metres.
    package static let equatorialRadius = 6_378_137.0
    /// Flattening f = (a − b) / a.
    static let flattening = 1 / 298.257_223_563
    /// 1 − f = b / a.
    static let oneMinusFlattening = 1 - flattening
    /// Polar semi-axis b = a(1 − f), metres.
    package static let polarRadius = equatorialRadius * oneMinusFlattening
    /// First eccentricity squared e² = f(2 − f).
    static let eccentricitySquared = flattening * (2 - flattening)
    /// Second eccentricity squared e′² = e² / (1 − e²).
    static let secondEccentricitySquared = eccentricitySquared / (oneMinusFlattening * oneMinusFlattening)
    /// Third flattening n = f / (2 − f), the small parameter of Karney's series.
    static let thirdFlattening = flattening / (2 - flattening)

    /// The smallest radius of curvature anywhere on the surface, in any direction: the meridian
    /// radius at the equator, M₀ = a(1 − e²) ≈ 6 335 439 m.
    package static let minimumRadiusOfCurvature = equatorialRadius * (1 - eccentricitySquared)
    /// The largest radius of curvature anywhere on the surface, in any direction: at the poles,
    /// a² / b ≈ 6 399 594 m.
    package static let maximumRadiusOfCurvature = equatorialRadius * equatorialRadius / polarRadius
}
