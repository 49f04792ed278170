/// The member names a decoder looks for, prepared once, so that
/// `JSON.forEachMember(in:matching:_:)` recognizes a key by comparing two machine words instead of
/// building a string and comparing it with each name (most of the cost of decoding a gpsd line).
///
/// Usually built from a string enum and kept in a `static let`:
///
///     enum TPVField: String, CaseIterable { case `class`, time, lat, lon, eph }
///     static let tpvFields = JSONKeyTable(TPVField.self)
package struct JSONKeyTable<Key: RawRepresentable & Sendable>: Sendable where Key.RawValue == String {
    @usableFromInline let keys: [Key]
    /// The matching itself is not generic, so that it runs at full speed without specialization.
    @usableFromInline let index: JSONKeyIndex

    /// A table of the given keys; two keys with the same name trap (a programming error).
    package init(_ keys: some Sequence<Key>) {
        self.keys = Array(keys)
        self.index = JSONKeyIndex(names: self.keys.map(\.rawValue))
    }

    /// A table of all cases of a string enum.
    package init(_ type: Key.Type) where Key: CaseIterable {
        self.init(type.allCases)
    }
}

/// Finds a raw key's position in a fixed list of names: the untyped core of `JSONKeyTable`.
@usableFromInline
struct JSONKeyIndex: Sendable {
    private let names: [String]
    /// Each name packed, or nil for names longer than 15 bytes or not ASCII.
    private let packed: [PackedKey?]
    /// Open-addressing hash table of positions in `names` (-1: empty), for the packed names.
    private let slots: [Int]
    private let slotShift: UInt64
    /// Whether some name does not pack; only then does a packed key need a string comparison.
    private let hasUnpackedNames: Bool

    init(names: [String]) {
        var bits: UInt64 = 3
        while 1 << bits < 4 * names.count { bits += 1 }  // at most a quarter full: short probes
        var slots = [Int](repeating: -1, count: 1 << bits)
        var packed: [PackedKey?] = []
        for (position, name) in names.enumerated() {
            precondition(!names[..<position].contains(name), "duplicate name \"\(name)\" in JSONKeyTable")
            let packedName = PackedKey(ascii: name.utf8)
            packed.append(packedName)
            guard let packedName else { continue }
            var slot = Self.slot(of: packedName, shift: 64 - bits, count: slots.count)
            while slots[slot] >= 0 { slot = (slot + 1) & (slots.count - 1) }
            slots[slot] = position
        }
        self.names = names
        self.packed = packed
        self.slots = slots
        self.slotShift = 64 - bits
        self.hasUnpackedNames = packed.contains { $0 == nil }
    }

    /// The position of the name `raw` spells, or nil when it is not listed.
    func position(of raw: RawKey) -> Int? {
        if let name = raw.packed {
            var slot = Self.slot(of: name, shift: slotShift, count: slots.count)
            while slots[slot] >= 0 {
                if packed[slots[slot]] == name { return slots[slot] }
                slot = (slot + 1) & (slots.count - 1)
            }
            guard hasUnpackedNames else { return nil }
        }
        // Rare: a long or non-ASCII key (or name). Compare as Swift strings, like JSONObject,
        // so that both ways of reading a document agree on which key is which.
        let string = raw.string
        return names.firstIndex(of: string)
    }

    private static func slot(of name: PackedKey, shift: UInt64, count: Int) -> Int {
        let mixed = (name.low &* 0x9E37_79B9_7F4A_7C15) ^ (name.high &* 0xC2B2_AE3D_27D4_EB4F)
        return Int(truncatingIfNeeded: mixed >> shift) & (count - 1)
    }
}
