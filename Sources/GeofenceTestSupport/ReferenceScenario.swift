import Foundation
import GeofenceCore

/// The scenario of the C reference programs for fix evaluation (`../shared/perf-reference`, its `common.h`),
/// ported exactly, so that geofence's index answers the same question as they do and proves it with the same
/// `hitsum` and `hashsum` (issue 29, `geofence-bench --reference DIR`).
///
/// Regions: N circles, centre latitude U(47, 55), longitude U(6, 15), radius log-uniform on [50, 2000] m, three
/// draws per region (latitude, longitude, radius) from the SplitMix64 stream seeded `regionSeed`; queries:
/// latitude U(47, 55), longitude U(6, 15), two draws each from the stream seeded `querySeed`. A draw is
/// `(x >> 11) · 2⁻⁵³`. The same expressions in the same order as the C code, so every value is bit for bit
/// the same (`ReferenceScenarioTests` compares the first draws with the C generator's).
package enum ReferenceScenario {
    package static let regionSeed: UInt64 = 0x5EED_0000_0000_0001
    package static let querySeed: UInt64 = 0x5EED_0000_0000_0002
    static let latitudes = (low: 47.0, high: 55.0)
    static let longitudes = (low: 6.0, high: 15.0)
    static let radii = (low: 50.0, high: 2000.0)

    /// A circle of the scenario: its centre in degrees, its radius in metres.
    package struct Circle: Sendable, Equatable {
        package var center: Coordinate
        package var radius: Double
    }

    /// `u01` of common.h: the top 53 bits of a SplitMix64 draw, in [0, 1).
    package static func unit(_ generator: inout SeededGenerator) -> Double {
        Double(generator.next() >> 11) * 0x1.0p-53
    }

    /// The first `count` regions (the regions of a smaller N are a prefix of a larger N's).
    package static func regions(_ count: Int) -> [Circle] {
        var generator = SeededGenerator(seed: regionSeed)
        let logRatio = log(radii.high / radii.low)
        var circles: [Circle] = []
        circles.reserveCapacity(count)
        for _ in 0..<count {
            let latitude = latitudes.low + (latitudes.high - latitudes.low) * unit(&generator)
            let longitude = longitudes.low + (longitudes.high - longitudes.low) * unit(&generator)
            let radius = radii.low * exp(logRatio * unit(&generator))
            circles.append(Circle(center: Coordinate(latitude: latitude, longitude: longitude), radius: radius))
        }
        return circles
    }

    /// The first `count` query points.
    package static func queries(_ count: Int) -> [Coordinate] {
        var generator = SeededGenerator(seed: querySeed)
        var points: [Coordinate] = []
        points.reserveCapacity(count)
        for _ in 0..<count {
            let latitude = latitudes.low + (latitudes.high - latitudes.low) * unit(&generator)
            let longitude = longitudes.low + (longitudes.high - longitudes.low) * unit(&generator)
            points.append(Coordinate(latitude: latitude, longitude: longitude))
        }
        return points
    }

    /// `mix64` of common.h (MurmurHash3's finalizer): a query's hash sums `mix64(region index + 1)` over its hits.
    package static func mix64(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 33)) &* 0xff51_afd7_ed55_8ccd
        z = (z ^ (z >> 33)) &* 0xc4ce_b9fe_1a85_ec53
        return z ^ (z >> 33)
    }

    /// The C programs' containment test (`leaq_init` and `leaq_d2` of common.h: a local ellipsoid approximation
    /// with a first-order Taylor expansion of the radii of curvature around the query's latitude), `d² ≤ r²`.
    /// Only for counting where geofence's exact test disagrees with it; geofence never decides with it.
    package struct LocalApproximation {
        let latitude: Double
        let longitude: Double
        let kx0: Double
        let kx1: Double
        let ky0: Double
        let ky1: Double

        package init(_ query: Coordinate) {
            let degree = Double.pi / 180
            let a = 6_378_137.0
            let f = 1.0 / 298.257223563
            let e2 = f * (2.0 - f)
            let p = query.latitude * degree
            let s = sin(p)
            let c = cos(p)
            let w2 = 1.0 - e2 * s * s
            let w = w2.squareRoot()
            let n = a / w
            let m = a * (1.0 - e2) / (w2 * w)
            latitude = query.latitude
            longitude = query.longitude
            kx0 = n * c * degree
            ky0 = m * degree
            kx1 = -m * s * degree * degree
            ky1 = 3.0 * m * e2 * s * c / w2 * degree * degree
        }

        package func contains(_ circle: Circle) -> Bool {
            let dLat = circle.center.latitude - latitude
            let dLon = circle.center.longitude - longitude
            let h = 0.5 * dLat
            let dy = (ky0 + ky1 * h) * dLat
            let dx = (kx0 + kx1 * h) * dLon
            return dx * dx + dy * dy <= circle.radius * circle.radius
        }
    }
}

extension HysteresisBand {
    /// The band at zero width: `classify` then says `inside` exactly when the distance is at most the radius.
    static let zeroWidth = HysteresisBand(minMargin: 0, accuracyFactor: 0)
}

