import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceTestSupport
import Synchronization
import Testing

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
}
