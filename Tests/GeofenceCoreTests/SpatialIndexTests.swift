import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// Where the randomized regions and fixes go: everywhere, and especially where a latitude/longitude grid
/// would break (the poles, the antimeridian).
private enum Place: CaseIterable {
    case northPole
    case southPole
    case antimeridian
    case anywhere
    case dense

    func coordinate(using rng: inout SeededGenerator) -> Coordinate {
        switch self {
        case .northPole:
            return Coordinate(
                latitude: 90 - pow(Double.random(in: 0...1, using: &rng), 2) * 6,
                longitude: Double.random(in: -180...180, using: &rng))
        case .southPole:
            return Coordinate(
                latitude: -90 + pow(Double.random(in: 0...1, using: &rng), 2) * 6,
                longitude: Double.random(in: -180...180, using: &rng))
        case .antimeridian:
            let side: Double = Bool.random(using: &rng) ? 1 : -1
            return Coordinate(
                latitude: Double.random(in: -70...70, using: &rng),
                longitude: side * (180 - pow(Double.random(in: 0...1, using: &rng), 2) * 3))
        case .anywhere:
            // Uniform on the sphere, so the polar caps get their share.
            return Coordinate(
                latitude: asin(Double.random(in: -1...1, using: &rng)) * 180 / .pi,
                longitude: Double.random(in: -180...180, using: &rng))
        case .dense:
            return Coordinate(
                latitude: 46 + Double.random(in: -0.3...0.3, using: &rng),
                longitude: 2 + Double.random(in: -0.4...0.4, using: &rng))
        }
    }
}

/// A radius from 1 m to 500 km, even on a log scale.
private func randomRadius(using rng: inout SeededGenerator) -> Double {
    pow(10, Double.random(in: 0...log10(500_000), using: &rng))
}

/// Points a query must get right: the poles themselves, the antimeridian from both sides, and random
/// points near the regions.
private func queryPoints(count: Int, using rng: inout SeededGenerator) -> [Coordinate] {
    var points = [
        Coordinate(latitude: 90, longitude: 0), Coordinate(latitude: 90, longitude: 180),
        Coordinate(latitude: -90, longitude: -45), Coordinate(latitude: 0, longitude: 180),
        Coordinate(latitude: 0, longitude: -180), Coordinate(latitude: 89.999_999, longitude: 123),
        Coordinate(latitude: -12.5, longitude: 179.999_999), Coordinate(latitude: 60, longitude: -179.999_999),
    ]
    while points.count < count {
        let place = Place.allCases.randomElement(using: &rng)!
        points.append(place.coordinate(using: &rng))
    }
    return points
}

/// `extra` values a query may use: the monitor's usual ones, none, and large ones (up to a quarter of
/// the earth, which makes the index read whole levels).
private func randomExtra(using rng: inout SeededGenerator) -> Double {
    switch Int.random(in: 0..<10, using: &rng) {
    case 0: return 0
    case 1: return Double.random(in: 0...50_000, using: &rng)
    case 2: return Double.random(in: 50_000...10_000_000, using: &rng)
    default: return 1000 + Double.random(in: 5...100, using: &rng)
    }
}

/// A region as the tests keep it.
private struct Placed {
    var center: Coordinate
    var point: GeocentricPoint
    var radius: Double

    init(_ center: Coordinate, _ radius: Double) {
        self.center = center
        self.point = GeocentricPoint(center)
        self.radius = radius
    }
}

/// How far beyond its reach a region may still be returned: a few grid steps of its level, whose blocks
/// are 16 · (level radius + 1050 m) wide (at least 64 km) on a 65 536-step grid, plus radius rounding.
private func allowance(radius: Double) -> Double {
    let levelRadius = 4 * max(radius, 2000)
    let block = max(64_000, 16 * (levelRadius + 1050))
    return 4 * block / 65_536 + 2 * levelRadius / 65_000 + 0.01
}

