import Foundation

extension Geodesic {
    /// The length in metres of the shortest path between two surface points given in earth-centred axes,
    /// to 0.1 mm: what an event's `distance` needs (it carries it to 0.1 m), at a third of the cost of
    /// `distance(_:_:)`, whose answer it gives within 0.1 mm (`GeodesicTests`: GeographicLib's vectors,
    /// 20,000 pairs anywhere).
    ///
    /// Vincenty's inverse method (Survey Review 23, 1975): the longitude on the auxiliary sphere found by
    /// fixed-point iteration, which converges by a factor of about f (1/298) a step, so three to five steps
    /// here; then his series in u² for the length, whose truncation leaves under 0.1 mm at any distance (Karney,
    /// "Algorithms for geodesics", 2013, §1). It needs no coordinates in degrees and, but for one arctangent a
    /// step, no trigonometry: a surface point (x, y, z) has reduced latitude β with a·cos β = √(x² + y²) and
    /// b·sin β = z, and the longitudes' difference is the angle between (x₁, y₁) and (x₂, y₂).
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
        // The sine and cosine of the longitudes' difference L, from the points' projections on the equator (a
        // pole's meridian is taken as the other point's: L = 0).
        var sinL = 0.0
        var cosL = 1.0
        if pa * pb > 0 {
            (sinL, cosL) = unit(a.x * b.y - a.y * b.x, a.x * b.x + a.y * b.y)
        }
        guard sinL.isFinite, cosL.isFinite, sinU1.isFinite, sinU2.isFinite else { return .nan }
        // cos 150°.
        guard cosL >= -0.866_025_403_784_438_6 else { return karney(a, b) }

        let f = WGS84.flattening
        let sinU1sinU2 = sinU1 * sinU2
        let cosU1cosU2 = cosU1 * cosU2
        let sinU1cosU2 = sinU1 * cosU2
        let cosU1sinU2 = cosU1 * sinU2
        // λ = L + δ on the auxiliary sphere; |δ| < f·π, so sin λ and cos λ follow from L's by the small
        // rotation δ, with no trigonometric call.
        var delta = 0.0
        var sinLambda = sinL
        var cosLambda = cosL
        for _ in 0..<20 {
            let across = cosU2 * sinLambda
            let along = cosU1sinU2 - sinU1cosU2 * cosLambda
            let sinSigma = (across * across + along * along).squareRoot()
            let cosSigma = sinU1sinU2 + cosU1cosU2 * cosLambda
            // The same point (or two a rounding apart); or two antipodes, such as the poles, for Karney's.
            if sinSigma == 0 { return cosSigma > 0 ? 0 : karney(a, b) }
            let sigma = atan2(sinSigma, cosSigma)
            let sinAlpha = cosU1cosU2 * sinLambda / sinSigma
            let cosSquaredAlpha = 1 - sinAlpha * sinAlpha
            // On the equator (α = 90°) the term is 0.
            let cos2SigmaM = cosSquaredAlpha != 0 ? cosSigma - 2 * sinU1sinU2 / cosSquaredAlpha : 0
            let c = f / 16 * cosSquaredAlpha * (4 + f * (4 - 3 * cosSquaredAlpha))
            let next =
                (1 - c) * f * sinAlpha
                * (sigma + c * sinSigma * (cos2SigmaM + c * cosSigma * (-1 + 2 * cos2SigmaM * cos2SigmaM)))
            if abs(next - delta) <= 1e-13 {
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
            delta = next
            let (sinDelta, cosDelta) = smallSinCos(delta)
            sinLambda = sinL * cosDelta + cosL * sinDelta
            cosLambda = cosL * cosDelta - sinL * sinDelta
        }
        return karney(a, b)
    }

    /// sin x and cos x, by their Taylor series for |x| ≤ 0.02 (remainders under 10⁻²⁰), by the library
    /// beyond.
    @inline(__always)
    private static func smallSinCos(_ x: Double) -> (sin: Double, cos: Double) {
        guard abs(x) <= 0.02 else { return (sin(x), cos(x)) }
        let x2 = x * x
        return (x * (1 - x2 / 6 * (1 - x2 / 20 * (1 - x2 / 42))), 1 - x2 / 2 * (1 - x2 / 12 * (1 - x2 / 30)))
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
