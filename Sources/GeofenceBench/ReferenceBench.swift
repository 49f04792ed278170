import Foundation
import GeofenceCore
import GeofenceSystem
import GeofenceTestSupport

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

// `geofence-bench --reference DIR` (issue 29, "same work, same run"): the C reference programs of DIR
// (../shared/perf-reference) and geofence's spatial index answer the same question on the same seeded scenario
// in one run, each in a process of its own pinned to the same core with `taskset -c CPU`, and must give the same
// hit count and hash. The C programs time each query (its set-up included) with CLOCK_MONOTONIC and take away the
// timer's own median cost; geofence's child does exactly the same (`runReferenceChild`).

/// The comparison found different answers: the programs did not do the same work.
struct ReferenceMismatch: Error, CustomStringConvertible {
    let description: String
}

/// The C programs compared, in the order run; geofence's child runs between `grid_inline` and `grid`, the two
/// it is measured against.
private let referencePrograms = ["grid_inline", "grid", "rtree", "linear"]

/// One `RESULT` line: its key=value fields.
struct ReferenceResult {
    let fields: [String: String]

    init?(line: Substring) {
        guard line.hasPrefix("RESULT ") else { return nil }
        var fields: [String: String] = [:]
        for field in line.dropFirst("RESULT ".count).split(separator: " ") {
            guard let equals = field.firstIndex(of: "=") else { continue }
            fields[String(field[..<equals])] = String(field[field.index(after: equals)...])
        }
        self.fields = fields
    }

    func number(_ key: String) -> Double? { fields[key].flatMap(Double.init) }
    var method: String { fields["method"] ?? "?" }
    /// The hit count and the hash, as printed (the hash in hexadecimal).
    var answer: String { "\(fields["hitsum"] ?? "?") / \(fields["hashsum"] ?? "?")" }
}