/// The point `angle` radians away from `c` along `bearing` on a sphere: not a geodesic on the
/// ellipsoid, but a continuous path along which the chord from `c` grows, which is all bisection needs.
private func destination(_ c: Coordinate, bearing: Double, angle: Double) -> Coordinate {
    let lat1 = c.latitude * .pi / 180
    let lat2 = asin(sin(lat1) * cos(angle) + cos(lat1) * sin(angle) * cos(bearing))
    let dLon = atan2(sin(bearing) * sin(angle) * cos(lat1), cos(angle) - sin(lat1) * sin(lat2))
    var lon = c.longitude + dLon * 180 / .pi
    lon = lon > 180 ? lon - 360 : (lon < -180 ? lon + 360 : lon)
    return Coordinate(latitude: min(90, max(-90, lat2 * 180 / .pi)), longitude: lon)
}

/// A point whose chord from `c` is `chord` metres (to within nanometres), along `bearing`.
private func point(from c: Coordinate, bearing: Double, chord: Double) -> Coordinate {
    let center = GeocentricPoint(c)
    var low = 0.0
    var high = Double.pi * 0.9
    for _ in 0..<80 {
        let mid = (low + high) / 2
        if GeocentricPoint(destination(c, bearing: bearing, angle: mid)).chord(to: center) < chord {
            low = mid
        } else {
            high = mid
        }
    }
    return destination(c, bearing: bearing, angle: low)
}

/// A 3D fix of `subject` at `at` with the stated accuracy, as the filter passes it to the monitor.
private func measured(_ subject: String, at: Coordinate, accuracy: Double, time: Date) -> WeightedFix {
    let fix = Fix(
        subject: subject, time: time, mode: .threeD, latitude: at.latitude, longitude: at.longitude,
        horizontalAccuracy: accuracy)
    return WeightedFix(fix: fix, time: time, coordinate: at, accuracy: accuracy, accuracyEstimated: false)
}

/// Checks one query: the index returns every slot the linear scan returns, each once, and anything more
/// lies just beyond the reach (within the index's few metres of rounding).
private func checkQuery(
    _ index: SpatialRegionIndex, _ linear: LinearRegionIndex, regions: [Int32: Placed],
    at coordinate: Coordinate, extra: Double, sourceLocation: SourceLocation = #_sourceLocation
) {
    let point = GeocentricPoint(coordinate)
    var found: [Int32] = []
    var truth: [Int32] = []
    index.candidates(near: point, extra: extra, into: &found)
    linear.candidates(near: point, extra: extra, into: &truth)
    let foundSet = Set(found)
    #expect(foundSet.count == found.count, "no slot twice", sourceLocation: sourceLocation)
    let missed = Set(truth).subtracting(foundSet)
    #expect(
        missed.isEmpty, "missed \(missed.sorted()) at \(coordinate), extra \(extra)", sourceLocation: sourceLocation)
    for slot in foundSet.subtracting(truth) {
        guard let region = regions[slot] else {
            Issue.record("slot \(slot) is not in the index", sourceLocation: sourceLocation)
            continue
        }
        let beyond = point.chord(to: region.point) - region.radius - extra
        #expect(
            beyond < allowance(radius: region.radius), "slot \(slot) is \(beyond) m beyond its reach",
            sourceLocation: sourceLocation)
    }
    var nearby: [NearbyRegion] = []
    index.nearby(point, extra: extra, into: &nearby)
    #expect(Set(nearby.map(\.slot)) == foundSet, sourceLocation: sourceLocation)
    for near in nearby {
        guard let region = regions[near.slot] else { continue }
        let chord = point.chord(to: region.point)
        #expect(near.chordLowerBound <= chord && chord <= near.chordUpperBound, sourceLocation: sourceLocation)
        #expect(
            near.radiusLowerBound <= region.radius && region.radius <= near.radiusUpperBound,
            sourceLocation: sourceLocation)
    }
}

