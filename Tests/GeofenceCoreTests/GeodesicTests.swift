import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// One line of `Resources/geodesic-vectors.txt`: GeographicLib's answer for one pair of points.
private struct ReferenceVector {
    var section: String
    var line: Int
    var a: Coordinate
    var b: Coordinate
    var distance: Double
    var azimuth1: Double
    var azimuth2: Double

    var description: String {
        "[\(section)] line \(line): (\(a.latitude), \(a.longitude)) → (\(b.latitude), \(b.longitude))"
    }
}

/// The reference file is parsed once and shared by the tests that use it.
private let referenceVectors: [ReferenceVector] = {
    guard
        let url = Bundle.module.url(forResource: "geodesic-vectors", withExtension: "txt", subdirectory: "Resources"),
        let text = try? String(contentsOf: url, encoding: .utf8)
    else { return [] }
    var vectors: [ReferenceVector] = []
    var section = ""
    for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
        if line.isEmpty || line.hasPrefix("#") { continue }
        if line.hasPrefix("[") {
            section = String(line.dropFirst().dropLast())
            continue
        }
        let fields = line.split(separator: " ").compactMap { Double($0) }
        precondition(fields.count == 7, "malformed line \(index + 1) of geodesic-vectors.txt")
        vectors.append(
            ReferenceVector(
                section: section, line: index + 1,
                a: Coordinate(latitude: fields[0], longitude: fields[1]),
                b: Coordinate(latitude: fields[2], longitude: fields[3]),
                distance: fields[4], azimuth1: fields[5], azimuth2: fields[6]))
    }
    return vectors
}()

/// Difference of two azimuths in degrees, taking -180 and 180 as the same direction.
private func azimuthDifference(_ x: Double, _ y: Double) -> Double {
    abs((x - y).remainder(dividingBy: 360))
}

@Suite("Geodesic inverse against GeographicLib")
struct GeodesicInverseTests {
    @Test func referenceFileCoversEveryCase() {
        let counts = Dictionary(grouping: referenceVectors, by: \.section).mapValues(\.count)
        #expect(referenceVectors.count >= 14_000)
        #expect((counts["random-short"] ?? 0) >= 10_000)
        for section in [
            "random-long", "polar", "equatorial", "antimeridian", "coincident", "tiny", "nearly-antipodal",
        ] {
            #expect((counts[section] ?? 0) > 0, "no vectors in section \(section)")
        }
    }

    @Test func distancesAgreeWithinOneMillimetre() {
        var maxError = 0.0
        var worst = ""
        for v in referenceVectors {
            let result = Geodesic.inverse(v.a, v.b)
            let error = abs(result.distance - v.distance)
            // NaN must count as a failure, hence the negated comparison.
            if !(error <= maxError) {
                maxError = error.isNaN ? .infinity : error
                worst = "\(v.description): got \(result.distance), expected \(v.distance)"
            }
        }
        #expect(!referenceVectors.isEmpty)
        #expect(maxError <= 1e-3, "max distance error \(maxError) m at \(worst)")
    }

    /// Azimuths agree within 1e-6°, or for lines under about 6 cm within the turn that a 1 nm sideways
    /// shift of an end makes: the azimuth of a 1 cm line depends on the last bits of the coordinates,
    /// and last-bit differences between libm's and Python's `hypot` show up there.
    @Test func azimuthsAgreeWithinAMicrodegree() {
        var maxError = 0.0  // in units of the tolerance
        var worst = ""
        for v in referenceVectors {
            // Azimuths are undefined between coincident points and at a pole.
            if v.distance == 0 || abs(v.a.latitude) == 90 || abs(v.b.latitude) == 90 { continue }
            let tolerance = max(1e-6, 1e-9 / v.distance * 180 / .pi)
            let result = Geodesic.inverse(v.a, v.b)
            let error =
                max(azimuthDifference(result.azimuth1, v.azimuth1), azimuthDifference(result.azimuth2, v.azimuth2))
                / tolerance
            if !(error <= maxError) {
                maxError = error.isNaN ? .infinity : error
                worst =
                    "\(v.description): got \(result.azimuth1), \(result.azimuth2); "
                    + "expected \(v.azimuth1), \(v.azimuth2), tolerance \(tolerance)°"
            }
        }
        #expect(maxError <= 1, "max azimuth error \(maxError) × tolerance at \(worst)")
    }

