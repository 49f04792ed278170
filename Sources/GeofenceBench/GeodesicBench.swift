import Foundation
import GeofenceCore

/// Geodesic distance calls per second: the exact solution (Karney) and the chord fast path, on pairs a
/// monitor meets (a fix and a region centre a few kilometres apart) and on pairs anywhere on earth.
func runGeodesic(report: Report, quick: Bool) {
    progress("geodesic distance")
    let section = "geodesic distance"
    var rng = BenchRandom(seed: 5)
    let count = quick ? 20_000 : 100_000
    let near: [(Coordinate, Coordinate)] = (0..<count).map { _ in
        let a = Country.randomPoint(using: &rng)
        let b = Coordinate(
            latitude: a.latitude + Double.random(in: -0.03...0.03, using: &rng),
            longitude: a.longitude + Double.random(in: -0.04...0.04, using: &rng))
        return (a, b)
    }
    let anywhere: [(Coordinate, Coordinate)] = (0..<count).map { _ in
        func point() -> Coordinate {
            Coordinate(
                latitude: asin(Double.random(in: -1...1, using: &rng)) * 180 / .pi,
                longitude: Double.random(in: -180...180, using: &rng))
        }
        return (point(), point())
    }
    let rounds = 7

    func exact(_ pairs: [(Coordinate, Coordinate)]) -> Double {
        var sum = 0.0
        let ns = medianNanosecondsPerOperation(rounds: rounds) {
            for (a, b) in pairs { sum += Geodesic.distance(a, b) }
            return pairs.count
        }
        consume(sum)
        return ns
    }
    let exactNear = exact(near)
    let exactAnywhere = exact(anywhere)

    let firsts = near.map { GeocentricPoint($0.0) }
    let seconds = near.map { GeocentricPoint($0.1) }
    var sum = 0.0
    let fast = medianNanosecondsPerOperation(rounds: rounds) {
        for i in firsts.indices { sum += Geodesic.distanceBounds(chord: firsts[i].chord(to: seconds[i])).upper }
        return firsts.count
    }
    let fastConverting = medianNanosecondsPerOperation(rounds: rounds) {
        for i in near.indices {
            sum += Geodesic.distanceBounds(chord: GeocentricPoint(near[i].0).chord(to: seconds[i])).upper
        }
        return near.count
    }
    consume(sum)

    func perSecond(_ ns: Double) -> String { "\(grouped(1e9 / ns)) calls/s" }
    report.add(section, "exact (Karney), pairs < 5 km apart", perSecond(exactNear), "\(grouped(exactNear)) ns/call")
    report.add(section, "exact (Karney), pairs anywhere", perSecond(exactAnywhere), "\(grouped(exactAnywhere)) ns/call")
    report.add(
        section, "fast path: chord + bounds, converted points", perSecond(fast), "\(grouped(fast, decimals: 1)) ns/call"
    )
    report.add(
        section, "fast path, converting one point each call", perSecond(fastConverting),
        "\(grouped(fastConverting, decimals: 1)) ns/call")
    report.add(section, "exact / fast path", "\(grouped(exactNear / fast))×")
}
