import Foundation

/// The regions waiting for their expiry time, earliest first: a binary min-heap.
///
/// A region removed before it expires leaves its entry behind (skipped when it comes up, since its sequence
/// number no longer finds a region), and the heap is rebuilt when such leftovers outnumber the live ones.
struct ExpiryQueue: Sendable {
    struct Entry: Sendable {
        var at: Date
        var seq: Int64

        /// Earlier first; among equal times, the region inserted first (sequence numbers grow).
        func precedes(_ other: Entry) -> Bool { at < other.at || (at == other.at && seq < other.seq) }
    }

    private(set) var entries: [Entry] = []
    /// Regions with an expiry that are still monitored (entries beyond these are leftovers).
    private var live = 0

    var first: Entry? { entries.first }

    var memoryFootprint: Int { entries.capacity * MemoryLayout<Entry>.stride }

    mutating func push(_ entry: Entry) {
        live += 1
        entries.append(entry)
        var i = entries.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard entries[i].precedes(entries[parent]) else { break }
            entries.swapAt(i, parent)
            i = parent
        }
    }

    /// Takes the earliest entry out (it may be a leftover: the caller checks its region still exists).
    mutating func pop() {
        let last = entries.removeLast()
        guard !entries.isEmpty else { return }
        entries[0] = last
        siftDown(from: 0)
    }

    /// A region with an expiry left monitoring (removed, replaced, or expired). True when the leftovers
    /// now outnumber the live entries enough for `rebuild` to be worth calling.
    mutating func regionLeft() -> Bool {
        live -= 1
        return entries.count > 2 * live + 64
    }

    /// Starts over from the live entries.
    mutating func rebuild(_ live: [Entry]) {
        entries = live
        self.live = entries.count
        for i in stride(from: entries.count / 2, through: 0, by: -1) { siftDown(from: i) }
    }

    private mutating func siftDown(from start: Int) {
        var i = start
        while true {
            var first = i
            let left = 2 * i + 1
            if left < entries.count && entries[left].precedes(entries[first]) { first = left }
            if left + 1 < entries.count && entries[left + 1].precedes(entries[first]) { first = left + 1 }
            guard first != i else { return }
            entries.swapAt(i, first)
            i = first
        }
    }
}
