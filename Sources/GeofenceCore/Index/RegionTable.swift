import Foundation

/// The monitor's regions, stored compactly by slot: about 85 bytes a region (with its id and lookup
/// tables) where a `Region` with its strings, `Set` and dictionary costs several hundred, so a million
/// regions fit a small machine.
///
/// What a fix near a region reads (centre, radius, sequence number, flags) is one 48-byte record; what
/// only events and `region(id:)` need (latitude, longitude, id, creation time) sits in a parallel
/// 16-byte array; ids live back to back in one byte pool; and the rare parts (name, dwell, expiry,
/// hooks, subjects) are kept only for the regions that have them, as the whole `Region`. A `Region` is
/// rebuilt on demand and equals the one inserted.
///
/// Latitude and longitude are not stored: they are computed back from the record's ECEF centre
/// (`GeocentricPoint.latitudeAndLongitude`), which gives them to within a few units in the last place, and the cold record
/// keeps the difference in units in the last place (`DegreesFix`), so that the degrees given back are
/// the stored ones bit for bit. The rare coordinate whose difference does not fit 16 bits (a longitude
/// at a pole, a latitude of 10⁻³⁰⁰ degrees) is kept whole in `exactCoordinates`.
struct RegionTable: Sendable {
    struct Flags: OptionSet, Sendable {
        let rawValue: UInt16
        static let live = Flags(rawValue: 1 << 0)
        static let notifyEnter = Flags(rawValue: 1 << 1)
        static let notifyExit = Flags(rawValue: 1 << 2)
        static let notifyDwell = Flags(rawValue: 1 << 3)
        /// Monitor state: the last fix near the region was too poor to ever be conclusively inside.
        static let accuracyLimited = Flags(rawValue: 1 << 4)
        static let hasCreatedBy = Flags(rawValue: 1 << 5)
        static let hasCreatedAt = Flags(rawValue: 1 << 6)
        /// The whole `Region` is in `details` (it has a name, dwell, expiry, hooks or subjects).
        static let hasDetails = Flags(rawValue: 1 << 7)
        /// Only some subjects are monitored against it (see `details`).
        static let hasSubjects = Flags(rawValue: 1 << 8)
        /// A polygon region (see `details`): its record's centre and radius are its bounding cap.
        static let polygon = Flags(rawValue: 1 << 9)

        static func notify(_ kind: NotifyKind) -> Flags {
            switch kind {
            case .enter: .notifyEnter
            case .exit: .notifyExit
            case .dwell: .notifyDwell
            }
        }
    }

    /// What every fix near the region reads.
    struct Record: Sendable {
        var center: GeocentricPoint
        var radius: Double
        var seq: Int64
        var createdBy: UInt32
        var flags: Flags
        /// The id's length in bytes (in the record's padding); `UInt16.max`: in `longIDLengths`.
        var idLength: UInt16
    }

    /// What events and rebuilding the `Region` read: 16 bytes.
    struct Cold: Sendable {
        /// `Date.timeIntervalSinceReferenceDate`, the value a `Date` holds, so it round-trips exactly.
        var createdAt: Double
        /// Offset of the id in `idBytes`.
        var idOffset: UInt32
        /// The stored latitude and longitude less the ones computed back from the centre
        /// (`GeocentricPoint.latitudeAndLongitude`), in units in the last place; `DegreesFix.exception`: in `exactCoordinates`.
        var latitudeFix: Int16
        var longitudeFix: Int16
    }

    /// A correction from a computed angle to the stored one, in units in the last place.
    enum DegreesFix {
        /// The marker of a difference that does not fit.
        static let exception = Int16.min

        /// The correction that turns `computed` into `stored` bit for bit, or `exception`.
        static func make(stored: Double, computed: Double) -> Int16 {
            let delta = Int64(bitPattern: stored.bitPattern) &- Int64(bitPattern: computed.bitPattern)
            guard delta > Int64(exception), delta <= Int64(Int16.max) else { return exception }
            return Int16(delta)
        }

        /// `computed` corrected by `fix` (not `exception`).
        @inline(__always)
        static func apply(_ fix: Int16, to computed: Double) -> Double {
            Double(bitPattern: UInt64(bitPattern: Int64(bitPattern: computed.bitPattern) &+ Int64(fix)))
        }
    }

    /// Limits for rebuilding a `Region` that was valid when inserted: only the checks that do not depend
    /// on limits remain, and those it passed already.
    private static let rebuildLimits: RegionLimits = {
        var l = RegionLimits()
        l.maxRadius = .infinity
        l.maxIDBytes = .max
        l.maxNameBytes = .max
        l.maxCommandBytes = .max
        return l
    }()

