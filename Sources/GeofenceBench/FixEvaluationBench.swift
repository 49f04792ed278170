import Foundation
import GeofenceCore
import GeofenceStore

/// Fixes for the monitor: random points of the country, `subjects` vehicles taking turns, with a stated
/// accuracy of 3 to 15 m. A vehicle's fixes are a day apart, so that each jump is one it could have made:
/// a fix hundreds of kilometres from one a second before is an outlier, which the monitor drops at once
/// (cheaply); the worst case is a fix it must evaluate.
func makeFixes(count: Int, subjects: Int, seed: UInt64) -> [WeightedFix] {
    var rng = BenchRandom(seed: seed)
    let names = (0..<subjects).map { "veh-\(String($0).leftPadded(to: 5))" }
    let start = Date(timeIntervalSince1970: 1_800_000_000)
    return (0..<count).map { i in
        let point = Country.randomPoint(using: &rng)
        let time = start.addingTimeInterval(Double(i / subjects) * 86_400)
        let accuracy = Double.random(in: 3...15, using: &rng)
        let fix = Fix(
            subject: names[i % subjects], time: time, mode: .threeD, latitude: point.latitude,
            longitude: point.longitude, horizontalAccuracy: accuracy)
        return WeightedFix(fix: fix, time: time, coordinate: point, accuracy: accuracy, accuracyEstimated: false)
    }
}

/// Fixes of a fleet on the move: `subjects` vehicles, each starting at a random point of the country and
/// driving at 8 to 30 m/s, turning a little each second, taking turns (one fix per vehicle per second).
/// What a fleet server sees: each fix is near its vehicle's last one, and consecutive fixes are from
/// vehicles far apart.
func makeMovingFixes(count: Int, subjects: Int, seed: UInt64, withMotion: Bool = false) -> [WeightedFix] {
    var rng = BenchRandom(seed: seed)
    let names = (0..<subjects).map { "veh-\(String($0).leftPadded(to: 5))" }
    var positions = (0..<subjects).map { _ in Country.randomPoint(using: &rng) }
    var headings = (0..<subjects).map { _ in Double.random(in: 0..<(2 * .pi), using: &rng) }
    let speeds = (0..<subjects).map { _ in Double.random(in: 8...30, using: &rng) }
    let start = Date(timeIntervalSince1970: 1_800_000_000)
    return (0..<count).map { i in
        let v = i % subjects
        headings[v] += Double.random(in: -0.1...0.1, using: &rng)
        let here = positions[v]
        let metresPerDegree = 111_320.0
        positions[v] = Coordinate(
            latitude: here.latitude + speeds[v] * cos(headings[v]) / metresPerDegree,
            longitude: here.longitude + speeds[v] * sin(headings[v])
                / (metresPerDegree * cos(here.latitude * .pi / 180)))
        let time = start.addingTimeInterval(Double(i / subjects))
        let accuracy = Double.random(in: 3...15, using: &rng)
        var course = headings[v] * 180 / .pi
        course -= 360 * (course / 360).rounded(.down)
        let fix = Fix(
            subject: names[v], time: time, mode: .threeD, latitude: positions[v].latitude,
            longitude: positions[v].longitude, horizontalAccuracy: accuracy, speed: withMotion ? speeds[v] : nil,
            course: withMotion ? course : nil)
        return WeightedFix(
            fix: fix, time: time, coordinate: positions[v], accuracy: accuracy, accuracyEstimated: false)
    }
}

