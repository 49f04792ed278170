/// An ASCII key of at most 15 bytes packed into two words, so that comparing two keys is two
/// integer compares. Two packable keys are equal exactly when their packed forms are: the bytes
/// and the length are all stored, and ASCII strings are canonically equivalent only to themselves.
struct PackedKey: Hashable {
    var low: UInt64
    var high: UInt64

    static let maximumLength = 15

    /// Nil when `bytes` is longer than 15 or not all ASCII.
    init?(ascii bytes: some Collection<UInt8>) {
        guard bytes.count <= Self.maximumLength else { return nil }
        var low: UInt64 = 0
        var high = UInt64(bytes.count) << 56
        var offset = 0
        for byte in bytes {
            guard byte < 0x80 else { return nil }
            if offset < 8 {
                low |= UInt64(byte) << (8 * offset)
            } else {
                high |= UInt64(byte) << (8 * (offset - 8))
            }
            offset += 1
        }
        self.low = low
        self.high = high
    }

    init(low: UInt64, high: UInt64) {
        self.low = low
        self.high = high
    }

    /// The key as a string again, for when the tracker moves to a `Set<String>`.
    var string: String {
        let length = Int(high >> 56)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(length)
        for offset in 0..<length {
            let word = offset < 8 ? low >> (8 * offset) : high >> (8 * (offset - 8))
            bytes.append(UInt8(truncatingIfNeeded: word))
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// The keys seen so far in one object, for rejecting duplicates in `JSON.forEachMember` without
/// building the object and, for gpsd-sized objects, without allocating.
///
/// Short ASCII keys live packed in caller-provided (stack) storage and are compared linearly,
/// which for ~20 keys is a few hundred integer compares. The first key that does not pack, or
/// the first beyond the storage's capacity, moves everything to a `Set<String>`: Swift's seeded
/// hashing keeps hostile objects with many keys linear, and string equality there matches
/// `JSONObject`'s, so both parsing paths accept and reject the same documents.
struct KeyTracker {
    static let inlineCapacity = 64

    private let storage: UnsafeMutableBufferPointer<PackedKey>
    private var count = 0
    private var seen: UInt64 = 0
    private var spilled: Set<String>?

    init(storage: UnsafeMutableBufferPointer<PackedKey>) {
        self.storage = storage
    }

    /// Records `key` and returns true, or returns false if it was already seen.
    mutating func insert(_ key: RawKey) -> Bool {
        if spilled == nil {
            if let packed = key.packed {
                // A one-word Bloom filter: a key whose bit is not yet set is new, which spares
                // most keys the linear comparison.
                let bit: UInt64 = 1 &<< (((packed.low ^ packed.high) &* 0x9E37_79B9_7F4A_7C15) &>> 58)
                if seen & bit != 0 {
                    for position in 0..<count where storage[position] == packed {
                        return false
                    }
                }
                seen |= bit
                if count < storage.count {
                    storage.baseAddress!.advanced(by: count).initialize(to: packed)
                    count += 1
                    return true
                }
            }
            var all = Set<String>(minimumCapacity: 2 * (count + 1))
            for position in 0..<count {
                all.insert(storage[position].string)
            }
            spilled = all
        }
        return spilled!.insert(key.string).inserted
    }
}