    private(set) var records: [Record] = []
    private var cold: [Cold] = []
    private var idBytes: [UInt8] = []
    /// Bytes of `idBytes` that belong to removed regions.
    private var idGarbage = 0
    private var byID = SlotTable()
    private var bySeq = SeqIndex()
    private var details: [Int32: Region] = [:]
    /// The coordinates of the rare regions a `DegreesFix` cannot give back (see `Cold`).
    private var exactCoordinates: [Int32: Coordinate] = [:]
    /// The lengths of ids of 65 535 bytes or more.
    private var longIDLengths: [Int32: Int] = [:]
    private var freeSlots: [Int32] = []
    private(set) var count = 0
    /// Bytes held by the polygons' shapes (`RegionPolygon.memoryFootprint`), which `details` holds.
    private var polygonBytes = 0

    /// Bytes held by the table's arrays (capacities), with an estimate for the rare `details` and the
    /// polygons' shapes.
    var memoryFootprint: Int {
        records.capacity * MemoryLayout<Record>.stride + cold.capacity * MemoryLayout<Cold>.stride
            + idBytes.capacity + byID.memoryFootprint + bySeq.memoryFootprint
            + freeSlots.capacity * MemoryLayout<Int32>.stride + details.capacity * 256 + polygonBytes
            + exactCoordinates.capacity * 32 + longIDLengths.capacity * 24
    }

    mutating func reserveCapacity(_ n: Int) {
        records.reserveCapacity(n)
        cold.reserveCapacity(n)
        // Ids as long as those so far (16 bytes if none yet): growing the pool step by step would leave
        // each old copy to the allocator.
        let averageID = count > 0 ? max(1, idBytes.count / count) : 16
        idBytes.reserveCapacity(idBytes.count + max(0, n - count) * averageID)
        if byID.needsRebuild || !byID.canHold(n) { rebuildIDs(capacity: n) }
        bySeq.reserveCapacity(n)
    }

    /// Gives back the room reserved and not used (after a load: the ids turned out shorter than
    /// reserved for).
    mutating func trimCapacity() {
        if idBytes.capacity > idBytes.count + idBytes.count / 16 {
            idBytes = idBytes.withUnsafeBufferPointer { Array($0) }
        }
    }

    // MARK: Changes

    /// Stores a region whose id and sequence number are not in the table; returns its slot.
    mutating func insert(_ region: Region, seq: Int64) -> Int32 {
        let hasDetails =
            region.name != nil || region.dwell != nil || region.expires != nil || !region.hooks.isEmpty
            || region.subjects != nil || region.polygon != nil
        return insert(
            id: region.id, center: region.center, radius: region.radius, notify: region.notify,
            createdBy: region.createdBy, createdAt: region.createdAt, seq: seq,
            details: hasDetails ? region : nil)
    }

    /// Stores a region with no details (see `CompactRegion`).
    mutating func insert(_ region: CompactRegion, seq: Int64) -> Int32 {
        insert(
            id: region.id, center: region.center, radius: region.radius, notify: region.notify,
            createdBy: region.createdBy, createdAt: region.createdAt, seq: seq, details: nil)
    }

    /// `details` is the whole region when it has a name, dwell, expiry, hooks or subjects.
    private mutating func insert(
        id: String, center: Coordinate, radius: Double, notify: Set<NotifyKind>, createdBy: UInt32?,
        createdAt: Date?, seq: Int64, details region: Region?
    ) -> Int32 {
        // Rebuilt before anything changes, so the rebuild sees exactly the regions already in the table.
        if byID.needsRebuild { rebuildIDs(capacity: max(count + 1, 2 * count)) }
        var flags: Flags = [.live]
        for kind in notify { flags.insert(.notify(kind)) }
        if createdBy != nil { flags.insert(.hasCreatedBy) }
        if createdAt != nil { flags.insert(.hasCreatedAt) }
        let hasDetails = region != nil
        if hasDetails { flags.insert(.hasDetails) }
        if region?.subjects != nil { flags.insert(.hasSubjects) }
        if region?.polygon != nil { flags.insert(.polygon) }

        let length = id.utf8.count
        let offset = idBytes.count
        precondition(offset + length <= Int(UInt32.max), "the region ids together are shorter than 4 GiB")
        idBytes.append(contentsOf: id.utf8)
        let ecef = GeocentricPoint(center)
        let record = Record(
            center: ecef, radius: radius, seq: seq, createdBy: createdBy ?? 0, flags: flags,
            idLength: UInt16(min(length, Int(UInt16.max))))
        let computed = ecef.latitudeAndLongitude
        let coldRecord = Cold(
            createdAt: createdAt?.timeIntervalSinceReferenceDate ?? 0, idOffset: UInt32(offset),
            latitudeFix: DegreesFix.make(stored: center.latitude, computed: computed.latitude),
            longitudeFix: DegreesFix.make(stored: center.longitude, computed: computed.longitude))

        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            records[Int(slot)] = record
            cold[Int(slot)] = coldRecord
        } else {
            precondition(records.count < Int(Int32.max), "at most 2³¹ regions")
            slot = Int32(records.count)
            records.append(record)
            cold.append(coldRecord)
        }
        if let region {
            details[slot] = region
            polygonBytes += region.polygon?.memoryFootprint ?? 0
        }
        if coldRecord.latitudeFix == DegreesFix.exception || coldRecord.longitudeFix == DegreesFix.exception {
            exactCoordinates[slot] = center
        }
        if length >= Int(UInt16.max) { longIDLengths[slot] = length }
        count += 1

