import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// The binary form of a partition checkpoint: exact, and refusing whatever is not one it wrote.
@Suite("partition checkpoint encoding")
struct PartitionCheckpointEncodingTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// Checkpoints of the hand-over scenario at a few points (real states: tracks, pairs, candidates).
    static func scenarioCheckpoints() -> [PartitionCheckpoint] {
        let scenario = HandOverScenario()
        var (filter, monitor) = scenario.pipeline()
        var taken: [PartitionCheckpoint] = []
        for (k, step) in scenario.steps.enumerated() {
            if k % 300 == 0 || scenario.sharpCuts.contains(k) || scenario.sharpCuts.contains(k - 1) {
                taken.append(PartitionCheckpoint(fixSequence: UInt64(k), monitor: monitor, filter: filter))
            }
            switch step {
            case .gap: monitor.beginGap()
            case .fix(let fix):
                if case .accepted(let weighted) = filter.evaluate(fix) { _ = monitor.process(weighted, now: now) }
            }
        }
        return taken
    }

    /// One vehicle, `v`, parked inside one region, with a motion track and a last accepted fix: every field
    /// at an offset the hostile tests below write to.
    static func oneVehicle() throws -> [UInt8] {
        let origin = DecisionScenarios.origin
        var monitor = RegionMonitor()
        monitor.insert(try Region(id: "r", center: origin, radius: 200), seq: 5)
        var filter = FixFilter()
        var receiver = SyntheticReceiver(subject: "v", seed: 3, start: DecisionScenarios.start)
        for _ in 0..<20 {
            if case .accepted(let w) = filter.evaluate(receiver.fix(at: origin)) { _ = monitor.process(w, now: now) }
        }
        var checkpoint = PartitionCheckpoint(fixSequence: 20, monitor: monitor, filter: filter)
        // Without the last change (flag 32: 8 bytes after the last fix), as a checkpoint written before it was kept:
        // the layout the offsets below assume. `roundTrip` and the hand-over tests write it.
        #expect(checkpoint.vehicles["v"]?.state?.lastChange != nil)
        checkpoint.vehicles["v"]?.state?.lastChange = nil
        let bytes = checkpoint.encode()
        // 36 header, 4 name, 244 state (flags, baseline, time, 153 of track, 48 of the run's track, 26 of the
        // last fix, count) + 18 of one pair, 43 of filter memory, 4 checksum. (The last fix, 26 bytes, came with
        // issue 27's inferred passes, and the run's track, 48 bytes from offset 210, with its longer bursts: the
        // offsets after each moved by its size.)
        try #require(bytes.count == 353, "the layout the offsets below assume")
        return bytes
    }

    /// `bytes` with `patch` written at `offset`, and the length and checksum made right again: what a hostile
    /// writer (or a bug) makes, which the checksum does not catch.
    static func forged(_ bytes: [UInt8], at offset: Int, _ patch: [UInt8]) -> [UInt8] {
        var out = bytes
        out.replaceSubrange(offset..<offset + patch.count, with: patch)
        return resealed(Array(out.dropLast(4)))
    }

    static func resealed(_ body: [UInt8]) -> [UInt8] {
        var out = body
        let total = UInt64(body.count + 4)
        for k in 0..<8 { out[8 + k] = UInt8(truncatingIfNeeded: total >> (8 * UInt64(k))) }
        let crc = CRC32.checksum(out)
        for k in 0..<4 { out.append(UInt8(truncatingIfNeeded: crc >> (8 * UInt32(k)))) }
        return out
    }

    /// Why `bytes` are refused; nil when they decode.
    static func refusal(_ bytes: [UInt8]) -> PartitionCheckpointError? {
        do {
            _ = try PartitionCheckpoint(decoding: bytes)
            return nil
        } catch {
            return error
        }
    }

    static func little<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        withUnsafeBytes(of: value.littleEndian) { Array($0) }
    }

    @Test("CRC-32 is the IEEE one (zlib's check value)")
    func crcCheckValue() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([]) == 0)
        // The eight-byte steps and the byte tail agree at every length.
        let bytes = (0..<64).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        for n in 0...bytes.count {
            var c: UInt32 = 0xFFFF_FFFF
            for b in bytes[..<n] {
                c ^= UInt32(b)
                for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
            }
            #expect(CRC32.checksum(Array(bytes[..<n])) == c ^ 0xFFFF_FFFF, "\(n) bytes")
        }
    }

    @Test("decode(encode(x)) == x, and encode(decode(bytes)) == bytes: every Double bit for bit")
    func roundTrip() throws {
        let checkpoints = Self.scenarioCheckpoints()
        #expect(checkpoints.contains { $0.vehicles.values.contains { $0.filter?.candidates.isEmpty == false } })
        #expect(checkpoints.contains { $0.vehicles.values.contains { $0.state?.gapPending == true } })
        #expect(checkpoints.contains { $0.vehicles.values.contains { $0.state?.refused.isEmpty == false } })
        for checkpoint in checkpoints {
            let bytes = checkpoint.encode()
            let decoded = try PartitionCheckpoint(decoding: bytes)
            #expect(decoded == checkpoint)
            #expect(decoded.encode() == bytes, "one encoding, and the same bits")
        }

        // Values no scenario makes: names in other scripts, a vehicle with one part or none, negative seqs,
        // -0, subnormals, the ends of the time range.
        let t = Date(timeIntervalSinceReferenceDate: -0.0)
        let extreme = PartitionCheckpoint(
            fixSequence: .max, regionSeq: .min,
            vehicles: [
                "é": .init(state: nil, filter: .init()),
                "e\u{301}x": .init(state: nil, filter: nil),
                "🚚 7": .init(
                    state: VehicleState(
                        subject: "🚚 7", lastFixTime: Date(timeIntervalSince1970: -62_167_219_200), baselineSeq: -3,
                        gapPending: true, motion: nil,
                        regions: [
                            .min: PairRecord(state: .unknown), -1: PairRecord(state: .outside, since: t),
                            .max: PairRecord(state: .inside, since: t, dwellFired: true),
                        ]),
                    filter: .init(
                        last: nil,
                        candidates: [
                            .init(
                                time: Date(timeIntervalSince1970: 253_402_300_799.999),
                                point: GeocentricPoint(
                                    x: -0.0, y: .leastNonzeroMagnitude, z: -.greatestFiniteMagnitude),
                                accuracy: 0)
                        ])),
            ])
        let bytes = extreme.encode()
        let decoded = try PartitionCheckpoint(decoding: bytes)
        #expect(decoded == extreme && decoded.encode() == bytes)
        #expect(decoded.vehicles["🚚 7"]?.filter?.candidates.first?.point.x.sign == .minus, "-0 stays -0")
        // An empty partition.
        let empty = PartitionCheckpoint(fixSequence: 0, regionSeq: 0, vehicles: [:])
        #expect(try PartitionCheckpoint(decoding: empty.encode()) == empty)
    }

    @Test("every truncation of a valid encoding is refused as truncated; extra bytes are refused too")
    func truncations() throws {
        let bytes = try #require(Self.scenarioCheckpoints().last).encode()
        #expect(bytes.count > 900)
        for n in 0..<bytes.count {
            #expect(throws: PartitionCheckpointError.truncated(count: n, needed: UInt64(n < 40 ? 40 : bytes.count))) {
                try PartitionCheckpoint(decoding: Array(bytes[..<n]))
            }
        }
        #expect(throws: PartitionCheckpointError.trailingBytes(count: bytes.count + 1, declared: UInt64(bytes.count))) {
            try PartitionCheckpoint(decoding: bytes + [0])
        }
    }

    @Test("any flipped byte is refused, and the checksum catches every flip after the header's first fields")
    func byteFlips() throws {
        let bytes = try #require(Self.scenarioCheckpoints().last).encode()
        var rng = SeededGenerator(seed: 26)
        for offset in bytes.indices {
            var flipped = bytes
            flipped[offset] ^= UInt8.random(in: 1...255, using: &rng)
            #expect(throws: PartitionCheckpointError.self) { try PartitionCheckpoint(decoding: flipped) }
            if offset >= 16, let error = Self.refusal(flipped) {
                guard case .checksumMismatch = error else {
                    Issue.record("byte \(offset): \(error)")
                    continue
                }
            }
        }
        // Several bytes at once, anywhere.
        for _ in 0..<2000 {
            var flipped = bytes
            for _ in 0..<Int.random(in: 2...16, using: &rng) {
                flipped[Int.random(in: 0..<bytes.count, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng)
            }
            if flipped != bytes {
                #expect(throws: PartitionCheckpointError.self) { try PartitionCheckpoint(decoding: flipped) }
            }
        }
    }

    @Test("forged fields with a matching checksum are refused, naming the field, before any allocation")
    func hostileFields() throws {
        let bytes = try Self.oneVehicle()
        #expect(try PartitionCheckpoint(decoding: bytes).vehicles["v"]?.state?.regions.count == 1)
        let nan = Self.little(Double.nan.bitPattern)
        let cases: [(offset: Int, patch: [UInt8], field: String)] = [
            (32, Self.little(UInt32.max), "vehicle count"),
            (36, Self.little(UInt16.max), "subject"),
            (38, [0xFF], "subject"),
            (39, [4], "parts"),
            (40, [0x80], "state flags"),
            (40, [1 | 8 | 16], "state flags"),
            (
                49, Self.little(Date(timeIntervalSince1970: 1e300).timeIntervalSinceReferenceDate.bitPattern),
                "last fix time"
            ),
            (49, nan, "last fix time"),
            (57, Self.little(Double.infinity.bitPattern), "track position"),
            (105, nan, "steady covariance"),
            (153, Self.little(2.0.bitPattern), "steady weight"),
            (161, Self.little(Double(-1e20).bitPattern), "track time"),
            (169, [255], "run"),
            (169, [MotionConsistency.resyncRun], "run"),
            (210, Self.little(Double.infinity.bitPattern), "run velocity"),
            (234, nan, "run covariance"),
            (258, [8], "last fix flags"),
            (259, [4], "last fix mode"),
            (260, Self.little(100.0.bitPattern), "last fix latitude"),
            (268, nan, "last fix longitude"),
            (276, Self.little((-1.0).bitPattern), "last fix accuracy"),
            (284, Self.little(UInt32.max), "pair count"),
            (296, [3], "pair state"),
            (297, [4], "pair flags"),
            (306, [2], "filter flags"),
            (339, Self.little((-1.0).bitPattern), "filter's last fix"),
            (347, Self.little(UInt16.max), "candidate count"),
            (6, [1, 0], "reserved"),
        ]
        for (offset, patch, field) in cases {
            guard let error = Self.refusal(Self.forged(bytes, at: offset, patch)) else {
                Issue.record("byte \(offset) = \(patch) was taken")
                continue
            }
            guard case .invalid(let named, _, _) = error else {
                Issue.record("byte \(offset): \(error)")
                continue
            }
            #expect(named == field, "byte \(offset)")
            #expect(!error.description.contains("\n") && error.description.hasPrefix("checkpoint refused: "))
        }
        // Two vehicles in the wrong order, or the same one twice.
        let body = Array(bytes[36..<349])
        var twice = Array(bytes[..<36]) + body + body
        twice.replaceSubrange(32..<36, with: Self.little(UInt32(2)))
        #expect(
            throws: PartitionCheckpointError.invalid(
                field: "subject", offset: 349, reason: "is out of order or repeated")
        ) {
            try PartitionCheckpoint(decoding: Self.resealed(twice))
        }
        #expect(throws: PartitionCheckpointError.unsupportedVersion(2)) {
            try PartitionCheckpoint(decoding: Self.forged(bytes, at: 4, [2, 0]))
        }
        #expect(throws: PartitionCheckpointError.notACheckpoint) {
            try PartitionCheckpoint(decoding: Array("GFPX".utf8) + Array(bytes[4...]))
        }
    }

    @Test(
        "a run's refused fixes (flag 64) load and are written back the same; a count not the run's, times out of order or not ending at the run's, or no motion track, are refused"
    )
    func refusedFixes() throws {
        let bytes = try Self.oneVehicle()
        #expect(bytes[40] & 64 == 0)
        // Before the pair count (at 284): a count, then each fix's time and the fix as the last fix is written. The
        // run's byte is at 169, its time (seconds since 1970) at 194, the track's last fix time at 161.
        func entry(_ seconds: Double, speed: Double?) -> [UInt8] {
            var out = Self.little(seconds.bitPattern) + [speed != nil ? 1 : 0, 3]
            out += Self.little(DecisionScenarios.origin.latitude.bitPattern)
            out += Self.little(DecisionScenarios.origin.longitude.bitPattern) + Self.little(4.5.bitPattern)
            if let speed { out += Self.little(speed.bitPattern) }
            return out
        }
        let at = DecisionScenarios.start.timeIntervalSinceReferenceDate + 20
        func with(
            count: UInt8, entries: [[UInt8]], run: UInt8, runTime: Double, flags: UInt8 = bytes[40] | 64
        ) -> [UInt8] {
            var body = Array(bytes.dropLast(4))
            body[40] = flags
            body[169] = run
            body.replaceSubrange(194..<202, with: Self.little(runTime.bitPattern))
            body.insert(contentsOf: [count] + entries.joined(), at: 284)
            return Self.resealed(body)
        }
        let last = Date(timeIntervalSinceReferenceDate: at + 1).timeIntervalSince1970
        let two = [entry(at, speed: nil), entry(at + 1, speed: 2.5)]
        let good = with(count: 2, entries: two, run: 2, runTime: last)
        let decoded = try PartitionCheckpoint(decoding: good)
        let refused = try #require(decoded.vehicles["v"]?.state?.refused)
        #expect(refused.map(\.time.timeIntervalSinceReferenceDate) == [at, at + 1])
        #expect(refused.map(\.fix.speed) == [nil, 2.5])
        #expect(refused.allSatisfy { $0.subject == "v" && $0.accuracy == 4.5 && $0.fix.horizontalAccuracy == 4.5 })
        #expect(decoded.encode() == good, "written back the same")
        #expect(Self.refusal(good) == nil)
        // A count other than the run's (0, one more, one fewer), fixes out of order, a last fix not at the run's
        // time, flag 64 without the motion track.
        for bad in [
            with(count: 0, entries: [], run: 2, runTime: last),
            with(count: 2, entries: two, run: 3, runTime: last),
            with(count: 1, entries: [two[1]], run: 2, runTime: last),
            with(count: 2, entries: [two[1], two[0]], run: 2, runTime: last),
            with(count: 2, entries: two, run: 2, runTime: last + 1),
            with(count: 2, entries: two, run: 2, runTime: last, flags: (bytes[40] & ~20) | 64),
        ] {
            #expect(Self.refusal(bad) != nil)
        }
        let noTrack = Self.refusal(with(count: 2, entries: two, run: 2, runTime: last, flags: (bytes[40] & ~20) | 64))
        #expect(noTrack.map { "\($0)" }?.contains("refused fixes without the motion track") == true)
    }

    @Test(
        "where a pass may start across the last fix (flag 128) loads and is written back the same; one not before the last fix, or without it, is refused"
    )
    func passAnchor() throws {
        let bytes = try Self.oneVehicle()
        #expect(bytes[40] & 128 == 0 && bytes[40] & 8 != 0)
        // The last fix time (seconds since 2001) at 49; the anchor goes before the pair count (at 284): its time,
        // then its fix as the last fix is written (speed and course, mode 3).
        let last = Double(bitPattern: bytes[49..<57].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
        func entry(_ seconds: Double) -> [UInt8] {
            var out = Self.little(seconds.bitPattern) + [3, 3]
            out += Self.little(DecisionScenarios.origin.latitude.bitPattern)
            out += Self.little(DecisionScenarios.origin.longitude.bitPattern) + Self.little(4.5.bitPattern)
            return out + Self.little(12.5.bitPattern) + Self.little(90.0.bitPattern)
        }
        func with(_ entry: [UInt8], flags: UInt8 = bytes[40] | 128) -> [UInt8] {
            var body = Array(bytes.dropLast(4))
            body[40] = flags
            body.insert(contentsOf: entry, at: 284)
            return Self.resealed(body)
        }
        let good = with(entry(last - 3))
        let decoded = try PartitionCheckpoint(decoding: good)
        let anchor = try #require(decoded.vehicles["v"]?.state?.passAnchor)
        #expect(anchor.time.timeIntervalSinceReferenceDate == last - 3)
        #expect(anchor.fix.speed == 12.5 && anchor.fix.course == 90 && anchor.fix.accuracy == 4.5)
        #expect(decoded.encode() == good, "written back the same")
        // At or after the last fix; without the last fix.
        for bad in [with(entry(last)), with(entry(last + 1)), with(entry(last - 3), flags: (bytes[40] & ~8) | 128)] {
            #expect(Self.refusal(bad) != nil)
        }
        let alone = Self.refusal(with(entry(last - 3), flags: (bytes[40] & ~8) | 128))
        #expect(alone.map { "\($0)" }?.contains("a pass anchor without the last fix") == true)
    }

    @Test("a fix with a negative speed or a course not a number, from a library caller, leaves the checkpoint readable")
    func unreadableSpeedLeftOut() throws {
        // The reader refuses a negative speed (and a course not finite): written as it was, one such fix made the
        // whole partition's checkpoint unreadable. gpsd's TPV with a negative speed now gives none.
        var monitor = RegionMonitor()
        monitor.insert(try Region(id: "r", center: DecisionScenarios.origin, radius: 200), seq: 1)
        let fix = Fix(
            subject: "v", time: DecisionScenarios.start, mode: .threeD, latitude: DecisionScenarios.origin.latitude,
            longitude: DecisionScenarios.origin.longitude, horizontalAccuracy: 5, speed: -1, course: .nan)
        var filter = FixFilter()
        guard case .accepted(let weighted) = filter.evaluate(fix) else {
            Issue.record("the fix is refused")
            return
        }
        _ = monitor.process(weighted, now: Self.now)
        let checkpoint = PartitionCheckpoint(fixSequence: 1, monitor: monitor, filter: filter)
        let decoded = try PartitionCheckpoint(decoding: checkpoint.encode())
        let last = try #require(decoded.vehicles["v"]?.state?.lastFix)
        #expect(last.speed == nil && last.course == nil)
        // Both readers: the in-place scan of the common line, and the strict one (an escaped key).
        for line in [
            #"{"class":"TPV","device":"x","mode":3,"time":"2026-12-05T08:00:00Z","lat":52,"lon":13,"speed":-1}"#,
            #"{"class":"TPV","device":"x","mode":3,"time":"2026-12-05T08:00:00Z","lat":52,"lon":13,"spe\u0065d":-1}"#,
        ] {
            guard case .tpv(let parsed) = GPSDJSON.decode(Array(line.utf8)) else {
                Issue.record("not a TPV: \(line)")
                continue
            }
            #expect(parsed.speed == nil, "\(line)")
        }
    }

    @Test("a run's byte with 128 (every fix of the run within the gate) loads, and is written back the same")
    func runWithinGate() throws {
        // 169 is the run's byte (the hostile cases refuse 255 and `resyncRun` there). A checkpoint written
        // before the bit existed never has it: its run is held to the full `resyncRun`.
        let forged = Self.forged(try Self.oneVehicle(), at: 169, [128 | 3])
        let decoded = try PartitionCheckpoint(decoding: forged)
        #expect(decoded.encode() == forged)
        #expect(Self.refusal(Self.forged(forged, at: 169, [128 | MotionConsistency.resyncRun])) != nil)
    }

    @Test("a checkpoint written before the run had its own track (no flag 16) still loads, its run's track afresh")
    func oldLayoutWithoutRunTrack() throws {
        let bytes = try Self.oneVehicle()
        #expect(bytes[40] & 16 != 0)
        // The layout before: flag 16 clear, the run's track (48 bytes from offset 210) absent.
        var old = Array(bytes.dropLast(4))
        old[40] &= ~16
        old.removeSubrange(210..<258)
        let loaded = try PartitionCheckpoint(decoding: Self.resealed(old))
        #expect(loaded.vehicles["v"]?.state?.regions.count == 1)
        // Written again, it is the same checkpoint but for the run's track: a velocity of 0 and the
        // uncertainty of a run's first fix (its accuracy, at 202, halved; (60 m/s / 3)² for the velocity).
        let again = loaded.encode()
        #expect(again.count == bytes.count)
        #expect(Array(again[0..<210]) == Array(bytes[0..<210]))
        #expect(Array(again[258..<349]) == Array(bytes[258..<349]))
        func f64(_ b: [UInt8], _ at: Int) -> Double {
            Double(bitPattern: (0..<8).reduce(UInt64(0)) { $0 | UInt64(b[at + $1]) << (8 * UInt64($1)) })
        }
        let sigma = max(1, f64(bytes, 202) / 2)
        #expect((0..<3).map { f64(again, 210 + 8 * $0) } == [0, 0, 0])
        #expect([f64(again, 234), f64(again, 242), f64(again, 250)] == [sigma * sigma, 0, 400])
        // And the vehicle runs on from it: still inside, its next fixes taken in.
        var monitor = RegionMonitor()
        monitor.insert(try Region(id: "r", center: DecisionScenarios.origin, radius: 200), seq: 5)
        var filter = FixFilter()
        try loaded.restore(into: &monitor, filter: &filter)
        var receiver = SyntheticReceiver(subject: "v", seed: 4, start: DecisionScenarios.start.addingTimeInterval(20))
        for _ in 0..<5 {
            if case .accepted(let w) = filter.evaluate(receiver.fix(at: DecisionScenarios.origin)) {
                #expect(monitor.process(w, now: Self.now).events.isEmpty)
            }
        }
        #expect(monitor.state(subject: "v", regionID: "r") == .inside)
        #expect(monitor.outliers == 0)
    }

    @Test("random bytes, and valid checkpoints forged at random, never trap; what decodes restores and runs")
    func fuzz() throws {
        var rng = SeededGenerator(seed: 2626)
        for _ in 0..<20_000 {
            let count = Int.random(in: 0...600, using: &rng)
            var bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
            // Half of them with the magic and version, so that more get past the first checks.
            if count >= 8, Bool.random(using: &rng) {
                bytes.replaceSubrange(0..<8, with: Array("GFPC".utf8) + [1, 0, 0, 0])
            }
            #expect(throws: PartitionCheckpointError.self) { try PartitionCheckpoint(decoding: bytes) }
        }

        // Forged: a real checkpoint with bytes changed and the checksum made right. Whatever decodes must be
        // a state the engine can run on: restore it and feed it the scenario's next fixes.
        let scenario = HandOverScenario()
        let source = try #require(Self.scenarioCheckpoints().dropFirst(3).first)
        let bytes = source.encode()
        var decodedCount = 0
        for _ in 0..<3000 {
            var body = Array(bytes.dropLast(4))
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                body[Int.random(in: 16..<body.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            }
            guard let forged = try? PartitionCheckpoint(decoding: Self.resealed(body)) else { continue }
            decodedCount += 1
            var (filter, monitor) = scenario.pipeline()
            monitor.noteRegionSeq(forged.regionSeq)
            try forged.restore(into: &monitor, filter: &filter)
            for case .fix(let fix) in scenario.steps.prefix(Int(source.fixSequence) + 60).dropFirst(
                Int(source.fixSequence))
            {
                if case .accepted(let w) = filter.evaluate(fix) { _ = monitor.process(w, now: Self.now) }
            }
            _ = monitor.evict(lastFixBefore: Self.now)
        }
        #expect(decodedCount > 100, "enough forged checkpoints got through to be run")
    }
}
