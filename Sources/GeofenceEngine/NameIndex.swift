/// Positions in an array the owner keeps (0 to 2³² − 2), found by the names stored there: an open-addressed table
/// of 8-byte slots, each the top 32 bits of the name's hash and the position + 1 (0: empty), probed linearly from
/// the slot those 32 bits choose, at most 5/8 full.
///
/// For `FixPipeline`'s one look-up of a vehicle's name a fix. A `[String: Int]` of 10,000 vehicles keeps its
/// names (16 bytes each), positions and occupancy in three arrays, and its probe missed the cache in a fleet
/// replay (8 % of the time); this table is half the size in one array, and the name is compared where the
/// owner keeps it, which the fix reads next anyway. The hash is the standard library's (`String.hashValue`,
/// seeded per process), so names chosen to collide are no easier to find than for a `Dictionary`.
package struct NameIndex: Sendable {
    private var slots = [UInt64](repeating: 0, count: 16)
    /// Positions held.
    package private(set) var count = 0

    package init() {}

    private static let positionBits: UInt64 = 0xFFFF_FFFF

    @inline(__always)
    private static func tag(_ hash: Int) -> UInt64 { UInt64(bitPattern: Int64(hash)) >> 32 }

    @inline(__always)
    private var mask: Int { slots.count &- 1 }

    /// The position whose name hashes to `hash` and for which `matches` is true (the caller compares the name
    /// it keeps there), or nil.
    @inline(__always)
    package func find(hash: Int, where matches: (Int) -> Bool) -> Int? {
        let tag = Self.tag(hash)
        let mask = self.mask
        return slots.withUnsafeBufferPointer { slots in
            var i = Int(truncatingIfNeeded: tag) & mask
            while true {
                let slot = slots[i]
                if slot == 0 { return nil }
                if slot >> 32 == tag {
                    let position = Int(slot & Self.positionBits) &- 1
                    if matches(position) { return position }
                }
                i = (i &+ 1) & mask
            }
        }
    }

    /// Adds `position` for a name that hashes to `hash` and is not in the table.
    package mutating func insert(hash: Int, position: Int) {
        precondition(position >= 0 && UInt64(position) < Self.positionBits, "a position out of range")
        if (count + 1) * 8 > slots.count * 5 { grow() }
        place(Self.tag(hash) << 32 | UInt64(position + 1))
        count += 1
    }

    /// Takes out `position`, whose name hashes to `hash`; false if it was not there.
    @discardableResult
    package mutating func remove(hash: Int, position: Int) -> Bool {
        guard let i = slot(hash: hash, position: position) else { return false }
        // Backward shift: each slot after it that may be moved back (its probe began at or before the hole) is.
        let mask = self.mask
        var hole = i
        var k = i
        while true {
            k = (k + 1) & mask
            let slot = slots[k]
            if slot == 0 { break }
            let home = Int(truncatingIfNeeded: slot >> 32) & mask
            // Stays when its home lies cyclically in (hole, k].
            let stays = hole <= k ? (home > hole && home <= k) : (home > hole || home <= k)
            if !stays {
                slots[hole] = slot
                hole = k
            }
        }
        slots[hole] = 0
        count -= 1
        return true
    }

    /// `position`, whose name hashes to `hash`, is now `newPosition` (the owner moved it).
    package mutating func move(hash: Int, from position: Int, to newPosition: Int) {
        precondition(newPosition >= 0 && UInt64(newPosition) < Self.positionBits, "a position out of range")
        guard let i = slot(hash: hash, position: position) else { preconditionFailure("a position not held") }
        slots[i] = slots[i] & ~Self.positionBits | UInt64(newPosition + 1)
    }

    /// Sized for the positions held, after many were taken out.
    package mutating func compact() {
        var size = 16
        while (count + 1) * 8 > size * 5 { size *= 2 }
        guard size < slots.count else { return }
        rebuild(size: size)
    }

    private func slot(hash: Int, position: Int) -> Int? {
        let tag = Self.tag(hash)
        let wanted = tag << 32 | UInt64(position + 1)
        var i = Int(truncatingIfNeeded: tag) & mask
        while slots[i] != 0 {
            if slots[i] == wanted { return i }
            i = (i + 1) & mask
        }
        return nil
    }

    private mutating func place(_ slot: UInt64) {
        var i = Int(truncatingIfNeeded: slot >> 32) & mask
        while slots[i] != 0 { i = (i + 1) & mask }
        slots[i] = slot
    }

    private mutating func grow() { rebuild(size: slots.count * 2) }

    /// The same slots in a table of `size`: each slot's place comes from its own 32 bits of hash.
    private mutating func rebuild(size: Int) {
        let old = slots
        slots = [UInt64](repeating: 0, count: size)
        for slot in old where slot != 0 { place(slot) }
    }
}