/// Fixes of a sparse fleet (trackers that report every `interval` seconds while moving): as
/// `makeMovingFixes`, each fix with the speed and course the vehicle had, so that the monitor looks for passes
/// between a vehicle's fixes (`MonitorConfiguration.inferPasses`).
func makeSparseFixes(count: Int, subjects: Int, interval: Double, seed: UInt64) -> [WeightedFix] {
    var rng = BenchRandom(seed: seed)
    let names = (0..<subjects).map { "veh-\(String($0).leftPadded(to: 5))" }
    var positions = (0..<subjects).map { _ in Country.randomPoint(using: &rng) }
    var headings = (0..<subjects).map { _ in Double.random(in: 0..<(2 * .pi), using: &rng) }
    let speeds = (0..<subjects).map { _ in Double.random(in: 8...30, using: &rng) }
    let start = Date(timeIntervalSince1970: 1_800_000_000)
    return (0..<count).map { i in
        let v = i % subjects
        headings[v] += Double.random(in: -0.05...0.05, using: &rng)
        let here = positions[v]
        let metresPerDegree = 111_320.0
        let step = speeds[v] * interval
        positions[v] = Coordinate(
            latitude: here.latitude + step * cos(headings[v]) / metresPerDegree,
            longitude: here.longitude + step * sin(headings[v]) / (metresPerDegree * cos(here.latitude * .pi / 180)))
        let time = start.addingTimeInterval(Double(i / subjects) * interval)
        let accuracy = Double.random(in: 3...15, using: &rng)
        var course = headings[v] * 180 / .pi
        course -= 360 * (course / 360).rounded(.down)
        let fix = Fix(
            subject: names[v], time: time, mode: .threeD, latitude: positions[v].latitude,
            longitude: positions[v].longitude, horizontalAccuracy: accuracy, speed: speeds[v], course: course)
        return WeightedFix(
            fix: fix, time: time, coordinate: positions[v], accuracy: accuracy, accuracyEstimated: false)
    }
}

/// The `extra` distance the monitor asks its candidate finder for, for this fix (default configuration).
func monitorExtra(_ fix: WeightedFix) -> Double {
    let c = MonitorConfiguration()
    return c.margin(accuracy: fix.accuracy) + c.vicinity
}

/// Median nanoseconds per `RegionMonitor.process` call. The warm-up gives every subject its first fix
/// (the one that determines its nearby regions) and warms the caches; each timed round then takes the
/// next `perRound` fixes.
func monitorNanosecondsPerFix(
    _ monitor: inout RegionMonitor, fixes: [WeightedFix], warmUp: Int, rounds: Int, perRound: Int
) -> Double {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    var events = 0
    for fix in fixes.prefix(warmUp) { events += monitor.process(fix, now: now).events.count }
    var next = warmUp
    let result = medianNanosecondsPerOperation(rounds: rounds, warmUp: 0) {
        let end = min(fixes.count, next + perRound)
        let count = end - next
        while next < end {
            events += monitor.process(fixes[next], now: now).events.count
            next += 1
        }
        return count
    }
    consume(events)
    return result
}

/// Median nanoseconds per fix of two monitors on the same fixes, their rounds taken in turn (so that a busy
/// spell of a shared machine falls on both): `a` and `b` differ in their settings only.
func alternatingNanosecondsPerFix(
    _ a: inout RegionMonitor, _ b: inout RegionMonitor, fixes: [WeightedFix], warmUp: Int, rounds: Int,
    perRound: Int
) -> (a: Double, b: Double) {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    var events = 0
    for fix in fixes.prefix(warmUp) {
        events += a.process(fix, now: now).events.count + b.process(fix, now: now).events.count
    }
    var times: ([Double], [Double]) = ([], [])
    var next = warmUp
    for round in 0..<rounds {
        let end = min(fixes.count, next + perRound)
        // Each first in turn: the second of a round finds the fixes (and many records) in the cache.
        for runA in [round % 2 == 0, round % 2 != 0] {
            let start = threadNanoseconds()
            if runA {
                for i in next..<end { events += a.process(fixes[i], now: now).events.count }
            } else {
                for i in next..<end { events += b.process(fixes[i], now: now).events.count }
            }
            let ns = Double(threadNanoseconds() - start) / Double(max(1, end - next))
            if runA { times.0.append(ns) } else { times.1.append(ns) }
        }
        next = end
    }
    consume(events)
    return (median(times.0), median(times.1))
}

