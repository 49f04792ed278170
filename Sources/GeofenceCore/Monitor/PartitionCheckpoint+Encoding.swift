import Foundation

/// The binary form of a `PartitionCheckpoint`, version 1. Little-endian throughout; every Double is its bit
/// pattern (so covariances and times come back bit for bit), every date its seconds since 2001 (what a
/// `Date` holds: the seconds since 1970 would round).
///
///     header   magic "GFPC" · version u16 · reserved u16 (0) · total length u64 · fix sequence u64 ·
///              region seq i64 · vehicle count u32                                             (36 bytes)
///     vehicle  subject length u16 · subject (UTF-8) · parts u8 (+1: monitor state, +2: filter memory)
///              [monitor state] flags u8 (1: last fix time, 2: gap pending, 4: motion track, 8: last fix,
///                 16: run's track, 32: last change, 64: refused fixes, 128: pass anchor) · baseline i64 · [last fix time f64] · [track: position 3×f64 · velocity
///                 3×f64 · steady pp pv vv · manoeuvre pp pv vv · steady weight · time · run u8 (+128: every
///                 fix of the run within the gate) · run's last
///                 3×f64 · run time · run accuracy · [run's track: velocity 3×f64 · pp pv vv]] · [last fix: flags u8 (1: speed, 2: course, 4: accuracy estimated) · mode u8 ·
///                 latitude · longitude · accuracy · [speed] · [course]] · [last change f64] · [refused: count u8 (the
///                 run's) · each: time f64 · fix (as the last fix)] · [pass anchor (128): time f64 · fix (as the last
///                 fix)] · pair count u32 · pairs: region seq i64 · state u8 (0 unknown, 1 inside,
///                 2 outside) · flags u8 (1: since, 2: dwell fired) · [since f64]
///              [filter memory] flags u8 (1: last) · [last: time · point 3×f64 · accuracy] · candidate count
///                 u16 · candidates (as last)
///     trailer  CRC-32 (IEEE) of every byte before it, u32
///
/// Vehicles are in the byte order of their subjects, pairs in the order of their region seqs, so one state
/// has one encoding. Decoding checks the length and the checksum before it reads anything, then every count
/// against the bytes left before it allocates, and every number against what a state can hold (a time within
/// the years 0000-9999, a finite covariance, a run shorter than the motion check's): a hostile checkpoint whose
/// checksum matches is refused too, and nothing it holds can make the engine trap later.
extension PartitionCheckpoint {
    static let magic: [UInt8] = Array("GFPC".utf8)
    static let headerSize = 36
    static let trailerSize = 4

    /// The checkpoint's bytes (see the format above).
    package func encode() -> [UInt8] {
        var w = CheckpointWriter()
        // A name longer than a length field holds (64 KiB) is no vehicle's: left out rather than cut.
        let entries = vehicles.filter { $0.key.utf8.count <= Int(UInt16.max) }
            .sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        let perVehicle = 288
        w.bytes.reserveCapacity(Self.headerSize + Self.trailerSize + vehicles.count * perVehicle)
        w.bytes += Self.magic
        w.u16(Self.currentFormatVersion)
        w.u16(0)
        w.u64(0)  // the total length, written below
        w.u64(fixSequence)
        w.u64(UInt64(bitPattern: regionSeq))
        w.u32(UInt32(clamping: entries.count))
        for (name, vehicle) in entries {
            w.u16(UInt16(clamping: name.utf8.count))
            w.bytes += name.utf8
            w.u8((vehicle.state != nil ? 1 : 0) | (vehicle.filter != nil ? 2 : 0))
            if let state = vehicle.state { w.state(state) }
            if let memory = vehicle.filter { w.memory(memory) }
        }
        let total = UInt64(w.bytes.count + Self.trailerSize)
        for k in 0..<8 { w.bytes[8 + k] = UInt8(truncatingIfNeeded: total >> (8 * UInt64(k))) }
        w.u32(CRC32.checksum(w.bytes))
        return w.bytes
    }