@Suite("Spatial index")
struct SpatialIndexTests {
    @Test("finds every region the linear scan finds: all sizes, the poles, the antimeridian")
    func matchesLinearScan() {
        var rng = SeededGenerator(seed: 61)
        var index = SpatialRegionIndex()
        var linear = LinearRegionIndex()
        var regions: [Int32: Placed] = [:]
        for slot in Int32(0)..<2500 {
            let place = Place.allCases.randomElement(using: &rng)!
            let center = place.coordinate(using: &rng)
            let radius = randomRadius(using: &rng)
            index.insert(slot: slot, center: GeocentricPoint(center), radius: radius)
            linear.insert(slot: slot, center: center, radius: radius)
            regions[slot] = Placed(center, radius)
        }
        // A region centred on each pole and on the antimeridian, of every size.
        var slot = Int32(2500)
        for center in [
            Coordinate(latitude: 90, longitude: 0), Coordinate(latitude: -90, longitude: 0),
            Coordinate(latitude: 10, longitude: 180), Coordinate(latitude: -10, longitude: -180),
        ] {
            for radius in [1.0, 30, 1000, 80_000, 500_000] {
                index.insert(slot: slot, center: GeocentricPoint(center), radius: radius)
                linear.insert(slot: slot, center: center, radius: radius)
                regions[slot] = Placed(center, radius)
                slot += 1
            }
        }
        #expect(index.count == regions.count)
        for point in queryPoints(count: 400, using: &rng) {
            checkQuery(index, linear, regions: regions, at: point, extra: randomExtra(using: &rng))
        }
        // Regions near a query point, so that the interesting cases (just inside, just outside) happen.
        for _ in 0..<300 {
            let region = regions[Int32.random(in: 0..<slot, using: &rng)]!
            // `offset` is a local approximation: fine for small regions, and any point will do for large.
            let distance =
                min(region.radius, 20_000) * Double.random(in: 0...1.5, using: &rng)
                + Double.random(in: 0...1100, using: &rng)
            let bearing = Double.random(in: 0..<360, using: &rng) * .pi / 180
            let point = offset(region.center, north: distance * cos(bearing), east: distance * sin(bearing))
            checkQuery(index, linear, regions: regions, at: point, extra: 1000 + Double.random(in: 5...30, using: &rng))
        }
    }

    @Test("a point just inside a region's reach finds it, in every direction and at every size")
    func reachBoundary() {
        var rng = SeededGenerator(seed: 65)
        var index = SpatialRegionIndex()
        var linear = LinearRegionIndex()
        var regions: [Int32: Placed] = [:]
        for slot in Int32(0)..<400 {
            let center = Place.allCases.randomElement(using: &rng)!.coordinate(using: &rng)
            let radius = randomRadius(using: &rng)
            index.insert(slot: slot, center: GeocentricPoint(center), radius: radius)
            linear.insert(slot: slot, center: center, radius: radius)
            regions[slot] = Placed(center, radius)
        }
        for _ in 0..<600 {
            let slot = Int32.random(in: 0..<400, using: &rng)
            let region = regions[slot]!
            let extra = [0, 5, 1015, Double.random(in: 0...20_000, using: &rng)].randomElement(using: &rng)!
            // From a micrometre inside the reach to a few metres: the band the index's rounding lives in.
            let inside = [1e-7, 1e-4, 0.3, 1, 2.5].randomElement(using: &rng)!
            let target = region.radius + extra - inside
            guard target > 0, target < 11_000_000 else { continue }
            let bearing = Double.random(in: 0..<(2 * .pi), using: &rng)
            let p = point(from: region.center, bearing: bearing, chord: target)
            var found: [Int32] = []
            index.candidates(near: GeocentricPoint(p), extra: extra, into: &found)
            #expect(found.contains(slot), "region \(slot) (r \(region.radius)) missed \(inside) m inside its reach")
            checkQuery(index, linear, regions: regions, at: p, extra: extra)
        }
    }

    @Test("a region found by the exact geodesic is always a candidate")
    func geodesicTruth() {
        var rng = SeededGenerator(seed: 62)
        var index = SpatialRegionIndex()
        var centers: [Coordinate] = []
        var radii: [Double] = []
        for slot in Int32(0)..<400 {
            let center = Place.allCases.randomElement(using: &rng)!.coordinate(using: &rng)
            let radius = randomRadius(using: &rng)
            index.insert(slot: slot, center: GeocentricPoint(center), radius: radius)
            centers.append(center)
            radii.append(radius)
        }
        for point in queryPoints(count: 100, using: &rng) {
            let extra = randomExtra(using: &rng)
            var found: [Int32] = []
            index.candidates(near: GeocentricPoint(point), extra: extra, into: &found)
            let foundSet = Set(found)
            for i in centers.indices where Geodesic.distance(point, centers[i]) <= radii[i] + extra {
                #expect(foundSet.contains(Int32(i)), "region \(i) at \(centers[i]) missed from \(point)")
            }
        }
    }

