/// Slots by sequence number, for a monitor's regions: 4 bytes a region.
///
/// Sequence numbers grow with every insertion (the store's `AUTOINCREMENT`), so this is one array of
/// slots kept sorted by their regions' sequence numbers by construction: an insertion appends, a lookup
/// is a binary search that reads each probed slot's sequence number from its record (`seqOf`), and no
/// sequence number is stored twice. Loading a million regions in order costs no random memory access at
/// all, where a hash table would cost a cache miss each.
///
/// A removal leaves a hole (slot -1) whose sequence number is kept aside in `holes` (its slot may be
/// reused for another region), until holes are an eighth of the entries; removing the last entry
/// leaves none. An out-of-order insertion is still correct, at the price of moving the entries after it.
struct SeqIndex: Sendable {
    private var slots: [Int32] = []
    /// The sequence numbers of the holes, by position.
    private var holes: [Int: Int64] = [:]

    var memoryFootprint: Int { slots.capacity * 4 + holes.capacity * 24 }

    mutating func reserveCapacity(_ n: Int) {
        slots.reserveCapacity(n)
    }

    /// Maps `seq` to `slot` (whose record already has that sequence number); a sequence number already
    /// present now belongs to `slot`.
    mutating func insert(seq: Int64, slot: Int32, seqOf: (Int32) -> Int64) {
        guard let last = slots.indices.last, seq <= self.seq(at: last, seqOf) else {
            slots.append(slot)
            return
        }
        var i = lowerBound(seq, seqOf)
        if i < slots.count && self.seq(at: i, seqOf) == seq {
            if slots[i] < 0 { holes[i] = nil }
            slots[i] = slot
            return
        }
        // Moving entries would move the holes' positions.
        if !holes.isEmpty {
            compact()
            i = lowerBound(seq, seqOf)
        }
        slots.insert(slot, at: i)
    }

    func slot(seq: Int64, seqOf: (Int32) -> Int64) -> Int32? {
        let i = lowerBound(seq, seqOf)
        guard i < slots.count, slots[i] >= 0, seqOf(slots[i]) == seq else { return nil }
        return slots[i]
    }

    /// Forgets `seq` if it still belongs to `slot` (whose record still has that sequence number).
    mutating func remove(seq: Int64, slot: Int32, seqOf: (Int32) -> Int64) {
        let i = lowerBound(seq, seqOf)
        guard i < slots.count, slots[i] == slot, seqOf(slot) == seq else { return }
        if i == slots.count - 1 {
            slots.removeLast()
            while let last = slots.last, last < 0 {
                holes[slots.count - 1] = nil
                slots.removeLast()
            }
            return
        }
        slots[i] = -1
        holes[i] = seq
        if holes.count > 64 && holes.count * 8 > slots.count { compact() }
    }

    @inline(__always)
    private func seq(at i: Int, _ seqOf: (Int32) -> Int64) -> Int64 {
        let slot = slots[i]
        return slot >= 0 ? seqOf(slot) : holes[i]!
    }

    /// The first position whose sequence number is not below `seq`.
    private func lowerBound(_ seq: Int64, _ seqOf: (Int32) -> Int64) -> Int {
        var low = 0
        var high = slots.count
        while low < high {
            let mid = (low + high) / 2
            if self.seq(at: mid, seqOf) < seq {
                low = mid + 1
            } else {
                high = mid
            }
        }
        return low
    }

    private mutating func compact() {
        slots.removeAll { $0 < 0 }
        holes = [:]
    }
}