        byID.insert(slot, hash: idHash(slot: slot))
        // Sequence numbers are unique in practice; if a caller repeats one, the newest region owns it.
        withSeqIndex { index, records in index.insert(seq: seq, slot: slot) { records[Int($0)].seq } }
        return slot
    }

    /// Forgets the region in `slot`; the slot is reused by a later insertion.
    mutating func remove(slot: Int32) {
        let record = records[Int(slot)]
        guard record.flags.contains(.live) else { return }
        let hash = idHash(slot: slot)
        byID.remove(hash: hash) { $0 == slot }
        withSeqIndex { index, records in index.remove(seq: record.seq, slot: slot) { records[Int($0)].seq } }
        records[Int(slot)].flags = []
        if record.flags.contains(.hasDetails) {
            polygonBytes -= details[slot]?.polygon?.memoryFootprint ?? 0
            details[slot] = nil
        }
        idGarbage += idLength(slot: slot)
        exactCoordinates[slot] = nil
        longIDLengths[slot] = nil
        freeSlots.append(slot)
        count -= 1
        if idGarbage > 4096 && idGarbage * 2 > idBytes.count { compactIDs() }
    }

    mutating func setAccuracyLimited(_ limited: Bool, slot: Int32) {
        if limited {
            records[Int(slot)].flags.insert(.accuracyLimited)
        } else {
            records[Int(slot)].flags.remove(.accuracyLimited)
        }
    }

    /// True when the region is accuracy-limited or monitors only some subjects: the two things a fix even
    /// far outside it must look at (see `RegionMonitor.process`).
    func needsAttention(_ slot: Int32) -> Bool {
        !records[Int(slot)].flags.isDisjoint(with: [.accuracyLimited, .hasSubjects])
    }

    // MARK: Lookups

    func slot(id: String) -> Int32? {
        var id = id
        return id.withUTF8 { key in
            let hash = SlotTable.hash(UnsafeRawBufferPointer(key))
            return byID.find(hash: hash) { slot in
                withIDBytes(slot: slot) { $0.elementsEqual(UnsafeRawBufferPointer(key)) }
            }
        }
    }

    func slot(seq: Int64) -> Int32? {
        bySeq.slot(seq: seq) { records[Int($0)].seq }
    }

    func id(slot: Int32) -> String {
        withIDBytes(slot: slot) { String(decoding: $0, as: UTF8.self) }
    }

    /// Starts the loads of the cold records of `slots`; returns a value of what was read.
    func touchCold(_ slots: some Collection<Int32>) -> UInt32 {
        cold.withUnsafeBufferPointer { cold in
            var seen: UInt32 = 0
            for slot in slots { seen &+= cold[Int(slot)].idOffset }
            return seen
        }
    }

    /// Starts the loads an event of each of `slots` makes (its cold record, then its id's bytes), all of them
    /// together rather than one cache miss after another as the events are made. Returns a value of what was
    /// read, for the caller to keep the loads from being dropped.
    func touchEventData(_ slots: [Int32]) -> UInt32 {
        var seen: UInt32 = 0
        cold.withUnsafeBufferPointer { cold in
            for slot in slots { seen &+= cold[Int(slot)].idOffset }
            idBytes.withUnsafeBufferPointer { bytes in
                for slot in slots {
                    let offset = Int(cold[Int(slot)].idOffset)
                    if offset < bytes.count { seen &+= UInt32(bytes[offset]) }
                }
            }
        }
        return seen
    }

    /// Regions whose coordinates are kept whole (see `Cold`).
    var exactCoordinateCount: Int { exactCoordinates.count }

    /// The centre as inserted, bit for bit.
    func center(slot: Int32) -> Coordinate {
        let c = cold[Int(slot)]
        guard c.latitudeFix != DegreesFix.exception && c.longitudeFix != DegreesFix.exception else {
            return exactCoordinates[slot]!
        }
        let computed = records[Int(slot)].center.latitudeAndLongitude
        return Coordinate(
            latitude: DegreesFix.apply(c.latitudeFix, to: computed.latitude),
            longitude: DegreesFix.apply(c.longitudeFix, to: computed.longitude))
    }

    /// The region's dwell time, if it has one, given its record (or a copy of it): most regions have none,
    /// which the record's flags say without a look at the details.
    func dwell(_ record: Record, slot: Int32) -> Double? {
        record.flags.contains(.hasDetails) ? details[slot]?.dwell : nil
    }

    /// Its polygon, for a polygon region.
    func polygon(_ record: Record, slot: Int32) -> RegionPolygon? {
        record.flags.contains(.polygon) ? details[slot]?.polygon : nil
    }

    /// The radius its events carry: a circle's radius, 0 for a polygon (whose events' distance is the
    /// signed distance to its boundary, so `distance ≤ radius − margin` is inside for both).
    func eventRadius(_ record: Record) -> Double {
        record.flags.contains(.polygon) ? 0 : record.radius
    }

    /// Its expiry time, if it has one.
    func expires(slot: Int32) -> Date? {
        records[Int(slot)].flags.contains(.hasDetails) ? details[slot]?.expires : nil
    }

    func applies(slot: Int32, to subject: String) -> Bool {
        applies(records[Int(slot)], slot: slot, to: subject)
    }

    /// The same, given the slot's record (or a copy of it).
    func applies(_ record: Record, slot: Int32, to subject: String) -> Bool {
        guard record.flags.contains(.hasSubjects) else { return true }
        return details[slot]?.applies(to: subject) ?? true
    }

    /// The region as it was inserted.
    func region(slot: Int32) -> Region {
        let record = records[Int(slot)]
        if record.flags.contains(.hasDetails), let region = details[slot] { return region }
        let c = cold[Int(slot)]
        var notify: Set<NotifyKind> = []
        for kind in NotifyKind.allCases where record.flags.contains(.notify(kind)) { notify.insert(kind) }
        do {
            return try Region(
                id: id(slot: slot), center: center(slot: slot),
                radius: record.radius, notify: notify,
                createdBy: record.flags.contains(.hasCreatedBy) ? record.createdBy : nil,
                createdAt: record.flags.contains(.hasCreatedAt)
                    ? Date(timeIntervalSinceReferenceDate: c.createdAt) : nil,
                limits: Self.rebuildLimits)
        } catch {
            // Every field is the one a valid region was made of, and the limits are wider than any.
            preconditionFailure("a stored region no longer validates: \(error)")
        }
    }

    /// Every live slot, in slot order.
    var liveSlots: some Sequence<Int32> {
        records.indices.lazy.filter { records[$0].flags.contains(.live) }.map { Int32($0) }
    }

    // MARK: Ids

    private func idLength(slot: Int32) -> Int {
        let length = records[Int(slot)].idLength
        return length == UInt16.max ? longIDLengths[slot]! : Int(length)
    }

    private func withIDBytes<R>(slot: Int32, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let offset = Int(cold[Int(slot)].idOffset)
        let length = idLength(slot: slot)
        return idBytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[offset..<offset + length])) }
    }

    private func idHash(slot: Int32) -> UInt64 {
        withIDBytes(slot: slot) { SlotTable.hash($0) }
    }

    /// Rebuilds the id table with room for `capacity` regions in all.
    private mutating func rebuildIDs(capacity: Int) {
        var table = byID
        byID = SlotTable()
        table.rebuild(slots: liveSlots, capacity: max(capacity, count)) { idHash(slot: $0) }
        byID = table
    }

    /// Runs `body` on the sequence-number index and the records it reads its keys from (the index is
    /// moved out meanwhile, so that changing it does not copy it).
    private mutating func withSeqIndex(_ body: (inout SeqIndex, [Record]) -> Void) {
        var index = bySeq
        bySeq = SeqIndex()
        body(&index, records)
        bySeq = index
    }

    /// Rewrites the id pool without the ids of removed regions.
    private mutating func compactIDs() {
        var pool: [UInt8] = []
        pool.reserveCapacity(idBytes.count - idGarbage)
        for slot in records.indices where records[slot].flags.contains(.live) {
            let offset = Int(cold[slot].idOffset)
            let length = idLength(slot: Int32(slot))
            cold[slot].idOffset = UInt32(pool.count)
            pool.append(contentsOf: idBytes[offset..<offset + length])
        }
        idBytes = pool
        idGarbage = 0
    }
}
