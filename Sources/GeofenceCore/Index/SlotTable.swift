/// A hash set of slot numbers, looked up by a key the owner hashes and compares: about 7 bytes a slot,
/// where a `[String: Int32]` would spend about 30 (the key lives once, in the owner's records).
///
/// Open addressing with linear probing, at most 70% full (the table is sized for what it is asked to
/// hold, not to a power of two); removals leave tombstones until the next rebuild. A bucket is a byte of
/// the key's hash (`tags`) and the slot (`slots`, a parallel array), so a probe compares keys (reading
/// the owner's records, likely a cache miss) only when the byte matches (one probe in 254 otherwise):
/// looking up an absent key, as every insertion does, mostly costs one read of the byte array.
struct SlotTable: Sendable {
    /// Tags: 0 is empty, 1 a tombstone, 2...255 a slot's.
    private static let empty: UInt8 = 0
    private static let deleted: UInt8 = 1

    private var tags: [UInt8] = []
    private var slots: [Int32] = []
    private(set) var count = 0
    private var tombstones = 0

    var memoryFootprint: Int { tags.capacity + slots.capacity * MemoryLayout<Int32>.stride }

    /// True when the owner must `rebuild` before the next `insert`.
    var needsRebuild: Bool { (count + tombstones + 1) * 10 > tags.count * 7 }

    /// True when `n` slots in all fit without a rebuild.
    func canHold(_ n: Int) -> Bool { (n + tombstones) * 10 <= tags.count * 7 }

    @inline(__always)
    private static func tag(_ hash: UInt64) -> UInt8 { max(2, UInt8(truncatingIfNeeded: hash)) }

    /// The first bucket to probe: the hash's high bits scaled to the table's size.
    @inline(__always)
    private static func start(_ hash: UInt64, size: Int) -> Int {
        Int(truncatingIfNeeded: hash.multipliedFullWidth(by: UInt64(size)).high)
    }

    /// The slot holding the key, if any.
    func find(hash: UInt64, where matches: (Int32) -> Bool) -> Int32? {
        guard !tags.isEmpty else { return nil }
        let tag = Self.tag(hash)
        return tags.withUnsafeBufferPointer { t in
            slots.withUnsafeBufferPointer { s in
                var i = Self.start(hash, size: t.count)
                while true {
                    let bucket = t[i]
                    if bucket == Self.empty { return nil }
                    if bucket == tag && matches(s[i]) { return s[i] }
                    i += 1
                    if i == t.count { i = 0 }
                }
            }
        }
    }

    /// Adds a slot whose key is not in the table yet. Call `rebuild` first when `needsRebuild`.
    mutating func insert(_ slot: Int32, hash: UInt64) {
        precondition(!needsRebuild && slot >= 0)
        var i = Self.start(hash, size: tags.count)
        while tags[i] > Self.deleted {
            i += 1
            if i == tags.count { i = 0 }
        }
        if tags[i] == Self.deleted { tombstones -= 1 }
        tags[i] = Self.tag(hash)
        slots[i] = slot
        count += 1
    }

    /// Removes and returns the slot holding the key, if any.
    @discardableResult
    mutating func remove(hash: UInt64, where matches: (Int32) -> Bool) -> Int32? {
        guard !tags.isEmpty else { return nil }
        let tag = Self.tag(hash)
        var i = Self.start(hash, size: tags.count)
        while true {
            let bucket = tags[i]
            if bucket == Self.empty { return nil }
            if bucket == tag && matches(slots[i]) {
                // A tombstone keeps later probes for other keys going; the next rebuild drops it.
                tags[i] = Self.deleted
                count -= 1
                tombstones += 1
                return slots[i]
            }
            i += 1
            if i == tags.count { i = 0 }
        }
    }

    /// Re-hashes `slots` (every slot in the table) into a fresh table with room for `capacity` slots in
    /// all (at least as many as `slots`).
    mutating func rebuild(slots live: some Sequence<Int32>, capacity: Int, hash: (Int32) -> UInt64) {
        let size = max(16, capacity * 10 / 7 + 2)
        tags = []
        slots = []
        tags = Array(repeating: Self.empty, count: size)
        slots = Array(repeating: -1, count: size)
        count = 0
        tombstones = 0
        for slot in live {
            let h = hash(slot)
            var i = Self.start(h, size: size)
            while tags[i] != Self.empty {
                i += 1
                if i == size { i = 0 }
            }
            tags[i] = Self.tag(h)
            slots[i] = slot
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
