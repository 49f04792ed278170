import Foundation
import GeofenceCore

/// Polygon regions against circles at the same count, in the same run: `n` concave polygons of 20 to 200
/// vertices on the circles' centres and radii (50 m to 2 km: building- to district-sized) over the
/// country, the same fixes through both monitors.
func runPolygons(n: Int, report: Report) {
    let subjects = 1000
    let fixes = makeFixes(count: 60_000, subjects: subjects, seed: 2)
    let movingFixes = makeMovingFixes(count: 60_000, subjects: subjects, seed: 3)
    let name = sizeName(n)
    progress("polygons, \(name) regions: building them")
    let circles = Country.regions(n, seed: 1)
    var rng = BenchRandom(seed: 17)
    let started = nanoseconds()
    let polygons = circles.map { circle in
        let corners = Int.random(in: 20...200, using: &rng)
        var ring: [Coordinate] = []
        let metresPerDegree = 111_320.0
        for k in 0..<corners {
            let bearing = 2 * Double.pi * Double(corners - k) / Double(corners)
            let reach = circle.radius * Double.random(in: 0.6...1, using: &rng)
            ring.append(
                Coordinate(
                    latitude: circle.center.latitude + reach * cos(bearing) / metresPerDegree,
                    longitude: circle.center.longitude + reach * sin(bearing)
                        / (metresPerDegree * cos(circle.center.latitude * .pi / 180))))
        }
        ring.append(ring[0])
        return try! Region(
            id: circle.id, polygon: RegionPolygon(parts: [[ring]]), createdBy: 1000, createdAt: circle.createdAt)
    }
    let buildSeconds = Double(nanoseconds() - started) / 1e9
    let vertices = polygons.reduce(0) { $0 + $1.polygon!.vertexCount }
    let shapeBytes = polygons.reduce(0) { $0 + $1.polygon!.memoryFootprint }

    func measure(_ regions: [Region], _ label: String) -> (jumping: Double, driving: Double, bytes: Int) {
        progress("polygons, \(name) regions: \(label)")
        var monitor = indexedMonitor(regions)
        let bytes = monitor.regionMemoryFootprint
        let jumping = monitorNanosecondsPerFix(
            &monitor, fixes: fixes, warmUp: 2 * subjects, rounds: 9, perRound: (fixes.count - 2 * subjects) / 9)
        monitor = indexedMonitor(regions)
        let driving = monitorNanosecondsPerFix(
            &monitor, fixes: movingFixes, warmUp: 2 * subjects, rounds: 9,
            perRound: (movingFixes.count - 2 * subjects) / 9)
        return (jumping, driving, bytes)
    }
    let circle = measure(circles, "circles")
    let polygon = measure(polygons, "polygons")
    let section = "polygon regions, \(name) polygons of 20-200 vertices against \(name) circles"
    report.add(
        section, "RegionMonitor.process, random jumps: circles / polygons",
        "\(grouped(circle.jumping)) / \(grouped(polygon.jumping)) ns/fix",
        "polygons at \(grouped(polygon.jumping / circle.jumping, decimals: 2))× circles (the target is at most 3×)")
    report.add(
        section, "RegionMonitor.process, a fleet driving: circles / polygons",
        "\(grouped(circle.driving)) / \(grouped(polygon.driving)) ns/fix",
        "polygons at \(grouped(polygon.driving / circle.driving, decimals: 2))× circles")
    report.add(
        section, "vertices in all", grouped(Double(vertices)),
        "\(grouped(Double(vertices) / Double(n), decimals: 1)) a polygon on average")
    report.add(
        section, "memory of the shapes (edges, projection, positions)",
        "\(grouped(Double(shapeBytes) / Double(vertices), decimals: 1)) B/vertex",
        "\(grouped(Double(shapeBytes) / 1_048_576, decimals: 1)) MiB in all")
    report.add(
        section, "the monitor's regions and index besides the shapes: circles / polygons",
        "\(grouped(Double(circle.bytes) / Double(n))) / \(grouped(Double(polygon.bytes - shapeBytes) / Double(n))) B/region",
        "a polygon region keeps its whole Region (its details)")
    report.add(
        section, "building and validating the polygons", "\(grouped(buildSeconds * 1e9 / Double(vertices))) ns/vertex",
        "\(grouped(buildSeconds, decimals: 1)) s in all")
}