    /// Reads a checkpoint written by `encode()`; refuses, with one `PartitionCheckpointError`, anything else:
    /// truncated, corrupted, of another version, or hostile.
    package init(decoding bytes: [UInt8]) throws(PartitionCheckpointError) {
        let minimum = Self.headerSize + Self.trailerSize
        guard bytes.count >= minimum else {
            // Too short to say what it is: a prefix of a checkpoint is truncated, anything else is not one.
            guard bytes.prefix(4).elementsEqual(Self.magic.prefix(bytes.count)) else { throw .notACheckpoint }
            throw .truncated(count: bytes.count, needed: UInt64(minimum))
        }
        var r = CheckpointReader(bytes)
        guard bytes[0..<4].elementsEqual(Self.magic) else { throw .notACheckpoint }
        r.offset = 4
        let version = try r.u16("version")
        guard version == Self.currentFormatVersion else { throw .unsupportedVersion(version) }
        guard try r.u16("reserved") == 0 else { throw r.invalid("reserved", at: 6, "is not 0") }
        let declared = try r.u64("length")
        guard declared <= UInt64(bytes.count) else { throw .truncated(count: bytes.count, needed: declared) }
        guard declared == UInt64(bytes.count) else { throw .trailingBytes(count: bytes.count, declared: declared) }
        let end = bytes.count - Self.trailerSize
        let stored = CheckpointReader(bytes, at: end).peekU32()
        let computed = bytes.withUnsafeBufferPointer { CRC32.checksum(UnsafeBufferPointer(rebasing: $0[..<end])) }
        guard stored == computed else { throw .checksumMismatch(stored: stored, computed: computed) }
        r.end = end

        let fixSequence = try r.u64("fix sequence")
        let regionSeq = Int64(bitPattern: try r.u64("region seq"))
        // Each vehicle takes 3 bytes at least: its name's length and its parts.
        let count = try r.count(u32: "vehicle count", minimumSize: 3)
        var vehicles: [String: Vehicle] = [:]
        vehicles.reserveCapacity(count)
        var previous: ArraySlice<UInt8>?
        for _ in 0..<count {
            let at = r.offset
            let name = try r.subject()
            guard previous.map({ $0.lexicographicallyPrecedes(name) }) ?? true else {
                throw r.invalid("subject", at: at, "is out of order or repeated")
            }
            previous = name
            guard let subject = String(validating: name, as: UTF8.self) else {
                throw r.invalid("subject", at: at, "is not UTF-8")
            }
            let partsAt = r.offset
            let parts = try r.u8("parts")
            guard parts & ~3 == 0 else { throw r.invalid("parts", at: partsAt, "is \(parts), not 0-3") }
            let state = parts & 1 != 0 ? try r.state(subject: subject) : nil
            let memory = parts & 2 != 0 ? try r.memory() : nil
            // Two names with different bytes that Swift holds equal (the same text in NFC and NFD).
            guard vehicles.updateValue(Vehicle(state: state, filter: memory), forKey: subject) == nil else {
                throw r.invalid("subject", at: at, "is repeated")
            }
        }
        guard r.offset == end else { throw r.invalid("vehicles", at: r.offset, "are followed by unread bytes") }
        self.init(fixSequence: fixSequence, regionSeq: regionSeq, vehicles: vehicles, formatVersion: version)
    }
}

/// Appends little-endian numbers to a byte array.
private struct CheckpointWriter {
    var bytes: [UInt8] = []

    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func f64(_ v: Double) { u64(v.bitPattern) }
    mutating func date(_ v: Date) { f64(v.timeIntervalSinceReferenceDate) }
    mutating func point(_ p: GeocentricPoint) {
        f64(p.x)
        f64(p.y)
        f64(p.z)
    }