    @Test("stays exact through insertions and removals, with slots reused")
    func churn() {
        var rng = SeededGenerator(seed: 63)
        var index = SpatialRegionIndex()
        var linear = LinearRegionIndex()
        var regions: [Int32: Placed] = [:]
        var free: [Int32] = []
        var nextSlot: Int32 = 0
        // Concentrated in a few places so that blocks fill, re-sort, empty and disappear.
        let hubs = (0..<6).map { _ in Place.allCases.randomElement(using: &rng)!.coordinate(using: &rng) }
        for step in 0..<6000 {
            if regions.isEmpty || Int.random(in: 0..<10, using: &rng) < 6 {
                let slot: Int32
                if let reused = free.popLast() {
                    slot = reused
                } else {
                    slot = nextSlot
                    nextSlot += 1
                }
                let hub = hubs.randomElement(using: &rng)!
                let center = offset(
                    hub, north: Double.random(in: -40_000...40_000, using: &rng),
                    east: Double.random(in: -40_000...40_000, using: &rng))
                let radius =
                    Bool.random(using: &rng) ? randomRadius(using: &rng) : Double.random(in: 20...3000, using: &rng)
                index.insert(slot: slot, center: GeocentricPoint(center), radius: radius)
                linear.insert(slot: slot, center: center, radius: radius)
                regions[slot] = Placed(center, radius)
            } else {
                let slot = regions.keys.randomElement(using: &rng)!
                let region = regions.removeValue(forKey: slot)!
                index.remove(slot: slot, center: region.point, radius: region.radius)
                linear.remove(slot: slot)
                free.append(slot)
            }
            if step % 997 == 0 { index.flush() }
            if step % 2500 == 2499 { index.compact() }
            if step % 15 == 0 {
                let hub = hubs.randomElement(using: &rng)!
                let point = offset(
                    hub, north: Double.random(in: -45_000...45_000, using: &rng),
                    east: Double.random(in: -45_000...45_000, using: &rng))
                checkQuery(index, linear, regions: regions, at: point, extra: randomExtra(using: &rng))
            }
            #expect(index.count == regions.count)
        }
        // Emptied completely, it answers nothing, and fills again.
        for (slot, region) in regions { index.remove(slot: slot, center: region.point, radius: region.radius) }
        #expect(index.count == 0)
        var none: [Int32] = []
        index.candidates(near: GeocentricPoint(hubs[0]), extra: 10_000_000, into: &none)
        #expect(none.isEmpty)
        index.insert(slot: 7, center: GeocentricPoint(hubs[0]), radius: 10)
        index.candidates(near: GeocentricPoint(hubs[0]), extra: 0, into: &none)
        #expect(none == [7])
    }