/// Runs the comparison; a skipped one (no folder, no gcc or make) is a note in the report. Throws
/// `ReferenceMismatch` when the answers differ, or when a program fails.
func runReference(directory: String, regions n: Int, queries: Int, report: Report) throws {
    let section = "beside the C reference, \(sizeName(n)) regions"
    progress("beside the C reference (\(directory)), \(sizeName(n)) regions, \(sizeName(queries)) queries")
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: directory + "/Makefile", isDirectory: &isDirectory),
        !isDirectory.boolValue
    else {
        report.add(section, "skipped", "-", "no reference programs at \(directory) (no Makefile there)")
        return
    }
    guard let make = executableInPath("make"), executableInPath("gcc") != nil else {
        report.add(section, "skipped", "-", "gcc or make is not installed")
        return
    }

    // A copy, built there: the shared folder is read-only.
    let build = TemporaryDirectory("reference")
    defer { build.remove() }
    for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
        try FileManager.default.copyItem(atPath: directory + "/" + name, toPath: build.path + "/" + name)
    }
    let (made, _) = try runProgram(make, ["-s", "-C", build.path] + referencePrograms, passOutput: true)
    guard made == 0 else { throw ReferenceMismatch(description: "make in a copy of \(directory) failed (\(made))") }

    // Pinned like the C programs: `taskset -c CPU`, CPU 1 (the second core) when there is one.
    let cpu = min(1, max(0, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))) - 1))
    let taskset = executableInPath("taskset")
    func pinned(_ program: String, _ arguments: [String]) -> (String, [String]) {
        guard let taskset else { return (program, arguments) }
        return (taskset, ["-c", String(cpu), program] + arguments)
    }
    let pinning = taskset == nil ? "not pinned (no taskset)" : "each under taskset -c \(cpu)"

    // The linear scan costs about 0.5 ns a region a query: few queries at large N. geofence's child reports its
    // answer over the same first queries too.
    let linearQueries = min(queries, max(100, 200_000_000 / n))
    var results: [String: ReferenceResult] = [:]
    func run(_ method: String, _ program: String, _ arguments: [String]) throws {
        let (command, commandArguments) = pinned(program, arguments)
        progress("  \(method): \(([command] + commandArguments).joined(separator: " "))")
        let (status, output) = try runProgram(command, commandArguments, passOutput: false)
        guard status == 0, let result = output.split(separator: "\n").lazy.compactMap(ReferenceResult.init).first
        else {
            throw ReferenceMismatch(description: "\(method) failed (exit \(status)): \(output)")
        }
        progress("  " + output.split(separator: "\n").joined(separator: "\n  "))
        results[method] = result
    }
    let me = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    for program in referencePrograms {
        let count = program == "linear" ? linearQueries : queries
        try run(program, build.path + "/" + program, [String(n), String(count)])
        if program == "grid_inline" {
            try run(
                "geofence", me, ["--reference-child", String(n), String(queries), "prefix=\(linearQueries)"])
        }
    }
    guard let geofence = results["geofence"] else { return }

    // Same work: every program's hit count and hash are geofence's (the linear scan's over its first queries).
    var mismatches: [String] = []
    for program in referencePrograms {
        guard let result = results[program] else { continue }
        let prefix = program == "linear" && linearQueries < queries
        let expected =
            prefix
            ? "\(geofence.fields["prefix_hitsum"] ?? "?") / \(geofence.fields["prefix_hashsum"] ?? "?")"
            : geofence.answer
        let agrees = result.answer == expected
        report.add(
            section, "hits / hash, \(program)\(prefix ? " (first \(grouped(Double(linearQueries))) queries)" : "")",
            result.answer, agrees ? "geofence: the same" : "geofence: \(expected), DIFFERENT")
        if !agrees { mismatches.append("\(program) \(result.answer), geofence \(expected)") }
    }
    report.add(
        section, "hits / hash, geofence", geofence.answer,
        "\(geofence.fields["leaq_disagreements"] ?? "?") hits where the C programs' leaq test and geofence's "
            + "exact geodesic disagree")

    func time(_ r: ReferenceResult) -> String {
        let parts = ["median_ns", "p90_ns", "p99_ns"].map { r.number($0).map { grouped($0) } ?? "?" }
        return "\(parts[0]) ns (p90 \(parts[1]), p99 \(parts[2]))"
    }
    func bytes(_ r: ReferenceResult) -> String {
        let perRegion = r.number("bytes_per_region").map { "\(grouped($0, decimals: 1)) B/region" } ?? "?"
        let candidates = r.number("cands_per_query").map { grouped($0, decimals: 2) } ?? "?"
        return "\(perRegion), \(candidates) candidates a query"
    }
    report.add(
        section, "geofence: index query + exact test, per query", time(geofence),
        "index \(bytes(geofence)); the entry's bounds settle all but \(geofence.fields["record_reads"] ?? "?") "
            + "candidates, for which the exact test reads \(geofence.fields["target_bytes_per_region"] ?? "?") B/region "
            + "more (ECEF centre, radius); \(pinning); \(grouped(Double(queries))) queries, median of 3 rounds")
    let notes = [
        "grid_inline": "32-byte entries with the centre and r² inline",
        "grid": "4-byte entries, then the region table (24 B/region, not counted)",
        "rtree": "SQLite R*Tree, bounding boxes, then the region table (not counted)",
        "linear": "every region, float box test first",
    ]
    for program in referencePrograms {
        guard let result = results[program] else { continue }
        let count = program == "linear" ? linearQueries : queries
        report.add(
            section, "\(program), per query", time(result),
            "\(bytes(result)); \(notes[program] ?? ""); \(grouped(Double(count))) queries")
    }
    func ratio(_ a: ReferenceResult?, _ b: ReferenceResult?) -> String {
        guard let x = a?.number("median_ns"), let y = b?.number("median_ns"), y > 0 else { return "?" }
        return "\(grouped(x / y, decimals: 2))×"
    }
    report.add(section, "geofence / grid_inline", ratio(geofence, results["grid_inline"]), "medians, same run")
    report.add(section, "geofence / grid", ratio(geofence, results["grid"]), "medians, same run")
    report.add(section, "rtree / geofence", ratio(results["rtree"], geofence), "medians, same run")
    if !mismatches.isEmpty {
        throw ReferenceMismatch(
            description: "the reference programs and geofence gave different answers: "
                + mismatches.joined(separator: "; "))
    }
}

