import Foundation
import GeofenceCore
import GeofenceGPSD
import GeofenceTestSupport
import Testing

/// Real receiver recordings through a real gpsd and `GeofenceGPSD`, checked against the JSON
/// gpsd 3.22 itself produced for them (the `.chk` files, made with `gpsfake -1 -p`).
///
/// What is compared, and why it is all of it: fed one sentence per UDP datagram, gpsd emits
/// exactly the TPV sequence of the .chk file, report for report (checked by experiment for
/// all five recordings), so every TPV is compared, not just one per epoch. The per-epoch
/// view the filter will see is checked too. Within an epoch gpsd refines its fix as more
/// sentences arrive (RMC gives a first TPV, GGA/GSA/GST add altitude and error estimates, and
/// some receivers' RMC and GGA disagree on the position: 114 of bundg_zeus_9's 148 epochs),
/// so the *last* TPV of an epoch is the complete one; a filter that keeps the first TPV of
/// each fix time gets the RMC-only values.
@Suite(
    .enabled(if: GPSDHarness.isAvailable, "\(GPSDHarness.unavailableReason)"),
    .enabled(if: Recording.directory != nil, "no recordings: \(Recording.expectedDirectory.path) is absent")
)
struct RecordingReplayTests {
    @Test(arguments: Recording.names)
    func replayMatchesGPSDsOwnOutput(name: String) async throws {
        let recording = try Recording(name: name)
        let harness = try await GPSDHarness()
        defer { harness.stop() }
        let configuration = GPSDSource.Configuration(address: harness.address)

        let fixes = try await withSource(configuration) { _, recorder in
            try await recorder.wait(for: "the device list") { reports in
                reports.contains { if case .capabilities = $0 { return true } else { return false } }
            }
            // Flow control instead of a fixed pace: never more than `window` sentences ahead of
            // what gpsd has visibly processed, so a busy machine can't overflow the UDP buffer.
            let window = 48
            for (index, sentence) in recording.sentences.enumerated() {
                if index >= window, index % 8 == 0 {
                    let needed = recording.tpvsBeforeSentence[index - window]
                    try await recorder.wait(for: "\(needed) TPVs (sentence \(index))", timeout: .seconds(15)) { _ in
                        recorder.fixes.count >= needed
                    }
                }
                try harness.send(bytes: sentence + [13, 10])
            }
            let total = recording.expected.count
            try await recorder.wait(for: "all \(total) TPVs", timeout: .seconds(15)) { _ in
                recorder.fixes.count >= total
            }
            try await Task.sleep(for: .milliseconds(150))  // anything extra would show up here
            return recorder.fixes
        }

        #expect(fixes.count == recording.expected.count, "TPV count")
        var mismatches = 0
        for (index, (fix, expected)) in zip(fixes, recording.expected).enumerated() {
            let problems = expected.differences(from: fix)
            if !problems.isEmpty, mismatches < 5 {
                Issue.record("\(name) TPV #\(index): \(problems.joined(separator: "; "))")
            }
            if !problems.isEmpty { mismatches += 1 }
            #expect(fix.subject == harness.devicePath)
            #expect(fix.receivedAt != nil)
        }
        #expect(mismatches == 0, "\(mismatches) TPVs differ from gpsd's own output")

        // One fix per epoch (consecutive TPVs with the same time), keeping the last, most complete one.
        let epochs = Recording.lastOfEachEpoch(fixes.map { ($0.time, $0) })
        let expectedEpochs = Recording.lastOfEachEpoch(recording.expected.map { ($0.time, $0) })
        #expect(epochs.count == expectedEpochs.count, "epochs")
        for (fix, expected) in zip(epochs, expectedEpochs) {
            #expect(expected.differences(from: fix).isEmpty, "epoch at \(String(describing: fix.time))")
        }
    }
}

/// A recording and what gpsd made of it.
struct Recording {
    /// `<repo>/../shared/fixtures/gpsd`, found from this file (through the symlinks of a scratch package).
    static let expectedDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .resolvingSymlinksInPath()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("shared/fixtures/gpsd", isDirectory: true)

    static var directory: URL? {
        FileManager.default.fileExists(atPath: expectedDirectory.path) ? expectedDirectory : nil
    }