    @Test("the monitor gives the same outputs with the index as with the linear scan")
    func monitorEquivalence() throws {
        var rng = SeededGenerator(seed: 64)
        var configuration = MonitorConfiguration()
        configuration.vicinity = 1000
        var indexed = RegionMonitor(
            configuration: configuration, ids: EventIDGenerator(rng: SeededGenerator(seed: 1)),
            candidateSearch: .spatialIndex)
        var scanned = RegionMonitor(
            configuration: configuration, ids: EventIDGenerator(rng: SeededGenerator(seed: 1)),
            candidateSearch: .linearScan)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        // Vehicles driving around each awkward place, with regions of every size along their way.
        let routes: [(Coordinate, String)] = [
            (Coordinate(latitude: 89.98, longitude: 30), "north"),
            (Coordinate(latitude: -89.97, longitude: -150), "south"),
            (Coordinate(latitude: 12, longitude: 179.99), "dateline"),
            (Coordinate(latitude: 46, longitude: 2), "france"),
        ]
        var seq: Int64 = 0
        var ids: [String] = []
        func addRegion(near c: Coordinate, spread: Double) throws {
            seq += 1
            let center = offset(
                c, north: Double.random(in: -spread...spread, using: &rng),
                east: Double.random(in: -spread...spread, using: &rng))
            let radius =
                Int.random(in: 0..<4, using: &rng) == 0
                ? randomRadius(using: &rng) : Double.random(in: 3...3000, using: &rng)
            let dwell: Double? = Int.random(in: 0..<4, using: &rng) == 0 ? Double.random(in: 5...60, using: &rng) : nil
            let subjects: [String]? = Int.random(in: 0..<8, using: &rng) == 0 ? ["north", "france"] : nil
            let expires: Date? =
                Int.random(in: 0..<10, using: &rng) == 0
                ? start.addingTimeInterval(Double.random(in: 10...400, using: &rng)) : nil
            let id = "r\(seq)"
            let region = try Region(
                id: id, center: center, radius: radius, dwell: dwell, expires: expires, subjects: subjects)
            indexed.insert(region, seq: seq)
            scanned.insert(region, seq: seq)
            ids.append(id)
        }
        for (c, _) in routes {
            for _ in 0..<120 { try addRegion(near: c, spread: 6000) }
        }
        // A region around each pole, one across the antimeridian.
        for (c, r) in [
            (Coordinate(latitude: 90, longitude: 0), 2500.0), (Coordinate(latitude: -90, longitude: 0), 40.0),
            (Coordinate(latitude: 12, longitude: -180), 3000.0),
        ] {
            seq += 1
            let region = try Region(id: "special\(seq)", center: c, radius: r)
            indexed.insert(region, seq: seq)
            scanned.insert(region, seq: seq)
        }

        var positions = routes.map(\.0)
        var headings = routes.map { _ in Double.random(in: 0..<360, using: &rng) }
        var events = 0
        for second in 0..<500 {
            for (k, (_, subject)) in routes.enumerated() {
                headings[k] += Double.random(in: -20...20, using: &rng)
                let speed = Double.random(in: 0...30, using: &rng)
                positions[k] = offset(
                    positions[k], north: speed * cos(headings[k] * .pi / 180),
                    east: speed * sin(headings[k] * .pi / 180))
                var coordinate = positions[k]
                // Now and then exactly at a pole.
                if subject == "north" && second % 50 == 0 { coordinate = Coordinate(latitude: 90, longitude: 0) }
                if subject == "south" && second % 70 == 0 { coordinate = Coordinate(latitude: -90, longitude: 77) }
                let accuracy = Double.random(in: 1...100, using: &rng)
                let time = start.addingTimeInterval(Double(second) + (second > 250 && k == 0 ? 120 : 0))
                let weighted = measured(subject, at: coordinate, accuracy: accuracy, time: time)
                let a = indexed.process(weighted, now: now)
                let b = scanned.process(weighted, now: now)
                #expect(a == b, "second \(second), \(subject)")
                events += a.events.count
            }
            // Churn: regions come and go (and get replaced) while vehicles drive.
            if second % 5 == 0 {
                let (c, _) = routes.randomElement(using: &rng)!
                try addRegion(near: c, spread: 6000)
                if let id = ids.randomElement(using: &rng) {
                    let a = indexed.remove(id: id)
                    let b = scanned.remove(id: id)
                    #expect(a == b)
                }
            }
        }
        #expect(events > 50, "the scenario exercises the state machine")
        #expect(indexed.regionCount == scanned.regionCount)
        for id in ids {
            #expect(indexed.state(subject: "france", regionID: id) == scanned.state(subject: "france", regionID: id))
        }
    }