/// `geofence-bench --reference-child N NQ [prefix=K]`: geofence's side of the comparison, measured as
/// driver.h measures the C programs, and printed as their `RESULT` line.
func runReferenceChild(n: Int, queries nq: Int, prefix: Int) {
    let circles = ReferenceScenario.regions(n)
    let points = ReferenceScenario.queries(nq)

    let rss0 = residentBytes()
    let t0 = nanoseconds()
    let index = ReferenceIndex(circles)
    let t1 = nanoseconds()
    let rss1 = residentBytes()
    let indexBytes = index.index.memoryFootprint

    // The untimed pass: the answer, the candidates, and where the C programs' test would say otherwise.
    var scratch: [NearbyRegion] = []
    scratch.reserveCapacity(256)
    var total = ReferenceHits()
    var prefixTotal = ReferenceHits()
    var candidates = 0
    var maxHits = 0
    var disagreements = 0
    var recordReads = 0
    for (i, coordinate) in points.enumerated() {
        let hits = index.hits(at: coordinate, scratch: &scratch)
        candidates += scratch.count
        recordReads += scratch.count { ReferenceIndex.settles($0) == nil }
        let approximation = ReferenceScenario.LocalApproximation(coordinate)
        let point = GeocentricPoint(coordinate)
        for candidate in scratch
        where approximation.contains(circles[Int(candidate.slot)])
            != index.contains(Int(candidate.slot), point: point, coordinate: coordinate)
        {
            disagreements += 1
        }
        total.add(hits)
        if i < prefix { prefixTotal.add(hits) }
        maxHits = max(maxHits, hits.count)
    }

    // The timer's own cost, as driver.h measures it: the median of 100 001 back-to-back readings.
    var readings = [UInt64](repeating: 0, count: 100_001)
    for i in readings.indices {
        let a = nanoseconds()
        let b = nanoseconds()
        readings[i] = b - a
    }
    readings.sort()
    let overhead = Double(readings[readings.count / 2])

    // Three rounds, each a pass timing every query (its ECEF conversion included, as the C programs include
    // leaq_init) and a pass timing them all at once.
    var medians: [Double] = []
    var p90s: [Double] = []
    var p99s: [Double] = []
    var batches: [Double] = []
    var times = [UInt64](repeating: 0, count: nq)
    var sink = 0
    for _ in 0..<3 {
        for i in 0..<nq {
            let a = nanoseconds()
            sink &+= index.hitCount(at: points[i], scratch: &scratch)
            let b = nanoseconds()
            times[i] = b - a
        }
        let b0 = nanoseconds()
        for i in 0..<nq { sink &+= index.hitCount(at: points[i], scratch: &scratch) }
        let b1 = nanoseconds()
        times.sort()
        func percentile(_ p: Double) -> Double {
            Double(times[Int(p * Double(nq - 1) + 0.5)]) - overhead
        }
        medians.append(percentile(0.5))
        p90s.append(percentile(0.9))
        p99s.append(percentile(0.99))
        batches.append(Double(b1 - b0) / Double(nq))
    }
    if sink != 6 * total.count { progress("WARNING: hit mismatch between passes") }

    func f(_ value: Double, _ decimals: Int = 1) -> String { String(format: "%.\(decimals)f", value) }
    let fields: [(String, String)] = [
        ("method", "geofence"), ("N", String(n)), ("nq", String(nq)),
        ("build_ms", f(Double(t1 - t0) / 1e6)), ("index_bytes", String(indexBytes)),
        ("bytes_per_region", f(Double(indexBytes) / Double(n), 2)),
        ("rss_delta_kb", String((rss1 - rss0) / 1024)),
        ("median_ns", f(median(medians))), ("p90_ns", f(median(p90s))), ("p99_ns", f(median(p99s))),
        ("batch_mean_ns", f(median(batches))), ("timer_ovh_ns", f(overhead)),
        ("hits_per_query", f(Double(total.count) / Double(max(1, nq)), 5)),
        ("cands_per_query", f(Double(candidates) / Double(max(1, nq)), 4)), ("max_hits", String(maxHits)),
        ("record_reads", String(recordReads)),
        ("hitsum", String(total.count)), ("hashsum", hex(total.hash)),
        ("prefix_nq", String(min(prefix, nq))), ("prefix_hitsum", String(prefixTotal.count)),
        ("prefix_hashsum", hex(prefixTotal.hash)), ("leaq_disagreements", String(disagreements)),
        ("target_bytes_per_region", String(MemoryLayout<(center: GeocentricPoint, radius: Double)>.stride)),
    ]
    print("RESULT " + fields.map { "\($0.0)=\($0.1)" }.joined(separator: " "))
}

/// Sixteen hexadecimal digits, as the C programs print `%016llx`.
private func hex(_ value: UInt64) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: 16 - digits.count) + digits
}

/// The full path of `name` in `PATH`, if it is there and executable.
private func executableInPath(_ name: String) -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    return path.split(separator: ":").lazy.map { "\($0)/\(name)" }.first { access($0, X_OK) == 0 }
}

/// Runs a program to its end; with `passOutput` its standard output goes to ours (standard error), else it is
/// returned. Its standard error is ours.
private func runProgram(_ program: String, _ arguments: [String], passOutput: Bool) throws -> (Int32, String) {
    let child = Process()
    child.executableURL = URL(fileURLWithPath: program)
    child.arguments = arguments
    let output = Pipe()
    child.standardOutput = passOutput ? FileHandle.standardError : output
    try child.run()
    let data = passOutput ? Data() : output.fileHandleForReading.readDataToEndOfFile()
    child.waitUntilExit()
    return (child.terminationStatus, String(decoding: data, as: UTF8.self))
}
