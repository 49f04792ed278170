import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The fleet source read from a real file: unusable lines counted by reason, the first of each kind logged
/// and the rest not (the issue's 21 malformed lines gave no log line and no count at all).
@Suite struct JSONLineSourceTests {
    @Test func unusableLinesAreCountedByReasonAndTheFirstOfEachKindIsLogged() async throws {
        let dir = try TemporaryDirectory("geofence-json-source")
        defer { dir.remove() }
        let good = #"{"class":"TPV","device":"t","mode":3,"time":"2026-11-30T10:00:01.000Z","lat":48.85,"lon":2.35}"#
        let lines =
            Array(repeating: #"{"class":"TPV","device":"t","mode":3,"latitude":48.85,"longitude":2.35}"#, count: 21)
            + Array(repeating: "not json", count: 3) + [#"{"class":"SKY"}"#, #"{"class":"TPV","device":7,"mode":3}"#]
            + [#"{"class":"TPV","mode":1}"#, good]
        let path = dir.file("fleet.jsonl")
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)

        let logged = Mutex<[String]>([])
        let source = JSONLineSource(
            path: path, logger: Logger(minimum: .debug) { line in logged.withLock { $0.append(line) } })
        source.start()
        var fixes = 0
        for await report in source.reports {
            if case .fixes(let batch) = report { fixes += batch.count }
        }
        await source.stop()

        let status = try #require(source.status)
        #expect(status.lines == 28)
        #expect(status.usableFixes == 1)
        #expect(status.ignored == 1)
        #expect(status.unusable == ["no-position": 21, "not-json": 3, "wrong-type": 1, "no-fix": 1])
        #expect(fixes == 23, "TPVs go on to the filter, which counts its own refusals; malformed lines do not")
        let warnings = logged.withLock { $0 }.filter { $0.contains("skipped a line") }
        #expect(warnings.count == 4, "\(warnings)")
        #expect(warnings.first?.contains("(no-position)") == true)
    }

    /// A fleet's fix from the future was refused only past a fixed 60 s, where gpsd's was past the filter's
    /// `maxFutureSkew` (5 s): a fix 59 s ahead was taken from a JSON stream and refused from gpsd. A fix at
    /// (0, 0) or without a time counted as a usable fix (the stream `receiving`) though the filter refuses it.
    @Test("a fleet fix is judged as the filter judges: 59 s ahead is from the future, (0, 0) is no usable fix")
    func fleetFixesAreJudgedAsTheFilterJudges() async throws {
        let dir = try TemporaryDirectory("geofence-json-judge")
        defer { dir.remove() }
        func line(_ time: Date?, lat: Double = 48.85, lon: Double = 2.35) -> String {
            let stamp = time.map { #","time":"\#(TimestampParser.format($0))""# } ?? ""
            return #"{"class":"TPV","device":"t","mode":3\#(stamp),"lat":\#(lat),"lon":\#(lon)}"#
        }
        let now = Date()
        let lines = [
            line(now.addingTimeInterval(59)), line(now.addingTimeInterval(30)), line(now, lat: 0, lon: 0), line(nil),
            line(now.addingTimeInterval(-3600)), line(now),
        ]
        let path = dir.file("fleet.jsonl")
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)

        func read(_ filter: FixFilterConfiguration) async throws -> (SourceStatus, [Fix]) {
            let source = JSONLineSource(path: path, filter: filter)
            source.start()
            var fixes: [Fix] = []
            for await report in source.reports {
                if case .fixes(let batch) = report { fixes += batch }
            }
            await source.stop()
            return (try #require(source.status), fixes)
        }
        let (status, fixes) = try await read(FixFilterConfiguration())
        #expect(status.unusable == ["future-time": 2, "null-island": 1, "no-time": 1], "\(status.unusable)")
        #expect(status.usableFixes == 2, "an hour-old fix is a fleet's backlog, and usable")
        #expect(fixes.count == 4, "a fix from the future is not passed on; the others go on to the filter")
        #expect(fixes.allSatisfy { $0.receivedAt == nil }, "the filter judges a fleet's fixes by their own times")
        // The limit is the filter's one setting.
        var wide = FixFilterConfiguration()
        wide.maxFutureSkew = 120
        let (widened, passed) = try await read(wide)
        #expect(widened.unusable["future-time"] == nil)
        #expect(widened.usableFixes == 4)
        #expect(passed.count == 6)
    }

    static func tpv(_ i: Int) -> String {
        #"{"class":"TPV","device":"t","mode":3,"time":"2026-11-30T10:00:01.000Z","lat":48.85,"lon":2.35,"alt":"#
            + "\(i)}"
    }

    /// A private directory holding a FIFO.
    static func fifo() throws -> (TemporaryDirectory, String) {
        let dir = try TemporaryDirectory("geofence-json-fifo")
        let path = dir.file("fleet.fifo")
        guard mkfifo(path, 0o600) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return (dir, path)
    }

    @Test("stop() on a FIFO no writer ever opened returns at once, and leaves no reader behind")
    func stopOnIdleFIFO() async throws {
        let (dir, path) = try Self.fifo()
        defer { dir.remove() }
        let source = JSONLineSource(path: path)
        source.start()
        // Time for the reader to block in `open` of the FIFO: a state no signal shows from outside.
        try await Task.sleep(for: .milliseconds(200))
        let began = Date()
        await source.stop()
        #expect(Date().timeIntervalSince(began) < 2, "stop waited \(Date().timeIntervalSince(began)) s")
        // Not a wait on the condition below: probing it opens a writer, which the reader (if the defect left one)
        // would see.
        try await Task.sleep(for: .milliseconds(100))
        // A writer that does not wait finds no reader (ENXIO): the source's reader is gone, not blocked in
        // `open`, where it would take the next producer's lines for nobody.
        let writer = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        let failure = errno
        if writer >= 0 { close(writer) }
        #expect(writer < 0 && failure == ENXIO, "a reader still has the FIFO open")
    }

    @Test("stop() hands over every whole line already read from a FIFO, though the consumer was behind")
    func stopKeepsWhatWasRead() async throws {
        let (dir, path) = try Self.fifo()
        defer { dir.remove() }
        let source = JSONLineSource(path: path)
        // Small batches, so that the reader is held back (16 reports waiting) with lines read and not yet sent.
        source.maximumBatch = 4
        source.start()
        let writer = open(path, O_WRONLY | O_CLOEXEC)
        #expect(writer >= 0)
        defer { close(writer) }
        let written = 2_000
        let text = Array((0..<written).map { Self.tpv($0) + "\n" }.joined().utf8)
        // Writes what the FIFO takes without blocking; the rest is never sent.
        _ = fcntl(writer, F_SETFL, O_NONBLOCK)
        let sent = text.withUnsafeBytes { write(writer, $0.baseAddress, $0.count) }
        #expect(sent > 0)
        // Time for the reader to take what it can and be held back by the consumer: no signal shows it.
        try await Task.sleep(for: .milliseconds(300))
        // The consumer took nothing so far; now the engine stops.
        let stopping = Task { await source.stop() }
        var received = 0
        for await report in source.reports {
            if case .fixes(let batch) = report { received += batch.count }
        }
        await stopping.value
        // What the reader had not taken is still in the FIFO: read it here.
        let reader = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        defer { close(reader) }
        var rest: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(reader, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            rest += chunk[0..<n]
        }
        // Only the line the reader had the start of may be lost (its end was still in the FIFO).
        let unread = rest.split(separator: 10).count { String(decoding: $0, as: UTF8.self).hasPrefix("{") }
        let lineCount = text[0..<sent].count(where: { $0 == 10 })
        #expect(received + unread >= lineCount - 1, "received \(received), left \(unread), written \(lineCount)")
        #expect(received > 16 * 4, "the reader had read ahead of the consumer")
    }
}