/// Hits of one query: how many circles contain the point, and the sum of `mix64(index + 1)` over them.
package struct ReferenceHits: Sendable, Equatable {
    package var count = 0
    package var hash: UInt64 = 0

    package init(count: Int = 0, hash: UInt64 = 0) {
        self.count = count
        self.hash = hash
    }

    package mutating func add(_ index: Int) {
        count += 1
        hash &+= ReferenceScenario.mix64(UInt64(index) &+ 1)
    }

    package mutating func add(_ other: ReferenceHits) {
        count += other.count
        hash &+= other.hash
    }
}

/// The scenario's circles in geofence's spatial index (`SpatialRegionIndex`, the type `RegionMonitor` queries),
/// slot i holding circle i, with the engine's own containment test.
package struct ReferenceIndex {
    package let circles: [ReferenceScenario.Circle]
    /// What the exact test reads per candidate: the centre in ECEF and the radius (32 bytes a region).
    package let targets: [(center: GeocentricPoint, radius: Double)]
    package private(set) var index: SpatialRegionIndex

    /// Loads `circles` as the monitor loads its regions: reserved, inserted in slot order, compacted.
    package init(_ circles: [ReferenceScenario.Circle]) {
        self.circles = circles
        targets = circles.map { (GeocentricPoint($0.center), $0.radius) }
        index = SpatialRegionIndex()
        index.reserveCapacity(circles.count)
        for (slot, target) in targets.enumerated() {
            index.insert(slot: Int32(slot), center: target.center, radius: target.radius)
        }
        index.compact()
    }

    /// The engine's containment: the hysteresis rule (`HysteresisBand.classify`) with a band of zero width,
    /// that is geodesic distance ≤ radius, decided from the chord's guaranteed bounds and, within their sliver
    /// of the boundary, by the exact geodesic (Karney's algorithm).
    @inline(__always)
    package func contains(_ slot: Int, point: GeocentricPoint, coordinate: Coordinate) -> Bool {
        let target = targets[slot]
        let bounds = Geodesic.distanceBounds(chord: point.chord(to: target.center))
        return HysteresisBand.zeroWidth.classify(bounds: bounds, radius: target.radius, margin: 0) {
            Geodesic.distance(coordinate, circles[slot].center)
        } == .inside
    }

    /// The same containment for a candidate the index found, decided first from what the index returns with it
    /// (`SpatialRegionIndex.nearby`: bounds on the chord to the centre, from the centre as stored in the entry,
    /// and on the radius), so that the candidate's record (the centre in ECEF, the radius: a cache miss in a
    /// 32 MB table at 1M regions) is read only within about two metres of the boundary.
    ///
    /// The decision is `contains(_:point:coordinate:)`'s, candidate for candidate: the chord lies in
    /// [chordLowerBound, chordUpperBound] with centimetres to spare and the radius in [radiusLowerBound,
    /// radiusUpperBound] (Docs/spatial-index.md), and `Geodesic.distanceBounds` grows with the chord, so an upper
    /// distance bound at most the radius's lower bound makes `classify`'s own upper bound at most the radius
    /// (inside), and a lower distance bound at least the radius's upper bound makes its lower bound at least
    /// the radius (outside). Anything between is the exact test's.
    @inline(__always)
    package func contains(_ candidate: NearbyRegion, point: GeocentricPoint, coordinate: Coordinate) -> Bool {
        Self.settles(candidate) ?? contains(Int(candidate.slot), point: point, coordinate: coordinate)
    }

    /// Inside (true) or outside (false) from the index's bounds alone, or nil: the candidate is too close to
    /// its region's edge for them, and the exact test decides.
    @inline(__always)
    package static func settles(_ candidate: NearbyRegion) -> Bool? {
        if Geodesic.distanceBounds(chord: candidate.chordUpperBound).upper <= candidate.radiusLowerBound {
            return true
        }
        if Geodesic.distanceBounds(chord: candidate.chordLowerBound).lower >= candidate.radiusUpperBound {
            return false
        }
        return nil
    }

    /// The circles containing `coordinate`, found through the index (candidates within their radius, `extra` 0,
    /// with their bounds), then the containment test. `scratch` is reused between queries and holds the
    /// candidates afterwards.
    @inline(__always)
    package func hits(at coordinate: Coordinate, scratch: inout [NearbyRegion]) -> ReferenceHits {
        let point = GeocentricPoint(coordinate)
        scratch.removeAll(keepingCapacity: true)
        index.nearby(point, extra: 0, into: &scratch)
        var hits = ReferenceHits()
        for candidate in scratch where contains(candidate, point: point, coordinate: coordinate) {
            hits.add(Int(candidate.slot))
        }
        return hits
    }

    /// How many circles contain `coordinate` (what a timed query returns: the hash is left out, as in the C
    /// programs' timed passes).
    @inline(__always)
    package func hitCount(at coordinate: Coordinate, scratch: inout [NearbyRegion]) -> Int {
        let point = GeocentricPoint(coordinate)
        scratch.removeAll(keepingCapacity: true)
        index.nearby(point, extra: 0, into: &scratch)
        var count = 0
        for candidate in scratch where contains(candidate, point: point, coordinate: coordinate) { count += 1 }
        return count
    }

    /// The same question by a linear scan over every circle with the same test: the index's ground truth.
    package func linearHits(at coordinate: Coordinate) -> ReferenceHits {
        let point = GeocentricPoint(coordinate)
        var hits = ReferenceHits()
        for slot in targets.indices where contains(slot, point: point, coordinate: coordinate) { hits.add(slot) }
        return hits
    }
}