    /// An event's distance from earth-centred points (Vincenty, Karney where the points are nearly
    /// antipodal): GeographicLib's answer to 0.1 mm on every vector, polar, equatorial, across the
    /// antimeridian and nearly antipodal ones included.
    @Test func distancesFromGeocentricPointsAgreeWithinATenthOfAMillimetre() {
        var maxError = 0.0
        var worst = ""
        for v in referenceVectors {
            let distance = Geodesic.distance(GeocentricPoint(v.a), GeocentricPoint(v.b))
            let error = abs(distance - v.distance)
            if !(error <= maxError) {
                maxError = error.isNaN ? .infinity : error
                worst = "\(v.description): got \(distance), expected \(v.distance)"
            }
        }
        #expect(!referenceVectors.isEmpty)
        #expect(maxError <= 1e-4, "max distance error \(maxError) m at \(worst)")
    }

    /// The same on random pairs anywhere, a metre to 19,000 km apart, against Karney's exact distance.
    @Test func distancesFromGeocentricPointsAgreeWithKarneyAnywhere() {
        var rng = SeededGenerator(seed: 0x7669_6E63_656E_7479)
        var maxError = 0.0
        var worst = ""
        for _ in 0..<20_000 {
            let a = Coordinate(
                latitude: asin(Double.random(in: -1...1, using: &rng)) * 180 / .pi,
                longitude: Double.random(in: -180...180, using: &rng))
            // A point about `length` away in a random direction (on a sphere: near enough to spread the lengths).
            let angle = pow(10, Double.random(in: 0...7.28, using: &rng)) / 6_371_000
            let azimuth = Double.random(in: 0..<(2 * .pi), using: &rng)
            let phi = a.latitude * .pi / 180
            let phi2 = asin(sin(phi) * cos(angle) + cos(phi) * sin(angle) * cos(azimuth))
            let dLon = atan2(sin(azimuth) * sin(angle) * cos(phi), cos(angle) - sin(phi) * sin(phi2))
            let b = Coordinate(
                latitude: phi2 * 180 / .pi, longitude: (a.longitude + dLon * 180 / .pi).remainder(dividingBy: 360))
            let exact = Geodesic.distance(a, b)
            let distance = Geodesic.distance(GeocentricPoint(a), GeocentricPoint(b))
            let error = abs(distance - exact)
            if !(error <= maxError) {
                maxError = error.isNaN ? .infinity : error
                worst = "\(a) → \(b): got \(distance), expected \(exact)"
            }
        }
        #expect(maxError <= 1e-4, "max distance error \(maxError) m at \(worst)")
        let somewhere = GeocentricPoint(Coordinate(latitude: 46, longitude: 2))
        #expect(Geodesic.distance(GeocentricPoint(x: .nan, y: 0, z: 0), somewhere).isNaN)
        #expect(Geodesic.distance(somewhere, somewhere) == 0)
    }

    @Test func distanceIsTheInverseDistance() {
        for v in referenceVectors.prefix(2000) {
            #expect(Geodesic.distance(v.a, v.b) == Geodesic.inverse(v.a, v.b).distance)
        }
    }

    @Test func swappingTheEndsReversesThePath() {
        for v in referenceVectors where v.distance > 0 {
            let forward = Geodesic.inverse(v.a, v.b)
            let backward = Geodesic.inverse(v.b, v.a)
            #expect(forward.distance == backward.distance, "\(v.description)")
            // Unless antipodal (where many geodesics tie), the way back leaves along the reversed arrival.
            if v.section != "nearly-antipodal" && abs(v.a.latitude) != 90 && abs(v.b.latitude) != 90 {
                #expect(azimuthDifference(backward.azimuth1, forward.azimuth2 + 180) <= 1e-9, "\(v.description)")
            }
        }
    }