    @Test("slow, parked and jumping vehicles: the same outputs with their neighbourhoods as with the linear scan")
    func neighbourhoodEquivalence() throws {
        var rng = SeededGenerator(seed: 67)
        var indexed = RegionMonitor(
            ids: EventIDGenerator(rng: SeededGenerator(seed: 3)), candidateSearch: .spatialIndex)
        var scanned = RegionMonitor(ids: EventIDGenerator(rng: SeededGenerator(seed: 3)), candidateSearch: .linearScan)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        // Each vehicle near an awkward place, among regions of every size packed around it (small ones
        // close, so that accuracy-limited statuses flip as the accuracy changes).
        let homes = [
            Coordinate(latitude: 89.995, longitude: 10), Coordinate(latitude: -89.99, longitude: 100),
            Coordinate(latitude: -33, longitude: 179.998), Coordinate(latitude: 51.5, longitude: -0.1),
            Coordinate(latitude: 51.501, longitude: -0.1),
        ]
        var seq: Int64 = 0
        var ids: [String] = []
        func addRegion(near c: Coordinate) throws {
            seq += 1
            let spread = Double.random(in: 0...1500, using: &rng)
            let center = offset(
                c, north: Double.random(in: -spread...spread, using: &rng),
                east: Double.random(in: -spread...spread, using: &rng))
            let radius =
                Int.random(in: 0..<3, using: &rng) == 0
                ? Double.random(in: 1...40, using: &rng)
                : (Int.random(in: 0..<6, using: &rng) == 0
                    ? randomRadius(using: &rng) : Double.random(in: 40...800, using: &rng))
            let subjects: [String]? = Int.random(in: 0..<10, using: &rng) == 0 ? ["v0", "v3"] : nil
            let region = try Region(id: "n\(seq)", center: center, radius: radius, subjects: subjects)
            indexed.insert(region, seq: seq)
            scanned.insert(region, seq: seq)
            ids.append(region.id)
        }
        for home in homes {
            for _ in 0..<60 { try addRegion(near: home) }
        }
        var positions = homes
        var events = 0
        for second in 0..<600 {
            for k in positions.indices {
                // Parked (jitter), crawling, driving, and now and then a jump far beyond any neighbourhood.
                let mode = (second / 50 + k) % 4
                let speed = [0.0, 3, 25, 0][mode]
                let bearing = Double.random(in: 0..<(2 * .pi), using: &rng)
                positions[k] = offset(positions[k], north: speed * cos(bearing), east: speed * sin(bearing))
                if mode == 3 && second % 17 == 0 {
                    positions[k] = offset(
                        homes[k], north: Double.random(in: -1200...1200, using: &rng),
                        east: Double.random(in: -1200...1200, using: &rng))
                }
                let jitter = offset(
                    positions[k], north: Double.random(in: -2...2, using: &rng),
                    east: Double.random(in: -2...2, using: &rng))
                let accuracy = Double.random(in: 2...45, using: &rng)
                let time = start.addingTimeInterval(Double(second))
                let weighted = measured("v\(k)", at: jitter, accuracy: accuracy, time: time)
                let a = indexed.process(weighted, now: time)
                let b = scanned.process(weighted, now: time)
                #expect(a == b, "second \(second), v\(k)")
                events += a.events.count
            }
            // Regions come and go around the vehicles, often right next to one.
            if second % 7 == 0 {
                try addRegion(near: positions[Int.random(in: 0..<positions.count, using: &rng)])
                if let id = ids.randomElement(using: &rng) {
                    #expect(indexed.remove(id: id) == scanned.remove(id: id))
                }
            }
        }
        #expect(events > 200, "the scenario exercises the state machine")
        let kept = indexed.neighbourhoods
        #expect(kept.subjects > 0, "vehicles kept neighbourhoods")
        #expect(indexed.fixesFromNeighbourhoods > 600, "of 3000 fixes, these many came from neighbourhoods")
    }

