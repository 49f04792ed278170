/// Subjects numbered from 0, each found by its name through one dictionary, or through a hint: a slot a
/// caller kept from an earlier look-up (`FixPipeline` keeps one for each part of the fix path), taken only when
/// the name at that slot is the subject's. A stale hint (the subject removed, another moved into its slot,
/// a slot past the end) falls back to the name, so a hint can make a look-up cheaper, never wrong.
///
/// The owner keeps its values in arrays beside `names`, and moves them as `remove(at:)` says.
package struct SubjectSlots: Sendable {
    /// Each slot's subject.
    package private(set) var names: [String] = []
    private var slotByName: [String: Int] = [:]

    package init() {}

    package var count: Int { names.count }

    /// The subject's slot (nil: it has none), trying `hint` first.
    @inline(__always)
    package func slot(of subject: String, hint: Int) -> Int? {
        if hint >= 0, hint < names.count, names[hint] == subject { return hint }
        return slotByName[subject]
    }

    /// The subject's slot, by its name alone.
    package func slot(of subject: String) -> Int? { slotByName[subject] }

    /// Gives a subject that has no slot the next one (`count` before the call).
    package mutating func append(_ subject: String) -> Int {
        let slot = names.count
        slotByName[subject] = slot
        names.append(subject)
        return slot
    }

    /// Takes `slot` away: the last slot's subject moves into it (unless it was the last). The owner does the
    /// same with its values: `values.swapAt(slot, count - 1)` then `values.removeLast()`, before or after.
    package mutating func remove(at slot: Int) {
        let last = names.count - 1
        slotByName[names[slot]] = nil
        if slot != last {
            names.swapAt(slot, last)
            slotByName[names[slot]] = slot
        }
        names.removeLast()
    }

    /// Whether many slots were taken away since the storage grew: worth `compact()`.
    package var isSparse: Bool { slotByName.isSparse || names.isSparse }

    /// Gives back the storage of slots taken away.
    package mutating func compact() {
        names = Array(names)
        slotByName = slotByName.compacted
    }
}