/// Median nanoseconds per item of `count`: `body` on each index in turn, 5,000 a round, nine rounds after one to
/// warm up, from the first again after the last.
func medianNanosecondsPerItem(count: Int, _ body: (Int) -> Void) -> Double {
    var next = 0
    return medianNanosecondsPerOperation(rounds: 9, warmUp: 1) {
        let end = min(count, next + 5000)
        let done = end - next
        while next < end {
            body(next)
            next += 1
        }
        if next >= count { next = 0 }
        return done
    }
}

/// Median nanoseconds per `MotionConsistency.update` on these fixes (one track per subject): the motion
/// check's own share of a fix's evaluation.
func motionCheckNanoseconds(fixes: [WeightedFix], subjects: Int) -> Double {
    let motion = MonitorConfiguration().motion
    var tracks = [MotionConsistency.Track?](repeating: nil, count: subjects)
    let points = fixes.map(\.point)
    let times = fixes.map(\.time.timeIntervalSince1970)
    let accuracies = fixes.map(\.accuracy)
    var agreed = 0
    let ns = medianNanosecondsPerItem(count: fixes.count) { i in
        let verdict = motion.update(&tracks[i % subjects], point: points[i], time: times[i], accuracy: accuracies[i])
        if verdict == .agrees { agreed += 1 }
    }
    consume(agreed)
    return ns
}

/// Median nanoseconds per conversion of a fix's coordinate to earth-centred axes: made once a fix with its
/// `WeightedFix` (by the filter, before the monitor), so not in `RegionMonitor.process`'s own time.
func conversionNanoseconds(fixes: [WeightedFix]) -> Double {
    let coordinates = fixes.map(\.coordinate)
    var sum = 0.0
    let ns = medianNanosecondsPerItem(count: coordinates.count) { i in sum += GeocentricPoint(coordinates[i]).z }
    consume(sum)
    return ns
}

/// The regions' centres and radii, for the exact test every candidate finder ends with.
struct ExactCheck {
    let centers: [GeocentricPoint]
    let radii: [Double]

    init(_ regions: [Region]) {
        centers = regions.map { GeocentricPoint($0.center) }
        radii = regions.map(\.radius)
    }

    /// `LinearRegionIndex`'s own test.
    @inline(__always)
    func accepts(_ slot: Int, from point: GeocentricPoint, extra: Double) -> Bool {
        point.chord(to: centers[slot]) < radii[slot] + extra + 1e-6
    }
}

/// SQLite's R*Tree as a user would use it for the same question: a table of region bounding boxes in
/// degrees; per fix, one bounding-box query (the fix's box widened by the same `extra` the monitor asks
/// for), then the exact test on the rows it returns.
final class SQLiteRTreePeer {
    let db: DatabaseConnection
    private let query: Statement

    init(regions: [Region]) throws {
        db = try DatabaseConnection(path: ":memory:")
        try db.execute("CREATE VIRTUAL TABLE region_boxes USING rtree(seq, min_lat, max_lat, min_lon, max_lon)")
        try db.execute("BEGIN")
        let insert = try db.makeStatement("INSERT INTO region_boxes VALUES (?, ?, ?, ?, ?)")
        for (i, region) in regions.enumerated() {
            let (dLat, dLon) = Self.degrees(around: region.center, metres: region.radius)
            try insert.execute([
                Int64(i), region.center.latitude - dLat, region.center.latitude + dLat,
                region.center.longitude - dLon, region.center.longitude + dLon,
            ])
        }
        try db.execute("COMMIT")
        query = try db.makeStatement(
            "SELECT seq FROM region_boxes WHERE max_lat >= ? AND min_lat <= ? AND max_lon >= ? AND min_lon <= ?")
    }