    static var names: [String] {
        guard let directory else { return [] }
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return files.filter { $0.hasSuffix(".log") && files.contains($0 + ".chk") }.sorted()
    }

    /// The `$` lines of the log, as sent (without line ending).
    var sentences: [[UInt8]]
    var expected: [ExpectedTPV]
    /// For each sentence, how many TPVs gpsd had sent before echoing it (the .chk interleaves them).
    var tpvsBeforeSentence: [Int]

    init(name: String) throws {
        guard let directory = Self.directory else { throw CocoaError(.fileNoSuchFile) }
        let log = try Data(contentsOf: directory.appendingPathComponent(name))
        let check = try Data(contentsOf: directory.appendingPathComponent(name + ".chk"))
        sentences = Self.lines(log).filter { $0.first == UInt8(ascii: "$") }
        expected = []
        tpvsBeforeSentence = []
        for line in Self.lines(check) {
            if line.first == UInt8(ascii: "$") {
                tpvsBeforeSentence.append(expected.count)
            } else if line.starts(with: Array(#"{"class":"TPV""#.utf8)) {
                expected.append(try ExpectedTPV(json: Data(line)))
            }
        }
        precondition(tpvsBeforeSentence.count == sentences.count, "\(name): .chk does not echo every sentence")
    }

    private static func lines(_ data: Data) -> [[UInt8]] {
        data.split(separator: UInt8(ascii: "\n")).map { line in
            Array(line.last == 13 ? line.dropLast() : line[...])
        }
    }

    static func lastOfEachEpoch<Item>(_ items: [(Date?, Item)]) -> [Item] {
        var result: [Item] = []
        var lastTime: Date?
        for (time, item) in items {
            guard let time else { continue }
            if time == lastTime { result[result.count - 1] = item } else { result.append(item) }
            lastTime = time
        }
        return result
    }
}

/// One TPV line of a .chk file.
struct ExpectedTPV {
    var mode: Int
    var time: Date?
    var latitude, longitude, altitudeHAE, altitudeMSL: Double?
    var eph, epx, epy, epv, speed, track: Double?

    init(json: Data) throws {
        let object = try JSONSerialization.jsonObject(with: json) as? [String: Any] ?? [:]
        func number(_ key: String) -> Double? { (object[key] as? NSNumber)?.doubleValue }
        mode = (object["mode"] as? NSNumber)?.intValue ?? -1
        time = (object["time"] as? String).flatMap(Self.parseTime)
        latitude = number("lat")
        longitude = number("lon")
        altitudeHAE = number("altHAE")
        altitudeMSL = number("altMSL")
        eph = number("eph")
        epx = number("epx")
        epy = number("epy")
        epv = number("epv")
        speed = number("speed")
        track = number("track")
    }

    /// gpsd writes `2029-07-25T15:25:05.000Z`.
    private static func parseTime(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }

    /// Differences from a decoded fix: mode exact, time to 1 µs, degrees to 1e-9, metres to 1e-3.
    func differences(from fix: Fix) -> [String] {
        var problems: [String] = []
        func compare(_ what: String, _ got: Double?, _ want: Double?, _ tolerance: Double) {
            switch (got, want) {
            case (nil, nil): break
            case (let got?, let want?) where abs(got - want) <= tolerance: break
            default: problems.append("\(what) \(String(describing: got)) != \(String(describing: want))")
            }
        }
        if fix.mode.rawValue != mode { problems.append("mode \(fix.mode.rawValue) != \(mode)") }
        compare("time", fix.time?.timeIntervalSince1970, time?.timeIntervalSince1970, 1e-6)
        compare("lat", fix.latitude, latitude, 1e-9)
        compare("lon", fix.longitude, longitude, 1e-9)
        compare("altHAE", fix.altitudeHAE, altitudeHAE, 1e-3)
        compare("altMSL", fix.altitudeMSL, altitudeMSL, 1e-3)
        compare("accuracy", fix.horizontalAccuracy, Fix.horizontalAccuracy(eph: eph, epx: epx, epy: epy), 1e-3)
        compare("epv", fix.verticalAccuracy, epv, 1e-3)
        compare("speed", fix.speed, speed, 1e-3)
        compare("course", fix.course, track, 1e-3)
        return problems
    }
}