    @Test func knownDistances() {
        let northPole = Coordinate(latitude: 90, longitude: 0)
        let southPole = Coordinate(latitude: -90, longitude: 123)
        let origin = Coordinate(latitude: 0, longitude: 0)
        // Half a meridian, pole to pole: 20 003 931.4586 m (GeographicLib).
        #expect(abs(Geodesic.distance(northPole, southPole) - 20_003_931.458_625_6) < 1e-6)
        // Along the equator the geodesic is the equator itself: a · Δλ.
        let quarterEquator = Geodesic.inverse(origin, Coordinate(latitude: 0, longitude: 90))
        #expect(abs(quarterEquator.distance - WGS84.equatorialRadius * .pi / 2) < 1e-6)
        #expect(quarterEquator.azimuth1 == 90 && quarterEquator.azimuth2 == 90)
        // The same point, written with longitude 180 and -180.
        #expect(
            Geodesic.distance(Coordinate(latitude: 12, longitude: 180), Coordinate(latitude: 12, longitude: -180)) == 0)
        #expect(Geodesic.distance(origin, origin) == 0)
    }

    @Test func invalidLatitudeGivesNaN() {
        let valid = Coordinate(latitude: 10, longitude: 10)
        #expect(Geodesic.distance(valid, Coordinate(latitude: 90.5, longitude: 0)).isNaN)
        #expect(Geodesic.distance(Coordinate(latitude: .nan, longitude: 0), valid).isNaN)
        #expect(Geodesic.inverse(valid, Coordinate(latitude: 0, longitude: .infinity)).distance.isNaN)
    }

    @Test func astroidRootSolvesItsQuartic() {
        for (x, y) in [(-0.5, -0.3), (-1.2, -0.01), (0.3, -2.0), (-0.99, -1e-6), (2.0, -3.0)] {
            let k = KarneyInverse.astroid(x, y)
            let residual = k * k * k * k + 2 * k * k * k - (x * x + y * y - 1) * k * k - 2 * y * y * k - y * y
            #expect(k > 0 && abs(residual) < 1e-12, "x = \(x), y = \(y), k = \(k)")
        }
        #expect(KarneyInverse.astroid(0.5, 0) == 0)
    }
}

@Suite("Chord bounds on the geodesic distance")
struct GeodesicBoundsTests {
    private static let minimumRadius = WGS84.minimumRadiusOfCurvature
    private static let maximumChord = DistanceBounds.maximumChord

    @Test func geocentricAxes() {
        let a = WGS84.equatorialRadius
        let b = WGS84.polarRadius
        func xyz(_ latitude: Double, _ longitude: Double) -> [Double] {
            let p = GeocentricPoint(Coordinate(latitude: latitude, longitude: longitude))
            return [p.x, p.y, p.z]
        }
        // Degree-exact trigonometry puts these exactly on the axes.
        #expect(xyz(0, 0) == [a, 0, 0])
        #expect(xyz(0, 90) == [0, a, 0])
        #expect(xyz(0, 180) == [-a, 0, 0])
        let pole = GeocentricPoint(Coordinate(latitude: -90, longitude: 37))
        #expect(pole.x == 0 && pole.y == 0 && abs(pole.z + b) < 1e-8)
        // On the surface: (x² + y²)/a² + z²/b² = 1.
        let p = GeocentricPoint(Coordinate(latitude: 47.3, longitude: -122.1))
        #expect(abs((p.x * p.x + p.y * p.y) / (a * a) + p.z * p.z / (b * b) - 1) < 1e-15)
    }

    /// The numeric steps of the proof in `Geodesic.distanceBounds(chord:)`'s documentation.
    @Test func proofPreconditionsHold() {
        let r = Self.minimumRadius
        // The extreme radii of curvature: meridian radius at the equator and at the poles.
        #expect(abs(r - 6_335_439.327) < 1e-3)
        #expect(abs(WGS84.maximumRadiusOfCurvature - 6_399_593.626) < 1e-3)
        // The shortest geodesic is at most three quarter-meridians, less than a full circle of radius
        // R₋, and a circular arc longer than half a circle would have a chord far above the limit.
        let quarterMeridian = Geodesic.distance(
            Coordinate(latitude: 0, longitude: 0), Coordinate(latitude: 90, longitude: 0))
        #expect(3 * quarterMeridian < 2 * .pi * r)
        #expect(2 * r * sin(3 * quarterMeridian / (2 * r)) > Self.maximumChord)
        // The asin tail bound: (3/40) x⁵ / (1 − x²) ≤ x⁵ / 13 for x = c / (2R₋) up to the limit.
        let x = Self.maximumChord / (2 * r)
        #expect(x <= 0.08 && 3.0 / 40 / (1 - x * x) <= 1.0 / 13)
        // The polynomial is at least 2R asin(c / 2R), the exact inversion of Schur's bound.
        for c in stride(from: 0.0, through: Self.maximumChord, by: 10_000) {
            #expect(Geodesic.distanceBounds(chord: c).upper >= 2 * r * asin(c / (2 * r)))
        }
        // The surface normal turns by at most κ s / 2 over half the line; cos² of that ≥ 0.99.
        let longestLine = Geodesic.distanceBounds(chord: Self.maximumChord).upper
        let tilt = longestLine / (2 * r)
        #expect(cos(tilt) * cos(tilt) >= DistanceBounds.normalTiltFactor)
    }

