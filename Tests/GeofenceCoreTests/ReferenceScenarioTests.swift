import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// The Swift port of the C reference programs' scenario (`geofence-bench --reference DIR`, issue 29) and geofence's
/// index on it.
@Suite struct ReferenceScenarioTests {
    /// The C generator's values, obtained by building ../shared/perf-reference (`make gen`), running
    /// `./gen 1000 1000 DIR` and reading regions_1000.bin (7 doubles a region: latitude, longitude, radius, box)
    /// and queries_1000.bin (2 doubles a query) with Python's `struct.unpack` and `repr` (which prints the shortest
    /// decimal that reads back as the same double). Compared with `==`: the port must give the same bits.
    @Test func generatorGivesTheCGeneratorsDraws() {
        let regions = ReferenceScenario.regions(1000)
        let queries = ReferenceScenario.queries(1000)
        let expectedRegions: [(Int, Double, Double, Double)] = [
            (0, 51.76720299873032, 9.572500577123684, 1015.1798484268406),
            (1, 49.218286512577805, 6.0303897869926315, 1506.0277273134213),
            (999, 49.50194909659143, 10.303915154877428, 105.07952146527664),
        ]
        for (i, latitude, longitude, radius) in expectedRegions {
            #expect(regions[i].center.latitude == latitude, "region \(i)")
            #expect(regions[i].center.longitude == longitude, "region \(i)")
            #expect(regions[i].radius == radius, "region \(i)")
        }
        let expectedQueries: [(Int, Double, Double)] = [
            (0, 49.69963649164559, 6.756419745789437),
            (1, 49.733297691267396, 13.466669194619378),
            (999, 48.607652121756544, 12.74037298835805),
        ]
        for (i, latitude, longitude) in expectedQueries {
            #expect(queries[i] == Coordinate(latitude: latitude, longitude: longitude), "query \(i)")
        }
        // A smaller N is a prefix of a larger one, as in the C programs.
        #expect(ReferenceScenario.regions(10) == Array(regions.prefix(10)))
    }

    /// The hit count and hash the C programs print (`./linear 1000 1000`, `./linear 10000 1000` and
    /// `./grid 10000 1000` in a build of ../shared/perf-reference: `hitsum` and `hashsum`): geofence's index with
    /// its exact geodesic test gives the same.
    @Test func indexGivesTheCProgramsHitsAndHash() {
        let queries = ReferenceScenario.queries(1000)
        let expected: [(n: Int, count: Int, hash: UInt64)] = [
            (1000, 1, 0xf054_6d3e_9f51_e7fd), (10_000, 27, 0xf5c6_02fd_2687_f935),
        ]
        for (n, count, hash) in expected {
            let index = ReferenceIndex(ReferenceScenario.regions(n))
            var scratch: [NearbyRegion] = []
            var total = ReferenceHits()
            for query in queries { total.add(index.hits(at: query, scratch: &scratch)) }
            #expect(total == ReferenceHits(count: count, hash: hash), "N = \(n)")
        }
    }

    /// The index returns exactly the linear scan's hits, query by query: on the scenario's queries (which hit
    /// little at N = 1000), and on points placed around the circles' edges (from 0.5 to 1.5 radii from a
    /// centre), where about half are inside and many are close to the boundary.
    @Test func indexGivesTheLinearScansHits() {
        let regions = ReferenceScenario.regions(1000)
        let index = ReferenceIndex(regions)
        var generator = SeededGenerator(seed: 29)
        let nearEdges = (0..<1000).map { i in
            let circle = regions[i * 7 % regions.count]
            let distance = circle.radius * (0.5 + ReferenceScenario.unit(&generator))
            let bearing = 2 * Double.pi * ReferenceScenario.unit(&generator)
            return offset(circle.center, north: distance * cos(bearing), east: distance * sin(bearing))
        }
        var scratch: [NearbyRegion] = []
        var inside = 0
        for query in ReferenceScenario.queries(1000) + nearEdges {
            let expected = index.linearHits(at: query)
            #expect(index.hits(at: query, scratch: &scratch) == expected, "at \(query)")
            #expect(index.hitCount(at: query, scratch: &scratch) == expected.count, "at \(query)")
            inside += expected.count
        }
        // The points near the edges do test something: hundreds of hits, not a handful.
        #expect(inside > 300)
    }

    /// Within a few metres of the circles' edges, where the index's bounds (centres stored to about a metre) do not
    /// settle a candidate and the exact test decides: the hits are still the linear scan's, point for point, and
    /// the points do land there (hundreds of candidates left to the exact test, hits and misses both).
    @Test func candidatesNearTheEdgeGoToTheExactTest() {
        let regions = ReferenceScenario.regions(1000)
        let index = ReferenceIndex(regions)
        var generator = SeededGenerator(seed: 2929)
        let nearEdges = (0..<2000).map { i in
            let circle = regions[i * 13 % regions.count]
            let distance = circle.radius + 10 * (ReferenceScenario.unit(&generator) - 0.5)
            let bearing = 2 * Double.pi * ReferenceScenario.unit(&generator)
            return offset(circle.center, north: distance * cos(bearing), east: distance * sin(bearing))
        }
        var scratch: [NearbyRegion] = []
        var unsettled = 0
        var inside = 0
        for query in nearEdges {
            let expected = index.linearHits(at: query)
            #expect(index.hits(at: query, scratch: &scratch) == expected, "at \(query)")
            #expect(index.hitCount(at: query, scratch: &scratch) == expected.count, "at \(query)")
            unsettled += scratch.count { ReferenceIndex.settles($0) == nil }
            inside += expected.count
        }
        #expect(unsettled > 300)
        #expect(inside > 300 && inside < 1700)
    }
}