    mutating func state(_ s: VehicleState) {
        // The last fix only with its time (a pass starts from both); 8 was added after version 1 was first
        // written: an engine from before it refuses such a checkpoint ("has unknown bits"), and reads none other.
        let lastFix = s.lastFixTime != nil ? s.lastFix : nil
        // 16 (the run's own track, issue 27) likewise: a checkpoint without it still loads, its run's track
        // started afresh from the run's last fix.
        // 32 (the last change, how far back the track may look) likewise: without it, the last fix time.
        // 64 (the fixes of the motion track's run of refused fixes, replayed if it starts the track over) likewise:
        // without it, that run is not replayed.
        let refused = s.motion != nil ? s.refused.prefix(Int(MotionConsistency.resyncRun)) : []
        // 128 (where a pass to the next fix may start across the last) likewise: without it, no such pass.
        let anchor = s.usablePassAnchor
        u8(
            (s.lastFixTime != nil ? 1 : 0) | (s.gapPending ? 2 : 0) | (s.motion != nil ? 4 | 16 : 0)
                | (lastFix != nil ? 8 : 0) | (s.lastChange != nil ? 32 : 0) | (refused.isEmpty ? 0 : 64)
                | (anchor != nil ? 128 : 0))
        u64(UInt64(bitPattern: s.baselineSeq))
        if let time = s.lastFixTime { date(time) }
        if let t = s.motion {
            point(t.position)
            point(t.velocity)
            f64(t.steady.pp)
            f64(t.steady.pv)
            f64(t.steady.vv)
            f64(t.manoeuvre.pp)
            f64(t.manoeuvre.pv)
            f64(t.manoeuvre.vv)
            f64(t.steadyWeight)
            f64(t.time)
            // +128: every fix of the run was within the gate (it may start the filter over sooner). A checkpoint
            // written before has no such bit: its run is held to the full `resyncRun`.
            u8(t.run | (t.runInGate ? 128 : 0))
            point(t.runLast)
            f64(t.runTime)
            f64(t.runAccuracy)
            point(t.runVelocity)
            f64(t.runCovariance.pp)
            f64(t.runCovariance.pv)
            f64(t.runCovariance.vv)
        }
        if let fix = lastFix { eventFix(fix) }
        if let change = s.lastChange { date(change) }
        if !refused.isEmpty {
            u8(UInt8(refused.count))
            for fix in refused {
                date(fix.time)
                eventFix(EventFix(fix))
            }
        }
        if let anchor {
            date(anchor.time)
            eventFix(anchor.fix)
        }
        u32(UInt32(clamping: s.regions.count))
        // Sorted: one state, one encoding (most vehicles have none or one pair).
        for (seq, pair) in s.regions.count > 1 ? s.regions.sorted(by: { $0.key < $1.key }) : Array(s.regions) {
            u64(UInt64(bitPattern: seq))
            let state: UInt8
            switch pair.state {
            case .unknown: state = 0
            case .inside: state = 1
            case .outside: state = 2
            }
            u8(state)
            u8((pair.since != nil ? 1 : 0) | (pair.dwellFired ? 2 : 0))
            if let since = pair.since { date(since) }
        }
    }

    mutating func eventFix(_ fix: EventFix) {
        // A speed the reader refuses (negative, not finite: a library caller's fix) is left out, not written: one
        // such fix must not make the whole partition's checkpoint unreadable.
        let speed = fix.speed.flatMap { $0 >= 0 && $0.isFinite ? $0 : nil }
        let course = fix.course.flatMap { $0.isFinite ? $0 : nil }
        u8((speed != nil ? 1 : 0) | (course != nil ? 2 : 0) | (fix.accuracyEstimated ? 4 : 0))
        u8(UInt8(clamping: fix.mode.rawValue))
        f64(fix.latitude)
        f64(fix.longitude)
        f64(fix.accuracy)
        if let speed { f64(speed) }
        if let course { f64(course) }
    }

    mutating func memory(_ m: FixFilter.VehicleMemory) {
        u8(m.last != nil ? 1 : 0)
        if let last = m.last { kept(last) }
        u16(UInt16(clamping: m.candidates.count))
        for candidate in m.candidates.prefix(Int(UInt16.max)) { kept(candidate) }
    }

    mutating func kept(_ k: FixFilter.KeptFix) {
        date(k.time)
        point(k.point)
        f64(k.accuracy)
    }
}

/// Reads and checks what `CheckpointWriter` wrote, refusing with the field's name and offset.
private struct CheckpointReader {
    let bytes: [UInt8]
    var offset: Int
    var end: Int

    init(_ bytes: [UInt8], at offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
        self.end = bytes.count
    }

    func invalid(_ field: String, at offset: Int, _ reason: String) -> PartitionCheckpointError {
        .invalid(field: field, offset: offset, reason: reason)
    }

    /// `size` more bytes must be there before `end` (the checksum was checked, so only a hostile writer's
    /// counts get here).
    func need(_ size: Int, _ field: String) throws(PartitionCheckpointError) {
        guard size <= end - offset else {
            throw invalid(field, at: offset, "needs \(size) bytes, \(end - offset) are left")
        }
    }

    func peekU32() -> UInt32 {
        var v: UInt32 = 0
        for k in 0..<4 { v |= UInt32(bytes[offset + k]) << (8 * UInt32(k)) }
        return v
    }

