// Which distance to use when
//
// - `Geodesic.inverse` / `Geodesic.distance`: the exact ellipsoidal distance (Karney's algorithm,
//   agreeing with GeographicLib to nanometres) for any pair of points on earth, including antipodal
//   ones. It iterates, so it costs on the order of a microsecond. Use it for anything reported or
//   stored, for the azimuths, and to decide the rare cases the fast path leaves open.
// - `GeocentricPoint` + `Geodesic.distanceBounds(chord:)`: a guaranteed interval around the same
//   distance from a straight-line chord, a few nanoseconds once the points are converted (convert each
//   region centre once, and each fix once). The interval is 0.03 mm wide at 10 km, 1 mm at 32 km and
//   3 cm at 100 km (it grows as the cube of the distance), so for a radius test "is the fix within r
//   of the centre" compare r against both ends: r ≥ `upper` is inside, r < `lower` is outside, and
//   only a fix within that sliver of the boundary needs `Geodesic.distance`. Beyond 1000 km the
//   upper end is +infinity and only `lower` is useful ("certainly farther than this").

import Foundation

/// Geodesics (shortest paths along the surface) on the WGS84 ellipsoid.
package enum Geodesic {
    /// Solves the inverse geodesic problem: the shortest path from `a` to `b` on the WGS84 ellipsoid.
    ///
    /// Distance in metres, azimuths in degrees at both ends.
    ///
    /// Accurate to about 15 nm (GeographicLib's accuracy) for every pair of points, including
    /// coincident, nearly antipodal and polar ones. Longitudes are taken modulo 360°; a latitude
    /// outside [-90°, 90°] or a non-finite coordinate gives NaN.
    package static func inverse(_ a: Coordinate, _ b: Coordinate) -> GeodesicInverse {
        let solution = KarneyInverse.solve(a, b)
        return GeodesicInverse(
            distance: solution.distance,
            azimuth1: Degrees.atan2(solution.sinAzimuth1, solution.cosAzimuth1),
            azimuth2: Degrees.atan2(solution.sinAzimuth2, solution.cosAzimuth2))
    }

    /// The length in metres of the shortest path from `a` to `b` on the WGS84 ellipsoid; the same
    /// value as `inverse(a, b).distance`, without converting the azimuths.
    package static func distance(_ a: Coordinate, _ b: Coordinate) -> Double {
        KarneyInverse.solve(a, b).distance
    }
}

/// The shortest path between two points: its length, and its direction where it leaves the first
/// point and where it arrives at the second.
package struct GeodesicInverse: Sendable, Equatable {
    /// Length of the geodesic in metres.
    package var distance: Double
    /// Azimuth at the first point, in degrees clockwise from north, in [-180, 180].
    package var azimuth1: Double
    /// Azimuth at the second point (the direction of travel on arrival), in degrees clockwise from
    /// north, in [-180, 180].
    package var azimuth2: Double

    package init(distance: Double, azimuth1: Double, azimuth2: Double) {
        self.distance = distance
        self.azimuth1 = azimuth1
        self.azimuth2 = azimuth2
    }
}
