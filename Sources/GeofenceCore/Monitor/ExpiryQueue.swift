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

    private var entries = Heap(by: ExpiryQueue.precedes)
    /// Regions with an expiry that are still monitored (entries beyond these are leftovers).
    private var live = 0

    private static let precedes: @Sendable (Entry, Entry) -> Bool = { $0.precedes($1) }

    var first: Entry? { entries.first }

    var memoryFootprint: Int { entries.capacity * MemoryLayout<Entry>.stride }

    mutating func push(_ entry: Entry) {
        live += 1
        entries.push(entry)
    }

    /// Takes the earliest entry out (it may be a leftover: the caller checks its region still exists).
    mutating func pop() {
        entries.popFirst()
    }

    /// A region with an expiry left monitoring (removed, replaced, or expired). True when the leftovers
    /// now outnumber the live entries enough for `rebuild` to be worth calling.
    mutating func regionLeft() -> Bool {
        live -= 1
        return entries.count > 2 * live + 64
    }

    /// Starts over from the live entries.
    mutating func rebuild(_ live: [Entry]) {
        entries = Heap(live, by: ExpiryQueue.precedes)
        self.live = entries.count
    }
}
