/// Slots by sequence number, for a monitor's regions.
///
/// Sequence numbers grow with every insertion (the store's `AUTOINCREMENT`), so this is two arrays kept
/// sorted by construction: an insertion appends, a lookup is a binary search, a removal leaves a hole
/// (slot -1) until holes are half the entries. Loading a million regions in order then costs no random
/// memory access at all, where a hash table would cost a cache miss each. An out-of-order insertion is
/// still correct, at the price of moving the entries after it.
struct SeqIndex: Sendable {
    private var seqs: [Int64] = []
    private var slots: [Int32] = []
    private var holes = 0

    var memoryFootprint: Int { seqs.capacity * 8 + slots.capacity * 4 }

    mutating func reserveCapacity(_ n: Int) {
        seqs.reserveCapacity(n)
        slots.reserveCapacity(n)
    }

    /// Maps `seq` to `slot`; a sequence number already present now belongs to `slot`.
    mutating func insert(seq: Int64, slot: Int32) {
        guard let last = seqs.last, seq <= last else {
            seqs.append(seq)
            slots.append(slot)
            return
        }
        let i = lowerBound(seq)
        if seqs[i] == seq {
            if slots[i] < 0 { holes -= 1 }
            slots[i] = slot
        } else {
            seqs.insert(seq, at: i)
            slots.insert(slot, at: i)
        }
    }

    func slot(seq: Int64) -> Int32? {
        let i = lowerBound(seq)
        guard i < seqs.count, seqs[i] == seq, slots[i] >= 0 else { return nil }
        return slots[i]
    }

    /// Forgets `seq` if it still belongs to `slot`.
    mutating func remove(seq: Int64, slot: Int32) {
        let i = lowerBound(seq)
        guard i < seqs.count, seqs[i] == seq, slots[i] == slot else { return }
        slots[i] = -1
        holes += 1
        if holes > 1024 && holes * 2 > seqs.count { compact() }
    }

    /// The first position whose sequence number is not below `seq`.
    private func lowerBound(_ seq: Int64) -> Int {
        var low = 0
        var high = seqs.count
        while low < high {
            let mid = (low + high) / 2
            if seqs[mid] < seq {
                low = mid + 1
            } else {
                high = mid
            }
        }
        return low
    }

    private mutating func compact() {
        var keptSeqs: [Int64] = []
        var keptSlots: [Int32] = []
        keptSeqs.reserveCapacity(seqs.count - holes)
        keptSlots.reserveCapacity(seqs.count - holes)
        for i in seqs.indices where slots[i] >= 0 {
            keptSeqs.append(seqs[i])
            keptSlots.append(slots[i])
        }
        seqs = keptSeqs
        slots = keptSlots
        holes = 0
    }
}