    @Test("amid more regions than a neighbourhood holds, the index answers, with the same outputs")
    func crowdedNeighbourhood() throws {
        var rng = SeededGenerator(seed: 68)
        var indexed = RegionMonitor(
            ids: EventIDGenerator(rng: SeededGenerator(seed: 4)), candidateSearch: .spatialIndex)
        var scanned = RegionMonitor(ids: EventIDGenerator(rng: SeededGenerator(seed: 4)), candidateSearch: .linearScan)
        let downtown = Coordinate(latitude: 40.75, longitude: -73.99)
        // 400 regions within 500 m: far more than a neighbourhood's 64 within band + 250 m of any fix.
        for i in 0..<400 {
            let center = offset(
                downtown, north: Double.random(in: -500...500, using: &rng),
                east: Double.random(in: -500...500, using: &rng))
            let region = try Region(id: "d\(i)", center: center, radius: Double.random(in: 10...150, using: &rng))
            indexed.insert(region, seq: Int64(i + 1))
            scanned.insert(region, seq: Int64(i + 1))
        }
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        var events = 0
        for second in 0..<300 {
            let at = offset(downtown, north: Double(second % 100) * 4 - 200, east: Double(second / 100) * 50 - 50)
            let time = start.addingTimeInterval(Double(second))
            let weighted = measured("cab", at: at, accuracy: Double.random(in: 3...12, using: &rng), time: time)
            let a = indexed.process(weighted, now: time)
            #expect(a == scanned.process(weighted, now: time), "second \(second)")
            events += a.events.count
        }
        #expect(events > 20)
        #expect(indexed.neighbourhoods.subjects == 0, "no list of more than 64 regions is kept")
        #expect(indexed.fixesFromNeighbourhoods == 0)
    }

    @Test("a vehicle using its neighbourhood sees regions added, removed and re-marked around it")
    func monitorNeighbourhoodFollowsChanges() throws {
        var configuration = MonitorConfiguration()
        configuration.vicinity = 1000
        var indexed = RegionMonitor(
            configuration: configuration, ids: EventIDGenerator(rng: SeededGenerator(seed: 2)),
            candidateSearch: .spatialIndex)
        var scanned = RegionMonitor(
            configuration: configuration, ids: EventIDGenerator(rng: SeededGenerator(seed: 2)),
            candidateSearch: .linearScan)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let parked = Coordinate(latitude: 48.2, longitude: 16.37)
        var second = 0
        var outputs: [MonitorOutput] = []
        func fix(accuracy: Double = 5, north: Double = 0) {
            let time = start.addingTimeInterval(Double(second))
            second += 1
            // A parked truck's jitter: a metre or two either way.
            let at = offset(parked, north: north + Double(second % 3) - 1, east: Double(second % 2))
            let weighted = measured("truck", at: at, accuracy: accuracy, time: time)
            let a = indexed.process(weighted, now: time)
            let b = scanned.process(weighted, now: time)
            #expect(a == b, "second \(second)")
            outputs.append(a)
        }
        func insert(_ region: Region, seq: Int64) {
            indexed.insert(region, seq: seq)
            scanned.insert(region, seq: seq)
        }
        // Regions around, none containing the truck.
        insert(try Region(id: "far", center: offset(parked, north: 1500, east: 0), radius: 200), seq: 1)
        for _ in 0..<10 { fix() }
        // Added right next to the parked truck.
        insert(try Region(id: "depot", center: offset(parked, north: 0, east: 30), radius: 100), seq: 2)
        for _ in 0..<5 { fix() }
        #expect(indexed.state(subject: "truck", regionID: "depot") == .inside)
        #expect(
            outputs.flatMap(\.events).contains { $0.type == .determined && $0.state == .inside && $0.region == "depot" }
        )
        // Removed, and its slot reused by the next region.
        _ = indexed.remove(id: "depot")
        _ = scanned.remove(id: "depot")
        insert(try Region(id: "gate", center: offset(parked, north: 400, east: 0), radius: 20), seq: 3)
        for _ in 0..<5 { fix() }
        #expect(indexed.state(subject: "truck", regionID: "gate") == .outside)
        // A small region next to the truck becomes accuracy-limited (which marks it) and recovers.
        insert(try Region(id: "bay", center: offset(parked, north: 60, east: 0), radius: 20), seq: 4)
        for _ in 0..<3 { fix() }
        outputs.removeAll()
        for _ in 0..<3 { fix(accuracy: 40) }
        #expect(outputs.flatMap(\.statusChanges).map(\.status) == [.accuracyLimited])
        for _ in 0..<3 { fix(accuracy: 5) }
        // Then drives into it, in half a minute (60 m in the next second would be a jump the motion check
        // rightly refuses).
        second += 30
        for _ in 0..<3 { fix(accuracy: 5, north: 60) }
        #expect(indexed.state(subject: "truck", regionID: "bay") == .inside)