    /// Half-sizes in degrees of a box holding every point within `metres` of `c`: generous (the shortest
    /// degree of latitude, and the degree of longitude at the box's edge nearer the pole), and plain (no
    /// antimeridian or polar cases: the benchmark's country has none).
    static func degrees(around c: Coordinate, metres: Double) -> (Double, Double) {
        let dLat = metres / 110_500
        let poleward = min(89.9, abs(c.latitude) + dLat)
        let dLon = min(180, metres / (111_000 * cos(poleward * .pi / 180)))
        return (dLat, dLon)
    }

    /// Rows whose box meets the fix's box widened by `extra`, as `seq`s.
    func candidates(near c: Coordinate, extra: Double, into result: inout [Int32]) throws {
        let (dLat, dLon) = Self.degrees(around: c, metres: extra)
        try query.bind([c.latitude - dLat, c.latitude + dLat, c.longitude - dLon, c.longitude + dLon])
        while try query.step() { result.append(Int32(truncatingIfNeeded: query.int64(at: 0))) }
        query.reset()
    }
}

/// Median nanoseconds per candidate query (candidate finder + the exact test), over rounds of `perRound`.
func candidateQueryNanoseconds(
    fixes: [WeightedFix], exact: ExactCheck, rounds: Int, perRound: Int,
    _ find: (Coordinate, GeocentricPoint, Double, inout [Int32]) -> Void
) -> (nanoseconds: Double, found: Double) {
    let points = fixes.map { GeocentricPoint($0.coordinate) }
    var found: [Int32] = []
    var total = 0
    var queries = 0
    var next = 0
    let ns = medianNanosecondsPerOperation(rounds: rounds, warmUp: 1) {
        let end = min(fixes.count, next + perRound)
        let count = end - next
        while next < end {
            let point = points[next]
            let extra = monitorExtra(fixes[next])
            found.removeAll(keepingCapacity: true)
            find(fixes[next].coordinate, point, extra, &found)
            for slot in found where exact.accepts(Int(slot), from: point, extra: extra) { total += 1 }
            next += 1
        }
        queries += count
        if next >= fixes.count { next = 0 }
        return count
    }
    return (ns, Double(total) / Double(max(1, queries)))
}

