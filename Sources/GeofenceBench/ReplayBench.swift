import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

/// A fleet's gpsd-style TPV stream, end to end: `lines` lines of `subjects` vehicles driving through the
/// country, against `regionCount` regions, read from a file, decoded with `GPSDJSON.decode` and run
/// through `FixPipeline` with a real store (what `geofence run --source json:FILE` does).
func runReplay(lines: Int, subjects: Int, regions regionCount: Int, report: Report) throws {
    let section =
        "fleet replay, \(sizeName(lines)) TPV lines, \(sizeName(subjects)) vehicles, \(sizeName(regionCount)) regions"
    progress(section)
    let directory = TemporaryDirectory("replay")
    defer { directory.remove() }
    let store = try StateStore(directory: directory.path + "/state")
    try store.regions.addAll(Country.regions(regionCount, seed: 3))
    let pipeline = FixPipeline(store: store)
    try pipeline.load()

    let path = directory.path + "/fleet.jsonl"
    try writeFleet(path: path, lines: lines, subjects: subjects)

    var processed = 0
    var accepted = 0
    var events = 0
    let time = try seconds {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw POSIXError(.ENOENT) }
        defer { close(fd) }
        // As the daemon's JSON lines source hands them over: the lines already read, up to 512, a batch; one
        // commit a batch (`processForEvents(batch:)`, what `geofence run` calls).
        var reader = LineReader(fd: fd)
        var batch: [Fix] = []
        batch.reserveCapacity(512)
        while let line = try reader.next() {
            if case .tpv(let fix) = GPSDJSON.decode(line, defaultSubject: "fleet") { batch.append(fix) }
            if !batch.isEmpty && (batch.count >= 512 || !reader.hasBufferedLine) {
                events += try pipeline.processForEvents(batch: batch).count
                processed += batch.count
                batch.removeAll(keepingCapacity: true)
            }
        }
        events += try pipeline.processForEvents(batch: batch).count
        processed += batch.count
        let last = try pipeline.finish()
        events += last.events.count
        accepted = pipeline.filter.statistics.accepted
    }
    report.add(
        section, "end to end (read, decode, filter, monitor, store)", "\(grouped(Double(processed) / time)) fixes/s",
        "\(grouped(time, decimals: 1)) s; \(grouped(Double(accepted))) accepted; \(grouped(Double(events))) events "
            + "committed in \(grouped(Double(pipeline.commits))) transactions"
    )
}

/// Vehicles start at random points and drive at 8 to 30 m/s, turning a little each second; one TPV per
/// vehicle per second, the vehicles of a second interleaved as a fleet stream would be.
private func writeFleet(path: String, lines: Int, subjects: Int) throws {
    var rng = BenchRandom(seed: 11)
    var positions = (0..<subjects).map { _ in Country.randomPoint(using: &rng) }
    var headings = (0..<subjects).map { _ in Double.random(in: 0..<360, using: &rng) }
    let speeds = (0..<subjects).map { _ in Double.random(in: 8...30, using: &rng) }
    let names = (0..<subjects).map { "veh-\(String($0).leftPadded(to: 5))" }
    guard FileManager.default.createFile(atPath: path, contents: nil),
        let file = FileHandle(forWritingAtPath: path)
    else { throw POSIXError(.EACCES) }
    defer { try? file.close() }
    var buffer = ""
    buffer.reserveCapacity(1 << 20)
    let epochs = (lines + subjects - 1) / subjects
    var written = 0
    for epoch in 0..<epochs {
        let time = timestamp(secondsAfter2026: epoch)
        for v in 0..<subjects where written < lines {
            headings[v] += Double.random(in: -10...10, using: &rng)
            let step = speeds[v]
            var p = positions[v]
            let heading = headings[v] * .pi / 180
            p.latitude += step * cos(heading) / 111_200
            p.longitude += step * sin(heading) / (111_320 * cos(p.latitude * .pi / 180))
            positions[v] = p
            let eph = (Double.random(in: 3...15, using: &rng) * 10).rounded() / 10
            let lat = (p.latitude * 1e7).rounded() / 1e7
            let lon = (p.longitude * 1e7).rounded() / 1e7
            let track = (headings[v].truncatingRemainder(dividingBy: 360) + 360).truncatingRemainder(dividingBy: 360)
            buffer += """
                {"class":"TPV","device":"\(names[v])","mode":3,"time":"\(time)","lat":\(lat),"lon":\(lon),\
                "eph":\(eph),"speed":\(step),"track":\((track * 10).rounded() / 10)}

                """
            written += 1
            if buffer.utf8.count > 1 << 20 {
                file.write(Data(buffer.utf8))
                buffer.removeAll(keepingCapacity: true)
            }
        }
    }
    file.write(Data(buffer.utf8))
}

