import Foundation

/// The monitor's regions, stored compactly by slot: about 125 bytes a region (with its id and lookup
/// tables) where a `Region` with its strings, `Set` and dictionary costs several hundred, so a million
/// regions fit a small machine.
///
/// What a fix near a region reads (centre, radius, sequence number, flags) is one 48-byte record; what
/// only events and `region(id:)` need (latitude, longitude, id, creation time) sits in a parallel
/// array; ids live back to back in one byte pool; and the rare parts (name, dwell, expiry, hooks,
/// subjects) are kept only for the regions that have them, as the whole `Region`. A `Region` is rebuilt
/// on demand and equals the one inserted.
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
    }

    /// What events and rebuilding the `Region` read.
    struct Cold: Sendable {
        var latitude: Double
        var longitude: Double
        /// `Date.timeIntervalSinceReferenceDate`, the value a `Date` holds, so it round-trips exactly.
        var createdAt: Double
        /// Offset of the id in `idBytes` (high 40 bits) and its length in bytes (low 24 bits).
        var idRef: UInt64
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
    }

    mutating func reserveCapacity(_ n: Int) {
        records.reserveCapacity(n)
        cold.reserveCapacity(n)
        // Ids as long as those so far (16 bytes if none yet): growing the pool step by step would leave
        // each old copy to the allocator.
        let averageID = count > 0 ? max(1, idBytes.count / count) : 16
        idBytes.reserveCapacity(idBytes.count + max(0, n - count) * averageID)
        if byID.needsRebuild || n > byID.count * 2 { rebuildIDs(extra: n - count) }
        bySeq.reserveCapacity(n)
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
        if byID.needsRebuild { rebuildIDs(extra: 1) }
        var flags: Flags = [.live]
        for kind in notify { flags.insert(.notify(kind)) }
        if createdBy != nil { flags.insert(.hasCreatedBy) }
        if createdAt != nil { flags.insert(.hasCreatedAt) }
        let hasDetails = region != nil
        if hasDetails { flags.insert(.hasDetails) }
        if region?.subjects != nil { flags.insert(.hasSubjects) }
        if region?.polygon != nil { flags.insert(.polygon) }

        let length = id.utf8.count
        precondition(length < 1 << 24, "a region id is shorter than 16 MiB")
        let offset = idBytes.count
        idBytes.append(contentsOf: id.utf8)
        let record = Record(
            center: GeocentricPoint(center), radius: radius, seq: seq, createdBy: createdBy ?? 0, flags: flags)
        let coldRecord = Cold(
            latitude: center.latitude, longitude: center.longitude,
            createdAt: createdAt?.timeIntervalSinceReferenceDate ?? 0, idRef: UInt64(offset) << 24 | UInt64(length))

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
        count += 1

        byID.insert(slot, hash: idHash(slot: slot))
        // Sequence numbers are unique in practice; if a caller repeats one, the newest region owns it.
        bySeq.insert(seq: seq, slot: slot)
        return slot
    }

    /// Forgets the region in `slot`; the slot is reused by a later insertion.
    mutating func remove(slot: Int32) {
        let record = records[Int(slot)]
        guard record.flags.contains(.live) else { return }
        let hash = idHash(slot: slot)
        byID.remove(hash: hash) { $0 == slot }
        bySeq.remove(seq: record.seq, slot: slot)
        records[Int(slot)].flags = []
        if record.flags.contains(.hasDetails) {
            polygonBytes -= details[slot]?.polygon?.memoryFootprint ?? 0
            details[slot] = nil
        }
        idGarbage += Int(cold[Int(slot)].idRef & 0xFF_FFFF)
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
        bySeq.slot(seq: seq)
    }

    func id(slot: Int32) -> String {
        withIDBytes(slot: slot) { String(decoding: $0, as: UTF8.self) }
    }

    func center(slot: Int32) -> Coordinate {
        let c = cold[Int(slot)]
        return Coordinate(latitude: c.latitude, longitude: c.longitude)
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
                id: id(slot: slot), center: Coordinate(latitude: c.latitude, longitude: c.longitude),
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

    private func withIDBytes<R>(slot: Int32, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let ref = cold[Int(slot)].idRef
        let offset = Int(ref >> 24)
        let length = Int(ref & 0xFF_FFFF)
        return idBytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[offset..<offset + length])) }
    }

    private func idHash(slot: Int32) -> UInt64 {
        withIDBytes(slot: slot) { SlotTable.hash($0) }
    }

    private mutating func rebuildIDs(extra: Int) {
        var table = byID
        byID = SlotTable()
        table.rebuild(slots: liveSlots, extra: extra) { idHash(slot: $0) }
        byID = table
    }

    /// Rewrites the id pool without the ids of removed regions.
    private mutating func compactIDs() {
        var pool: [UInt8] = []
        pool.reserveCapacity(idBytes.count - idGarbage)
        for slot in records.indices where records[slot].flags.contains(.live) {
            let ref = cold[slot].idRef
            let offset = Int(ref >> 24)
            let length = Int(ref & 0xFF_FFFF)
            cold[slot].idRef = UInt64(pool.count) << 24 | UInt64(length)
            pool.append(contentsOf: idBytes[offset..<offset + length])
        }
        idBytes = pool
        idGarbage = 0
    }
}
