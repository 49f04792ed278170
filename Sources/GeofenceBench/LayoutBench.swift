import Foundation
import GeofenceCore

/// The spatial index's layout choices, measured (Docs/spatial-index.md): query time and memory with a
/// million regions for a few layouts, the same queries confined to a 20 km square (so the data they touch
/// stays in the cache: what the arithmetic costs), and this machine's memory latency.
func runLayouts(report: Report) {
    progress("index layouts, 1M regions")
    let section = "index layouts, 1M regions"
    let n = 1_000_000
    let regions = Country.regions(n, seed: 1)
    let fixes = makeFixes(count: 40_000, subjects: 1000, seed: 2)
    let spread = fixes.map { GeocentricPoint($0.coordinate) }
    let confined = fixes.map { fix in
        GeocentricPoint(
            Coordinate(
                latitude: 46 + (fix.coordinate.latitude - 46) * 0.02,
                longitude: 2 + (fix.coordinate.longitude - 2) * 0.02))
    }
    var layouts: [SpatialRegionIndex.Layout] = []
    for smallest in [500.0, 2000] {
        for perCell in [2.0, 4, 8] {
            layouts.append(.init(smallestLevelRadius: smallest, ratio: 4, entriesPerCell: perCell))
        }
    }
    var indexes: [SpatialRegionIndex] = []
    for layout in layouts {
        var index = SpatialRegionIndex(layout: layout)
        for (i, region) in regions.enumerated() {
            index.insert(slot: Int32(i), center: GeocentricPoint(region.center), radius: region.radius)
        }
        index.compact()
        indexes.append(index)
    }
    // Rounds interleaved across layouts, so that a burst of load on the machine touches them all alike.
    var spreadTimes = [[Double]](repeating: [], count: layouts.count)
    var confinedTimes = [[Double]](repeating: [], count: layouts.count)
    var found: [Int32] = []
    var total = 0
    for round in 0..<7 {
        for (k, index) in indexes.enumerated() {
            for (points, times) in [(spread, 0), (confined, 1)] {
                let start = (round * 4000 + k * 700) % (points.count - 4000)
                let t0 = threadNanoseconds()
                for point in points[start..<start + 4000] {
                    found.removeAll(keepingCapacity: true)
                    index.candidates(near: point, extra: 1015, into: &found)
                    total += found.count
                }
                let ns = Double(threadNanoseconds() - t0) / 4000
                if times == 0 { spreadTimes[k].append(ns) } else { confinedTimes[k].append(ns) }
            }
        }
    }
    consume(total)
    for (k, layout) in layouts.enumerated() {
        report.add(
            section,
            "first level ≤ \(grouped(layout.smallestLevelRadius)) m, \(grouped(layout.entriesPerCell)) per cell",
            "\(grouped(median(spreadTimes[k]))) ns/query",
            "\(grouped(median(confinedTimes[k]))) ns in cache; \(grouped(Double(indexes[k].memoryFootprint) / Double(n), decimals: 1)) B/region"
        )
    }
    report.add(
        "machine", "random read of 128 MiB, each waiting for the last", "\(grouped(memoryLatency())) ns",
        "a cache miss, as a pointer chase sees it")
}

/// Nanoseconds per random read of a 128 MiB array when each read's address comes from the one before: a
/// chain of cache (and TLB) misses, the latency a query's dependent steps pay.
private func memoryLatency() -> Double {
    let count = 16 << 20
    var order = Array(0..<count)
    var rng = BenchRandom(seed: 9)
    order.shuffle(using: &rng)
    var next = [Int](repeating: 0, count: count)
    for i in 0..<count { next[order[i]] = order[(i + 1) % count] }
    order = []
    let steps = 1_000_000
    var p = 0
    let t0 = threadNanoseconds()
    for _ in 0..<steps { p = next[p] }
    let t1 = threadNanoseconds()
    consume(p)
    return Double(t1 - t0) / Double(steps)
}
