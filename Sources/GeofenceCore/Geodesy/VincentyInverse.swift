import Foundation

extension Geodesic {
    /// The length in metres of the shortest path between two surface points given in earth-centred axes,
    /// to 0.1 mm: what an event's `distance` needs (it carries it to 0.1 m), at a third of the cost of
    /// `distance(_:_:)`, whose answer it gives within 0.1 mm (`GeodesicTests`: GeographicLib's vectors, 20,000 pairs anywhere).
    ///
    /// Vincenty's inverse method (Survey Review 23, 1975): the longitude on the auxiliary sphere found by
    /// fixed-point iteration, which converges by a factor of about f (1/298) a step, so three to five steps
    /// here; then his series in u² for the length, whose truncation leaves under 0.1 mm at any distance (Karney,
    /// "Algorithms for geodesics", 2013, §1). It needs no coordinates in degrees: a surface point (x, y, z) has
    /// reduced latitude β with a·cos β = √(x² + y²) and b·sin β = z, and the longitudes' difference is the
    /// angle between (x₁, y₁) and (x₂, y₂).
    ///
    /// Where the iteration does not settle (points nearly antipodal), or could settle slowly (their longitudes
    /// more than 150° apart), Karney's method answers instead: the same distance, slower. A non-finite point
    /// gives NaN.
    package static func distance(_ a: GeocentricPoint, _ b: GeocentricPoint) -> Double {
        let pa = (a.x * a.x + a.y * a.y).squareRoot()
        let pb = (b.x * b.x + b.y * b.y).squareRoot()
        // Reduced latitudes' sines and cosines, normalised (the point's own rounding taken out).
        let semiMajor = WGS84.equatorialRadius
        let semiMinor = WGS84.polarRadius
        let (sinU1, cosU1) = unit(a.z / semiMinor, pa / semiMajor)
        let (sinU2, cosU2) = unit(b.z / semiMinor, pb / semiMajor)
        // The longitudes' difference, from the points' projections on the equator (a pole's is the other's).
        let dot = a.x * b.x + a.y * b.y
        let cross = a.x * b.y - a.y * b.x
        let deltaLongitude = pa == 0 || pb == 0 ? 0 : atan2(cross, dot)
        guard deltaLongitude.isFinite, sinU1.isFinite, sinU2.isFinite else { return .nan }
        guard abs(deltaLongitude) <= 150 * Double.pi / 180 else { return karney(a, b) }

        let f = WGS84.flattening
        let sinU1sinU2 = sinU1 * sinU2
        let cosU1cosU2 = cosU1 * cosU2
        let sinU1cosU2 = sinU1 * cosU2
        let cosU1sinU2 = cosU1 * sinU2
        var lambda = deltaLongitude
        var sinSigma = 0.0
        var cosSigma = 1.0
        var sigma = 0.0
        var cosSquaredAlpha = 1.0
        var cos2SigmaM = 0.0
        for _ in 0..<20 {
            let sinLambda = sin(lambda)
            let cosLambda = cos(lambda)
            let across = cosU2 * sinLambda
            let along = cosU1sinU2 - sinU1cosU2 * cosLambda
            sinSigma = (across * across + along * along).squareRoot()
            cosSigma = sinU1sinU2 + cosU1cosU2 * cosLambda
            // The same point (or two a rounding apart); or two antipodes, such as the poles, for Karney's.
            if sinSigma == 0 { return cosSigma > 0 ? 0 : karney(a, b) }
            sigma = atan2(sinSigma, cosSigma)
            let sinAlpha = cosU1cosU2 * sinLambda / sinSigma
            cosSquaredAlpha = 1 - sinAlpha * sinAlpha
            // On the equator (α = 90°) the term is 0.
            cos2SigmaM = cosSquaredAlpha != 0 ? cosSigma - 2 * sinU1sinU2 / cosSquaredAlpha : 0
            let c = f / 16 * cosSquaredAlpha * (4 + f * (4 - 3 * cosSquaredAlpha))
            let previous = lambda
            lambda =
                deltaLongitude + (1 - c) * f * sinAlpha
                * (sigma + c * sinSigma * (cos2SigmaM + c * cosSigma * (-1 + 2 * cos2SigmaM * cos2SigmaM)))
            if abs(lambda - previous) <= 1e-13 {
                let uSquared = cosSquaredAlpha * WGS84.secondEccentricitySquared
                let bigA = 1 + uSquared / 16384 * (4096 + uSquared * (-768 + uSquared * (320 - 175 * uSquared)))
                let bigB = uSquared / 1024 * (256 + uSquared * (-128 + uSquared * (74 - 47 * uSquared)))
                let c2 = cos2SigmaM * cos2SigmaM
                let deltaSigma =
                    bigB * sinSigma
                    * (cos2SigmaM + bigB / 4
                        * (cosSigma * (-1 + 2 * c2) - bigB / 6 * cos2SigmaM * (-3 + 4 * sinSigma * sinSigma)
                            * (-3 + 4 * c2)))
                return semiMinor * bigA * (sigma - deltaSigma)
            }
            guard abs(lambda) <= Double.pi else { break }
        }
        return karney(a, b)
    }

    /// (s, c) scaled to unit length.
    @inline(__always)
    private static func unit(_ s: Double, _ c: Double) -> (Double, Double) {
        let h = (s * s + c * c).squareRoot()
        return (s / h, c / h)
    }

    /// Karney's distance between two surface points in earth-centred axes.
    private static func karney(_ a: GeocentricPoint, _ b: GeocentricPoint) -> Double {
        let (a, b) = (a.latitudeAndLongitude, b.latitudeAndLongitude)
        return distance(
            Coordinate(latitude: a.latitude, longitude: a.longitude),
            Coordinate(latitude: b.latitude, longitude: b.longitude))
    }
}