/// Fix evaluation with `sizes` regions: through the monitor with the index and with the linear scan,
/// and the candidate query alone for the index and for SQLite's R*Tree, all on the same fixes.
func runFixEvaluation(sizes: [Int], report: Report) throws {
    let subjects = 1000
    let fixes = makeFixes(count: 60_000, subjects: subjects, seed: 2)
    let movingFixes = makeMovingFixes(count: 60_000, subjects: subjects, seed: 3)
    let sparseFixes = makeSparseFixes(count: 60_000, subjects: subjects, interval: 30, seed: 4)
    // The same drive with speed and course, as receivers report them: every fix makes the pass rule's first tests.
    let movingWithMotion = makeMovingFixes(count: 60_000, subjects: subjects, seed: 3, withMotion: true)
    for n in sizes {
        let name = sizeName(n)
        progress("fix evaluation, \(name) regions")
        let regions = Country.regions(n, seed: 1)
        let exact = ExactCheck(regions)

        var monitor = indexedMonitor(regions)
        let indexed = monitorNanosecondsPerFix(
            &monitor, fixes: fixes, warmUp: 2 * subjects, rounds: 9, perRound: (fixes.count - 2 * subjects) / 9)
        monitor = RegionMonitor()
        var driving = indexedMonitor(regions)
        let moving = monitorNanosecondsPerFix(
            &driving, fixes: movingFixes, warmUp: 2 * subjects, rounds: 9,
            perRound: (movingFixes.count - 2 * subjects) / 9)
        let neighbourhoods = driving.neighbourhoods
        let fromNeighbourhoods = Double(driving.fixesFromNeighbourhoods) / Double(movingFixes.count)
        driving = RegionMonitor()

        // The same drive with the decisions on the track (`fusedDecisions`, on by default) and without: the
        // rounds in turn.
        var fusedOn = indexedMonitor(regions)
        var fusedOff = indexedMonitor(regions)
        fusedOff.configuration.fusedDecisions = false
        let fusedTimes = alternatingNanosecondsPerFix(
            &fusedOn, &fusedOff, fixes: movingFixes, warmUp: 2 * subjects, rounds: 9,
            perRound: (movingFixes.count - 2 * subjects) / 9)
        fusedOn = RegionMonitor()
        fusedOff = RegionMonitor()

        var withMotion = indexedMonitor(regions)
        let movingSpeeds = monitorNanosecondsPerFix(
            &withMotion, fixes: movingWithMotion, warmUp: 2 * subjects, rounds: 9,
            perRound: (movingWithMotion.count - 2 * subjects) / 9)
        withMotion = RegionMonitor()

        // A sparse fleet, with the passes between fixes looked for, and without.
        var sparse = indexedMonitor(regions)
        let sparseOn = monitorNanosecondsPerFix(
            &sparse, fixes: sparseFixes, warmUp: 2 * subjects, rounds: 9,
            perRound: (sparseFixes.count - 2 * subjects) / 9)
        sparse = RegionMonitor()
        var sparsePlain = indexedMonitor(regions)
        sparsePlain.configuration.inferPasses = false
        let sparseOff = monitorNanosecondsPerFix(
            &sparsePlain, fixes: sparseFixes, warmUp: 2 * subjects, rounds: 9,
            perRound: (sparseFixes.count - 2 * subjects) / 9)
        sparsePlain = RegionMonitor()

        var index = SpatialRegionIndex()
        for (i, region) in regions.enumerated() {
            index.insert(slot: Int32(i), center: GeocentricPoint(region.center), radius: region.radius)
        }
        index.compact()
        let query = candidateQueryNanoseconds(fixes: fixes, exact: exact, rounds: 9, perRound: 5000) {
            _, point, extra, found in index.candidates(near: point, extra: extra, into: &found)
        }
        index = SpatialRegionIndex()

        // The linear scan costs about 3 ns a region a fix: fewer fixes for more regions.
        let linearPerRound = max(20, min(5000, 20_000_000 / n))
        var scanned = RegionMonitor(candidateSearch: .linearScan)
        for (i, region) in regions.enumerated() { scanned.insert(region, seq: Int64(i + 1)) }
        let linear = monitorNanosecondsPerFix(
            &scanned, fixes: fixes, warmUp: subjects, rounds: 7, perRound: linearPerRound)
        scanned = RegionMonitor()

        let peer = try SQLiteRTreePeer(regions: regions)
        let rtree = candidateQueryNanoseconds(fixes: fixes, exact: exact, rounds: 9, perRound: 2000) {
            coordinate, _, extra, found in try! peer.candidates(near: coordinate, extra: extra, into: &found)
        }

        let section = "fix evaluation, \(name) regions"
        report.add(
            section, "RegionMonitor.process, spatial index, a fleet driving", "\(grouped(moving)) ns/fix",
            "1000 vehicles at 8-30 m/s, taking turns")
        report.add(
            section, "RegionMonitor.process, spatial index, a fleet driving, with speed and course",
            "\(grouped(movingSpeeds)) ns/fix",
            "the same drive; each fix also makes the pass rule's first tests (\(grouped(100 * (movingSpeeds / moving - 1), decimals: 0)) %)"
        )
        report.add(
            section, "a fleet driving, decisions on the track on / off",
            "\(grouped(fusedTimes.a, decimals: 0)) / \(grouped(fusedTimes.b, decimals: 0)) ns/fix = "
                + "\(grouped(fusedTimes.a / fusedTimes.b, decimals: 2))×",
            "issue 27: the same fixes, rounds in turn; `fusedDecisions` off is the rule before it")
        report.add(
            section, "RegionMonitor.process, spatial index, a sparse fleet (passes looked for)",
            "\(grouped(sparseOn)) ns/fix", "1000 vehicles at 8-30 m/s, a fix every 30 s with speed and course")
        report.add(
            section, "RegionMonitor.process, spatial index, the sparse fleet, passes off",
            "\(grouped(sparseOff)) ns/fix", "the same fixes, `inferPasses` off")
        report.add(
            section, "sparse fleet, passes on / passes off", "\(grouped(sparseOn / sparseOff, decimals: 2))×",
            "issue 27: within 2× of the same fixes' evaluation without passes")
        report.add(
            section, "sparse fleet, passes on / a fleet driving (1 Hz)",
            "\(grouped(sparseOn / moving, decimals: 2))×",
            "sparse fixes are 240-900 m apart: no neighbourhood serves them")
        if n == sizes.first {
            report.add(
                section, "the motion check alone (MotionConsistency.update), a fleet driving",
                "\(grouped(motionCheckNanoseconds(fixes: movingFixes, subjects: subjects))) ns/fix",
                "part of every fix's evaluation, whatever the number of regions")
            report.add(
                section, "the fix's earth-centred point (made with the `WeightedFix`, by the filter)",
                "\(grouped(conversionNanoseconds(fixes: movingFixes))) ns/fix",
                "not in the rows above: the fixes are made before the clock starts; add it to compare a whole fix")
            report.add(
                section, "the motion check's state per vehicle (per-subject state)",
                "\(MemoryLayout<MotionConsistency.Track?>.stride) B/vehicle", "one filter per subject ever seen")
        }
        report.add(
            section, "neighbourhoods kept by the driving vehicles (per-subject state)",
            "\(grouped(Double(neighbourhoods.bytes) / Double(max(1, neighbourhoods.subjects)))) B/vehicle",
            "\(neighbourhoods.subjects) vehicles, "
                + "\(grouped(Double(neighbourhoods.regions) / Double(max(1, neighbourhoods.subjects)), decimals: 1)) "
                + "regions each; \(grouped(100 * fromNeighbourhoods, decimals: 0)) % of fixes answered from them")
        report.add(
            section, "RegionMonitor.process, spatial index, random jumps", "\(grouped(indexed)) ns/fix",
            "every fix at a new random place: the worst case")
        if n >= 100_000, let huge = hugePageFixEvaluation(n: n, driving: false) {
            report.add(
                section, "RegionMonitor.process, spatial index, random jumps, huge pages", "\(grouped(huge)) ns/fix",
                "the same, in a process run with GLIBC_TUNABLES=glibc.malloc.hugetlb=1")
        }
        if n >= 1_000_000, let huge = hugePageFixEvaluation(n: n, driving: true) {
            report.add(
                section, "RegionMonitor.process, spatial index, a fleet driving, huge pages", "\(grouped(huge)) ns/fix",
                "as `geofence run` runs by default (Docs/daemon.md)")
        }
        report.add(section, "RegionMonitor.process, linear scan", "\(grouped(linear)) ns/fix")
        report.add(
            section, "candidate query: spatial index + exact test", "\(grouped(query.nanoseconds)) ns/query",
            "\(grouped(query.found, decimals: 1)) regions in reach per fix")
        report.add(
            section, "candidate query: SQLite R*Tree + exact test", "\(grouped(rtree.nanoseconds)) ns/query",
            "\(grouped(rtree.found, decimals: 1)) regions in reach per fix")
        report.add(
            section, "linear scan / index (process, driving)", "\(grouped(linear / moving, decimals: 1))×")
        report.add(
            section, "linear scan / index (process, random jumps)", "\(grouped(linear / indexed, decimals: 1))×")
        report.add(
            section, "R*Tree query / index process (driving)", "\(grouped(rtree.nanoseconds / moving, decimals: 1))×",
            "whole fix evaluation against the peer's lookup alone")
        report.add(
            section, "R*Tree query / index process (random jumps)",
            "\(grouped(rtree.nanoseconds / indexed, decimals: 1))×")
        report.add(
            section, "R*Tree query / index query", "\(grouped(rtree.nanoseconds / query.nanoseconds, decimals: 1))×")
    }
}

