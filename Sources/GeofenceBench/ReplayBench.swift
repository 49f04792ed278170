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
        var reader = LineReader(fd: fd)
        while let line = try reader.next() {
            guard case .tpv(let fix) = GPSDJSON.decode(line, defaultSubject: "fleet") else { continue }
            let step = try pipeline.process(fix)
            processed += 1
            for (_, verdict) in step.decisions { if case .accepted = verdict { accepted += 1 } }
            events += step.events.count
        }
        let last = try pipeline.finish()
        for (_, verdict) in last.decisions { if case .accepted = verdict { accepted += 1 } }
        events += last.events.count
    }
    report.add(
        section, "end to end (read, decode, filter, monitor, store)", "\(grouped(Double(processed) / time)) fixes/s",
        "\(grouped(time, decimals: 1)) s; \(grouped(Double(accepted))) accepted; \(grouped(Double(events))) events committed"
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