        // A neighbourhood taken for a precise fix does not serve a poorer one as far as its spare distance
        // alone: the poorer fix reaches farther. "edge" is 310 m north of the van: out of a neighbourhood
        // taken there (40 + 5 + 250 m), in reach of a 45 m fix 240 m north (70 m < 40 + 45 m).
        let home = Coordinate(latitude: 47.5, longitude: 8.5)
        insert(try Region(id: "edge", center: offset(home, north: 310, east: 0), radius: 40), seq: 5)
        func van(north: Double, accuracy: Double) -> MonitorOutput {
            let time = start.addingTimeInterval(Double(second))
            second += 1
            let at = offset(home, north: north, east: 0)
            let weighted = measured("van", at: at, accuracy: accuracy, time: time)
            let a = indexed.process(weighted, now: time)
            #expect(a == scanned.process(weighted, now: time), "second \(second)")
            return a
        }
        _ = van(north: 0, accuracy: 5)
        _ = van(north: 0, accuracy: 5)
        // 240 m on, 20 s later (a plausible drive, not a jump the motion check would refuse).
        second += 19
        #expect(van(north: 240, accuracy: 45).statusChanges.map(\.regionID) == ["edge"])
    }

    @Test("regions come back out as they went in, and ids and sequence numbers find them")
    func compactStorage() throws {
        var monitor = RegionMonitor()
        let created = Date(timeIntervalSinceReferenceDate: 812_345_678.123_456_7)
        let full = try Region(
            id: "depot-north-ünïcode-and-a-rather-long-id", name: "North depot",
            center: Coordinate(latitude: 51.5, longitude: -0.12),
            radius: 200, notify: [.enter, .dwell], dwell: 300, expires: Date(timeIntervalSince1970: 2_000_000_000),
            hooks: [.enter: "notify-backend enter"], subjects: ["/dev/ttyACM0"], createdBy: 1000, createdAt: created)
        let plain = try Region(
            id: "p", center: Coordinate(latitude: -33.9, longitude: 151.2), radius: 12.5, notify: [.exit], createdBy: 0,
            createdAt: created)
        let bare = try Region(id: "b", center: Coordinate(latitude: 90, longitude: 0), radius: 1)
        monitor.insert(full, seq: 1)
        monitor.insert(plain, seq: 2)
        monitor.insert(bare, seq: 3)
        #expect(monitor.region(id: full.id) == full)
        #expect(monitor.region(id: "p") == plain)
        #expect(monitor.region(id: "b") == bare)
        #expect(monitor.region(id: "nope") == nil)
        #expect(Set(monitor.regionIDs(seqs: [1, 3, 9])) == [full.id, "b"])
        // Many insertions and removals reuse slots and rewrite the id pool; everything still resolves.
        for i in 0..<3000 {
            let region = try Region(
                id: "x\(i)", center: Coordinate(latitude: 10, longitude: Double(i % 300) / 10), radius: 50)
            monitor.insert(region, seq: Int64(10 + i))
            if i % 3 != 0 {
                let removed = monitor.remove(id: "x\(i)")
                #expect(removed == region)
            }
        }
        #expect(monitor.regionCount == 3 + 1000)
        #expect(monitor.region(id: "x2997")?.radius == 50)
        #expect(monitor.region(id: "x2998") == nil)
        #expect(monitor.regionIDs(seqs: [10 + 2997]) == ["x2997"])
        #expect(monitor.region(id: full.id) == full)
        // Replacing keeps one region under the id, with the new definition.
        let moved = try Region(id: "p", center: Coordinate(latitude: -33.8, longitude: 151.3), radius: 99)
        monitor.insert(moved, seq: 5000)
        #expect(monitor.region(id: "p") == moved)
        #expect(monitor.regionIDs(seqs: [2]).isEmpty)
        #expect(monitor.regionCount == 3 + 1000)
    }
}
