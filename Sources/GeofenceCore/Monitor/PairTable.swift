/// A subject's pairs by region slot.
///
/// A subject is inside or near a handful of regions, so two small arrays searched in order beat a
/// dictionary: one short, contiguous read instead of a hash and a scattered bucket (the pairs of a fleet's
/// subjects are rarely in the cache). Past `indexThreshold` pairs, a dictionary index keeps lookups
/// constant-time.
struct PairTable<Pair: Sendable>: Sendable {
    private(set) var slots: [Int32] = []
    private var pairs: [Pair] = []
    private var index: [Int32: Int]?
    private static var indexThreshold: Int { 32 }

    var isEmpty: Bool { slots.isEmpty }

    subscript(slot: Int32) -> Pair? {
        get { position(of: slot).map { pairs[$0] } }
        set {
            if let i = position(of: slot) {
                if let newValue {
                    pairs[i] = newValue
                } else {
                    remove(at: i)
                }
            } else if let newValue {
                slots.append(slot)
                pairs.append(newValue)
                if index != nil {
                    index![slot] = slots.count - 1
                } else if slots.count > Self.indexThreshold {
                    index = Dictionary(uniqueKeysWithValues: slots.enumerated().map { ($0.element, $0.offset) })
                }
            }
        }
    }

    private func position(of slot: Int32) -> Int? {
        if let index { return index[slot] }
        return slots.firstIndex(of: slot)
    }

    private mutating func remove(at i: Int) {
        let removed = slots[i]
        let last = slots.count - 1
        if i != last {
            slots[i] = slots[last]
            pairs[i] = pairs[last]
            index?[slots[i]] = i
        }
        slots.removeLast()
        pairs.removeLast()
        index?[removed] = nil
        if slots.count < Self.indexThreshold / 2 { index = nil }
    }
}
