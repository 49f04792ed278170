/// A hash set of slot numbers, looked up by a key the owner hashes and compares: 8 bytes a bucket, where a
/// `[String: Int32]` would spend about 30 (the key lives once, in the owner's records).
///
/// Open addressing with linear probing, at most 70% full; removals leave tombstones until the next
/// rebuild. A bucket holds the slot and 32 bits of the key's hash, so a probe compares keys (reading the
/// owner's records, likely a cache miss) only when those bits match: looking up an absent key, as every
/// insertion does, costs one read of the bucket array.
struct SlotTable: Sendable {
    /// A bucket: the hash tag in the high half (never zero: bit 32 is set), the slot in the low half.
    /// 0 is empty, 1 a tombstone.
    private static let empty: UInt64 = 0
    private static let deleted: UInt64 = 1

    private var buckets: [UInt64] = []
    private(set) var count = 0
    private var tombstones = 0

    var memoryFootprint: Int { buckets.capacity * MemoryLayout<UInt64>.stride }

    /// True when the owner must `rebuild` before the next `insert`.
    var needsRebuild: Bool { (count + tombstones + 1) * 10 > buckets.count * 7 }

    @inline(__always)
    private static func tag(_ hash: UInt64) -> UInt64 { (hash | 1 << 32) & 0xFFFF_FFFF_0000_0000 }

    @inline(__always)
    private static func slot(_ bucket: UInt64) -> Int32 { Int32(truncatingIfNeeded: bucket) }

    /// The slot holding the key, if any.
    func find(hash: UInt64, where matches: (Int32) -> Bool) -> Int32? {
        guard !buckets.isEmpty else { return nil }
        let tag = Self.tag(hash)
        return buckets.withUnsafeBufferPointer { b in
            let mask = b.count - 1
            var i = Int(truncatingIfNeeded: hash) & mask
            while true {
                let bucket = b[i]
                if bucket == Self.empty { return nil }
                if bucket & 0xFFFF_FFFF_0000_0000 == tag && matches(Self.slot(bucket)) { return Self.slot(bucket) }
                i = (i + 1) & mask
            }
        }
    }

    /// Adds a slot whose key is not in the table yet. Call `rebuild` first when `needsRebuild`.
    mutating func insert(_ slot: Int32, hash: UInt64) {
        precondition(!needsRebuild && slot >= 0)
        let mask = buckets.count - 1
        var i = Int(truncatingIfNeeded: hash) & mask
        while buckets[i] > Self.deleted { i = (i + 1) & mask }
        if buckets[i] == Self.deleted { tombstones -= 1 }
        buckets[i] = Self.tag(hash) | UInt64(UInt32(bitPattern: slot))
        count += 1
    }

    /// Removes and returns the slot holding the key, if any.
    @discardableResult
    mutating func remove(hash: UInt64, where matches: (Int32) -> Bool) -> Int32? {
        guard !buckets.isEmpty else { return nil }
        let tag = Self.tag(hash)
        let mask = buckets.count - 1
        var i = Int(truncatingIfNeeded: hash) & mask
        while true {
            let bucket = buckets[i]
            if bucket == Self.empty { return nil }
            if bucket & 0xFFFF_FFFF_0000_0000 == tag && matches(Self.slot(bucket)) {
                // A tombstone keeps later probes for other keys going; the next rebuild drops it.
                buckets[i] = Self.deleted
                count -= 1
                tombstones += 1
                return Self.slot(bucket)
            }
            i = (i + 1) & mask
        }
    }

    /// Re-hashes `slots` (every slot in the table, plus room for `extra` more) into a fresh table.
    mutating func rebuild(slots: some Sequence<Int32>, extra: Int, hash: (Int32) -> UInt64) {
        var size = 16
        while size < (count + extra) * 2 { size *= 2 }
        buckets = Array(repeating: Self.empty, count: size)
        count = 0
        tombstones = 0
        let mask = size - 1
        for slot in slots {
            let h = hash(slot)
            var i = Int(truncatingIfNeeded: h) & mask
            while buckets[i] != Self.empty { i = (i + 1) & mask }
            buckets[i] = Self.tag(h) | UInt64(UInt32(bitPattern: slot))
            count += 1
        }
    }

    /// A well-mixed 64-bit hash of an integer (MurmurHash3's finalizer).
    static func hash(_ value: UInt64) -> UInt64 {
        var h = value
        h ^= h >> 33
        h &*= 0xFF51_AFD7_ED55_8CCD
        h ^= h >> 33
        h &*= 0xC4CE_B9FE_1A85_EC53
        h ^= h >> 33
        return h
    }

    /// A well-mixed 64-bit hash of bytes, eight at a time.
    static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var h = 0x9E37_79B9_7F4A_7C15 ^ UInt64(bytes.count)
        var i = 0
        while i + 8 <= bytes.count {
            h = (h ^ bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)) &* 0xBF58_476D_1CE4_E5B9
            h ^= h >> 29
            i += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while i < bytes.count {
            tail |= UInt64(bytes[i]) << shift
            shift += 8
            i += 1
        }
        return hash(h ^ tail)
    }
}