/// Resident memory per region of the monitor (records and index) with `n` regions.
func runMemory(n: Int, report: Report) {
    progress("memory, \(sizeName(n)) regions")
    let section = "memory, \(sizeName(n)) regions"
    let regions = Country.regions(n, seed: 1)
    // The regions stay alive throughout: freed while the monitor is built, they would hide its growth.
    let (before, after, monitor) = withExtendedLifetime(regions) {
        let before = residentBytes()
        // As `FixPipeline.load()` leaves it.
        let monitor = indexedMonitor(regions)
        return (before, residentBytes(), monitor)
    }
    report.add(
        section, "RegionMonitor (records + index), resident",
        "\(grouped(Double(after - before) / Double(n), decimals: 1)) B/region", "RSS growth while building it")
    report.add(
        section, "RegionMonitor, by its own accounting",
        "\(grouped(Double(monitor.regionMemoryFootprint) / Double(n), decimals: 1)) B/region", "array capacities")
    report.add(
        section, "a Region value, for comparison", "\(MemoryLayout<Region>.stride) B + heap",
        "what keeping a Region per slot costs before its Set, strings and dictionary")
    consume(monitor.regionCount)
}

/// The index's fix evaluation again, in a child process whose malloc asks for transparent huge pages
/// (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1`, glibc 2.35 and later): at a million regions most of a fix's
/// time is cache and TLB misses, and 2 MiB pages make the TLB cover the index. The child prints its median.
func hugePageFixEvaluation(n: Int, driving: Bool) -> Double? {
    let child = Process()
    child.executableURL = URL(fileURLWithPath: "/proc/self/exe")
    child.arguments = ["--monitor-child", String(n)] + (driving ? ["driving"] : [])
    var environment = ProcessInfo.processInfo.environment
    environment["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1"
    child.environment = environment
    let output = Pipe()
    child.standardOutput = output
    do {
        try child.run()
    } catch {
        return nil
    }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    child.waitUntilExit()
    return String(decoding: data, as: UTF8.self).split(separator: "\n").last.flatMap { Double($0) }
}

/// The child of `hugePageFixEvaluation`: the same fixes (random jumps, or the fleet driving) and regions as
/// `runFixEvaluation`.
func runMonitorChild(n: Int, driving: Bool, withMotion: Bool = false) {
    let subjects = 1000
    let fixes =
        driving
        ? makeMovingFixes(count: 60_000, subjects: subjects, seed: 3, withMotion: withMotion)
        : makeFixes(count: 60_000, subjects: subjects, seed: 2)
    let regions = Country.regions(n, seed: 1)
    var monitor = indexedMonitor(regions)
    let ns = monitorNanosecondsPerFix(
        &monitor, fixes: fixes, warmUp: 2 * subjects, rounds: 9, perRound: (fixes.count - 2 * subjects) / 9)
    print(ns)
    // What the motion check made of the fixes, all honest: none should be refused (on stderr, not to disturb a
    // script reading the number).
    progress("refused \(monitor.outliers) of \(fixes.count) honest fixes, started over \(monitor.resynchronized) times")
}

/// A monitor holding `regions` (seqs from 1), its index packed as after a daemon's start.
func indexedMonitor(_ regions: [Region]) -> RegionMonitor {
    var monitor = RegionMonitor()
    monitor.reserveCapacity(regions.count)
    for (i, region) in regions.enumerated() { monitor.insert(region, seq: Int64(i + 1)) }
    monitor.compactIndex()
    return monitor
}