    @Test func boundsContainReferenceDistances() {
        var checked = 0
        for v in referenceVectors where v.a.isValid && v.b.isValid {
            let chord = GeocentricPoint(v.a).chord(to: GeocentricPoint(v.b))
            let bounds = Geodesic.distanceBounds(chord: chord)
            #expect(bounds.lower <= v.distance, "\(v.description): lower \(bounds.lower) > \(v.distance)")
            #expect(v.distance <= bounds.upper, "\(v.description): upper \(bounds.upper) < \(v.distance)")
            if chord <= Self.maximumChord { checked += 1 }
        }
        #expect(checked >= 10_000)
    }

    /// Random pairs from a millimetre to past the limit, weighted towards where each bound is tightest:
    /// north–south lines at the equator (most curved) and lines near the poles (least curved).
    @Test func boundsContainExactDistancesForRandomPairs() {
        var rng = SeededGenerator(seed: 0x6765_6F66_656E_6365)
        var worstUpperSlack = Double.infinity
        var worstLowerSlack = Double.infinity
        // How much of each bound's cubic term the true excess s − c reaches, over lines beyond 10 km.
        var upperTightness = 0.0
        var lowerTightness = Double.infinity
        for i in 0..<6000 {
            var latitude = Double.random(in: -90...90, using: &rng)
            var azimuth = Double.random(in: 0..<(2 * .pi), using: &rng)
            switch i % 3 {
            case 0:
                latitude = Double.random(in: -1...1, using: &rng)
                azimuth = Double.random(in: -0.01...0.01, using: &rng) + (i % 2 == 0 ? 0 : .pi)
            case 1: latitude = Double.random(in: 80...90, using: &rng) * (i % 2 == 0 ? 1 : -1)
            default: break
            }
            let length = pow(10, Double.random(in: -3...6.1, using: &rng))
            let a = Coordinate(latitude: latitude, longitude: Double.random(in: -180...180, using: &rng))
            // Step roughly `length` metres in the chosen direction, then reflect over a pole if needed.
            let degrees = length / 111_000
            var lat2 = a.latitude + degrees * cos(azimuth)
            var lon2 = a.longitude + degrees * sin(azimuth) / max(cos(a.latitude * .pi / 180), 1e-3)
            if lat2 > 90 {
                lat2 = 180 - lat2
                lon2 += 180
            }
            if lat2 < -90 {
                lat2 = -180 - lat2
                lon2 += 180
            }
            let b = Coordinate(latitude: lat2, longitude: lon2.remainder(dividingBy: 360))
            let exact = Geodesic.distance(a, b)
            let chord = GeocentricPoint(a).chord(to: GeocentricPoint(b))
            let bounds = Geodesic.distanceBounds(chord: chord)
            #expect(bounds.lower <= exact && exact <= bounds.upper, "\(a) → \(b): \(bounds) vs \(exact)")
            if bounds.upper.isFinite {
                worstUpperSlack = min(worstUpperSlack, bounds.upper - exact)
                worstLowerSlack = min(worstLowerSlack, exact - bounds.lower)
                if chord > 10_000 {
                    let slack = DistanceBounds.roundingSlack
                    upperTightness = max(upperTightness, (exact - chord) / (bounds.upper - slack - chord))
                    lowerTightness = min(lowerTightness, (exact - chord) / (bounds.lower + slack - chord))
                }
            }
        }
        // Both bounds hold with room, but the room is small: the bounds are nearly tight, at the equator
        // for the upper one and near the poles for the lower one.
        #expect(worstUpperSlack > 0 && worstUpperSlack < 1e-5)
        #expect(worstLowerSlack > 0 && worstLowerSlack < 1e-5)
        #expect(upperTightness > 0.999 && upperTightness <= 1, "upper bound tightness \(upperTightness)")
        #expect(lowerTightness < 1.011 && lowerTightness >= 1, "lower bound tightness \(lowerTightness)")
    }

    @Test func boundsAreUnderAMillimetreWideUpTo10km() {
        for c in stride(from: 0.0, through: 10_000, by: 1) {
            let bounds = Geodesic.distanceBounds(chord: c)
            #expect(bounds.upper - bounds.lower <= 1e-3, "chord \(c)")
            #expect(bounds.lower >= max(0, c - 1e-6))
        }
    }

    @Test func longChordsHaveOnlyALowerBound() {
        let justOver = Geodesic.distanceBounds(chord: Self.maximumChord.nextUp)
        #expect(justOver.upper == .infinity && justOver.lower > 999_999)
        #expect(Geodesic.distanceBounds(chord: 12_000_000).upper == .infinity)
        #expect(Geodesic.distanceBounds(chord: Self.maximumChord).upper.isFinite)
        let nan = Geodesic.distanceBounds(chord: .nan)
        #expect(nan.lower == 0 && nan.upper == .infinity)
    }
}