/// `2026-01-01T00:00:00.000Z` plus `seconds` (under a day).
private func timestamp(secondsAfter2026 seconds: Int) -> String {
    let h = String(seconds / 3600).leftPadded(to: 2)
    let m = String(seconds / 60 % 60).leftPadded(to: 2)
    let s = String(seconds % 60).leftPadded(to: 2)
    return "2026-01-01T\(h):\(m):\(s).000Z"
}

/// What `--metrics` adds to the fix path: the same fleet, decoded once, run through fresh pipelines with the
/// commit-latency timing on and off, alternating (off/on, then on/off, ...) so both see the same machine.
/// The monitor's publication of its counters (ten times a second, not per fix) is timed on its own.
func runMetricsCost(lines: Int, subjects: Int, regions regionCount: Int, rounds: Int, report: Report) throws {
    let section =
        "metrics cost, \(sizeName(lines)) TPV lines, \(sizeName(subjects)) vehicles, \(sizeName(regionCount)) regions"
    progress(section)
    let directory = TemporaryDirectory("metrics")
    defer { directory.remove() }
    let path = directory.path + "/fleet.jsonl"
    try writeFleet(path: path, lines: lines, subjects: subjects)
    var fixes: [Fix] = []
    fixes.reserveCapacity(lines)
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw POSIXError(.ENOENT) }
    var reader = LineReader(fd: fd)
    while let line = try reader.next() {
        if case .tpv(let fix) = GPSDJSON.decode(line, defaultSubject: "fleet") { fixes.append(fix) }
    }
    close(fd)
    let regions = Country.regions(regionCount, seed: 3)

    var cpu: [Bool: [Double]] = [false: [], true: []]
    var accepted: [Bool: Int] = [:]
    var timed = 0
    for round in 0..<rounds {
        for on in round % 2 == 0 ? [false, true] : [true, false] {
            let store = try StateStore(directory: directory.path + "/state-\(round)-\(on)")
            try store.regions.addAll(regions)
            let pipeline = FixPipeline(store: store)
            pipeline.measuresLatency = on
            try pipeline.load()
            var count = 0
            let start = threadNanoseconds()
            for fix in fixes {
                for (_, verdict) in try pipeline.process(fix).decisions { if case .accepted = verdict { count += 1 } }
            }
            for (_, verdict) in try pipeline.finish().decisions { if case .accepted = verdict { count += 1 } }
            cpu[on, default: []].append(Double(threadNanoseconds() - start) / Double(fixes.count))
            accepted[on] = count
            if on { timed = pipeline.commitLatency.count }
            try? FileManager.default.removeItem(atPath: directory.path + "/state-\(round)-\(on)")
        }
    }
    let off = median(cpu[false]!)
    let on = median(cpu[true]!)
    report.add(
        section, "engine CPU per fix, metrics off (median of \(rounds))", "\(grouped(off / 1000, decimals: 2)) µs")
    report.add(
        section, "engine CPU per fix, metrics on (median of \(rounds))", "\(grouped(on / 1000, decimals: 2)) µs",
        "\(grouped(Double(timed))) fixes timed to their commit; accepted \(accepted[true] ?? 0) = \(accepted[false] ?? 0)"
    )
    report.add(section, "on / off", String(format: "%.3f", on / off), "rounds alternated in one run")

    // The publication, as the monitor's loop does it ten times a second.
    let metrics = EngineMetrics()
    var statistics = FixFilterStatistics()
    for reason in FixRejection.allCases { statistics.rejected[reason] = 1 }
    let histogram = LatencyHistogram()
    let events = ["enter": 1, "exit": 1, "determined": 1, "dwell": 1, "source": 1]
    let publish = medianNanosecondsPerOperation(rounds: 5) {
        for _ in 0..<100_000 {
            metrics.publish {
                $0.fixes = statistics
                $0.commitLatency = histogram
                $0.events = events
                $0.vehicles += 1
            }
            metrics.beat()
        }
        return 100_000
    }
    report.add(
        section, "one publication of the counters (10 a second)", "\(grouped(publish, decimals: 0)) ns",
        String(format: "%.4f %% of a core", publish * 10 / 1e9 * 100))
}