    mutating func u8(_ field: String) throws(PartitionCheckpointError) -> UInt8 {
        try need(1, field)
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func u16(_ field: String) throws(PartitionCheckpointError) -> UInt16 {
        try need(2, field)
        defer { offset += 2 }
        return UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }

    mutating func u32(_ field: String) throws(PartitionCheckpointError) -> UInt32 {
        try need(4, field)
        defer { offset += 4 }
        return bytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self)) }
    }

    mutating func u64(_ field: String) throws(PartitionCheckpointError) -> UInt64 {
        try need(8, field)
        defer { offset += 8 }
        return bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
    }

    /// A count of items of at least `minimumSize` bytes each, refused unless that many fit in what is left.
    mutating func count(u32 field: String, minimumSize: Int) throws(PartitionCheckpointError) -> Int {
        let at = offset
        let n = Int(try u32(field))
        guard n <= (end - offset) / minimumSize else {
            throw invalid(field, at: at, "is \(n): too many for the bytes left")
        }
        return n
    }

    mutating func finite(_ field: String) throws(PartitionCheckpointError) -> Double {
        let at = offset
        let v = Double(bitPattern: try u64(field))
        guard v.isFinite else { throw invalid(field, at: at, "is not finite") }
        return v
    }

    /// A number of metres that is an accuracy: finite, not negative.
    mutating func accuracy(_ field: String) throws(PartitionCheckpointError) -> Double {
        let at = offset
        let v = try finite(field)
        guard v >= 0 else { throw invalid(field, at: at, "is negative") }
        return v
    }

    /// Seconds since 1970 within the years 0000-9999 (what the filter lets through).
    mutating func seconds(_ field: String) throws(PartitionCheckpointError) -> Double {
        let at = offset
        let v = Double(bitPattern: try u64(field))
        guard Fix.representableTimes.contains(v) else { throw invalid(field, at: at, "is not a time in 0000-9999") }
        return v
    }

    mutating func date(_ field: String) throws(PartitionCheckpointError) -> Date {
        let at = offset
        let date = Date(timeIntervalSinceReferenceDate: Double(bitPattern: try u64(field)))
        guard Fix.representableTimes.contains(date.timeIntervalSince1970) else {
            throw invalid(field, at: at, "is not a time in 0000-9999")
        }
        return date
    }

    mutating func point(_ field: String) throws(PartitionCheckpointError) -> GeocentricPoint {
        GeocentricPoint(x: try finite(field), y: try finite(field), z: try finite(field))
    }

    mutating func subject() throws(PartitionCheckpointError) -> ArraySlice<UInt8> {
        // Any length `encode` writes: a name the engine holds is never refused here (fleet names are 256
        // bytes at most, but a gpsd device's name is whatever the caller gave).
        let length = Int(try u16("subject length"))
        try need(length, "subject")
        defer { offset += length }
        return bytes[offset..<offset + length]
    }

    mutating func state(subject: String) throws(PartitionCheckpointError) -> VehicleState {
        let flagsAt = offset
        let flags = try u8("state flags")
        guard flags & 128 == 0 || flags & 8 != 0 else {
            throw invalid("state flags", at: flagsAt, "has a pass anchor without the last fix")
        }
        guard flags & 64 == 0 || flags & 4 != 0 else {
            throw invalid("state flags", at: flagsAt, "has refused fixes without the motion track")
        }
        guard flags & 16 == 0 || flags & 4 != 0 else {
            throw invalid("state flags", at: flagsAt, "has a run's track without the motion track")
        }
        guard flags & 8 == 0 || flags & 1 != 0 else {
            throw invalid("state flags", at: flagsAt, "has a last fix without its time")
        }
        let baseline = Int64(bitPattern: try u64("baseline seq"))
        let lastFixTime = flags & 1 != 0 ? try date("last fix time") : nil
        let motion = flags & 4 != 0 ? try track(withRun: flags & 16 != 0) : nil
        let lastFix = flags & 8 != 0 ? try eventFix() : nil
        let lastChange = flags & 32 != 0 ? try date("last change") : nil
        var refused: [WeightedFix] = []
        if flags & 64 != 0, let motion {
            // As the monitor keeps them: one for each fix of the motion track's run, each after the track's last
            // fix taken in and after the one before, the last at the run's time.
            let countAt = offset
            let count = try u8("refused count")
            guard count > 0 && count == motion.run else {
                throw invalid("refused count", at: countAt, "is \(count), not the run's \(motion.run)")
            }
            var previous = motion.time
            for _ in 0..<count {
                let timeAt = offset
                let time = try date("refused fix time")
                let seconds = time.timeIntervalSince1970
                guard seconds > previous else {
                    throw invalid("refused fix time", at: timeAt, "is not after the fix before it")
                }
                previous = seconds
                let fix = try eventFix()
                refused.append(WeightedFix(kept: fix, subject: subject, time: time))
            }
            guard previous == motion.runTime else {
                throw invalid("refused fix time", at: countAt, "of the last is not the run's")
            }
        }
        var passAnchor: RegionMonitor.PassAnchor?
        if flags & 128 != 0, let lastFixTime {
            // Before the last fix, which the pass goes across.
            let timeAt = offset
            let time = try date("pass anchor time")
            guard time < lastFixTime else {
                throw invalid("pass anchor time", at: timeAt, "is not before the last fix")
            }
            passAnchor = RegionMonitor.PassAnchor(fix: try eventFix(), time: time)
        }
        let count = try count(u32: "pair count", minimumSize: 10)
        var regions: [Int64: PairRecord] = [:]
        regions.reserveCapacity(count)
        var previous: Int64?
        for _ in 0..<count {
            let at = offset
            let seq = Int64(bitPattern: try u64("region seq"))
            guard previous.map({ $0 < seq }) ?? true else {
                throw invalid("region seq", at: at, "is out of order or repeated")
            }
            previous = seq
            let stateAt = offset
            let state: RegionState
            switch try u8("pair state") {
            case 0: state = .unknown
            case 1: state = .inside
            case 2: state = .outside
            case let other: throw invalid("pair state", at: stateAt, "is \(other), not 0-2")
            }
            let pairFlagsAt = offset
            let pairFlags = try u8("pair flags")
            guard pairFlags & ~3 == 0 else { throw invalid("pair flags", at: pairFlagsAt, "has unknown bits") }
            let since = pairFlags & 1 != 0 ? try date("pair since") : nil
            regions[seq] = PairRecord(state: state, since: since, dwellFired: pairFlags & 2 != 0)
        }
        return VehicleState(
            subject: subject, lastFixTime: lastFixTime, baselineSeq: baseline, gapPending: flags & 2 != 0,
            motion: motion, lastFix: lastFix, regions: regions, lastChange: lastChange, refused: refused,
            passAnchor: passAnchor)
    }

    /// A vehicle's last fix: a position on the globe, an accuracy, and a speed and course if it had them.
    mutating func eventFix() throws(PartitionCheckpointError) -> EventFix {
        let flagsAt = offset
        let flags = try u8("last fix flags")
        guard flags & ~7 == 0 else { throw invalid("last fix flags", at: flagsAt, "has unknown bits") }
        let modeAt = offset
        let mode: FixMode
        switch try u8("last fix mode") {
        case 2: mode = .twoD
        case 3: mode = .threeD
        case let other: throw invalid("last fix mode", at: modeAt, "is \(other), not 2 or 3")
        }
        let latitudeAt = offset
        let latitude = try finite("last fix latitude")
        guard (-90...90).contains(latitude) else {
            throw invalid("last fix latitude", at: latitudeAt, "is out of range")
        }
        let longitudeAt = offset
        let longitude = try finite("last fix longitude")
        guard (-180...180).contains(longitude) else {
            throw invalid("last fix longitude", at: longitudeAt, "is out of range")
        }
        let stated = try accuracy("last fix accuracy")
        let speed = flags & 1 != 0 ? try accuracy("last fix speed") : nil
        let course = flags & 2 != 0 ? try finite("last fix course") : nil
        return EventFix(
            latitude: latitude, longitude: longitude, accuracy: stated, accuracyEstimated: flags & 4 != 0,
            mode: mode, speed: speed, course: course)
    }

    mutating func track(withRun: Bool) throws(PartitionCheckpointError) -> MotionConsistency.Track {
        let position = try point("track position")
        let velocity = try point("track velocity")
        let steady = MotionConsistency.Covariance(
            pp: try finite("steady covariance"), pv: try finite("steady covariance"),
            vv: try finite("steady covariance"))
        let manoeuvre = MotionConsistency.Covariance(
            pp: try finite("manoeuvre covariance"), pv: try finite("manoeuvre covariance"),
            vv: try finite("manoeuvre covariance"))
        let weightAt = offset
        let weight = try finite("steady weight")
        guard (0...1).contains(weight) else { throw invalid("steady weight", at: weightAt, "is not within 0-1") }
        let time = try seconds("track time")
        let runAt = offset
        let runByte = try u8("run")
        let run = runByte & 127
        // `reject` counts a run up by one: a longer one than the motion check ever keeps would overflow.
        guard run < MotionConsistency.resyncRun else {
            throw invalid("run", at: runAt, "is \(run), not below \(MotionConsistency.resyncRun)")
        }
        var track = MotionConsistency.Track(
            position: position, velocity: velocity, steady: steady, manoeuvre: manoeuvre, steadyWeight: weight,
            time: time, run: run, runLast: try point("run's last point"), runTime: try seconds("run time"),
            runAccuracy: try accuracy("run accuracy"))
        track.runInGate = runByte & 128 != 0
        if withRun {
            track.runVelocity = try point("run velocity")
            track.runCovariance = MotionConsistency.Covariance(
                pp: try finite("run covariance"), pv: try finite("run covariance"), vv: try finite("run covariance"))
        } else {
            // Written before the run had its own track: the run's filter starts afresh from its last fix.
            let sigma = max(1, track.runAccuracy / 2)
            track.runCovariance = MotionConsistency.runStart(variance: sigma * sigma)
        }
        return track
    }

    mutating func memory() throws(PartitionCheckpointError) -> FixFilter.VehicleMemory {
        let flagsAt = offset
        let flags = try u8("filter flags")
        guard flags & ~1 == 0 else { throw invalid("filter flags", at: flagsAt, "has unknown bits") }
        let last = flags & 1 != 0 ? try kept("filter's last fix") : nil
        let at = offset
        let n = Int(try u16("candidate count"))
        guard n <= (end - offset) / 40 else {
            throw invalid("candidate count", at: at, "is \(n): too many for the bytes left")
        }
        var candidates: [FixFilter.KeptFix] = []
        candidates.reserveCapacity(n)
        for _ in 0..<n { candidates.append(try kept("filter candidate")) }
        return FixFilter.VehicleMemory(last: last, candidates: candidates)
    }

    mutating func kept(_ field: String) throws(PartitionCheckpointError) -> FixFilter.KeptFix {
        FixFilter.KeptFix(time: try date(field), point: try point(field), accuracy: try accuracy(field))
    }
}

/// CRC-32 (IEEE 802.3, as zlib and gzip): detects every torn write and every burst of up to 32 flipped bits.
package enum CRC32 {
    /// Eight tables of 256 entries, one after the other: eight bytes a step ("slicing by 8").
    private static let table: [UInt32] = {
        var t = [UInt32](repeating: 0, count: 8 * 256)
        for n in 0..<256 {
            var c = UInt32(n)
            for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
            t[n] = c
        }
        for k in 1..<8 {
            for n in 0..<256 {
                let previous = t[(k - 1) * 256 + n]
                t[k * 256 + n] = (previous >> 8) ^ t[Int(previous & 0xFF)]
            }
        }
        return t
    }()

    package static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBufferPointer { checksum($0) }
    }

    package static func checksum(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt32 {
        let raw = UnsafeRawBufferPointer(bytes)
        return table.withUnsafeBufferPointer { t in
            var c: UInt32 = 0xFFFF_FFFF
            var i = 0
            let n = raw.count
            while i + 8 <= n {
                let lo = c ^ UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt32.self))
                let hi = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: i + 4, as: UInt32.self))
                c = t[7 * 256 + Int(lo & 0xFF)] ^ t[6 * 256 + Int(lo >> 8 & 0xFF)]
                c ^= t[5 * 256 + Int(lo >> 16 & 0xFF)] ^ t[4 * 256 + Int(lo >> 24)]
                c ^= t[3 * 256 + Int(hi & 0xFF)] ^ t[2 * 256 + Int(hi >> 8 & 0xFF)]
                c ^= t[256 + Int(hi >> 16 & 0xFF)] ^ t[Int(hi >> 24)]
                i += 8
            }
            while i < n {
                c = t[Int((c ^ UInt32(raw[i])) & 0xFF)] ^ (c >> 8)
                i += 1
            }
            return c ^ 0xFFFF_FFFF
        }
    }
}
