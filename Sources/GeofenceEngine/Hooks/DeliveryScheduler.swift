import Foundation
import GeofenceStore

/// Which deliveries may start: the head of each order key (its first pending or running delivery), ordered
/// by when it is due.
///
/// Only heads are held, never the backlog behind them, so memory grows with the number of keys that have work
/// (regions × hooks), not with the number of events waiting. The store gives the next head of a key when one
/// finishes.
struct DeliveryScheduler {
    private var heads: [String: DeliveryHead] = [:]
    /// Not-running heads by due time; stale entries (a head replaced or started since) are skipped when met.
    private var queue = MinHeap()

    var keyCount: Int { heads.count }
    var runningCount: Int { heads.values.reduce(0) { $0 + ($1.running ? 1 : 0) } }
    var isEmpty: Bool { heads.isEmpty }

    /// Replaces everything with `heads` (after a restart, or when the CLI changed deliveries); keys that have a
    /// delivery running keep it as their head, whatever the store says, until it finishes.
    mutating func reload(_ loaded: [DeliveryHead], running: [String: DeliveryHead]) {
        held.removeAll()
        heads = running
        for head in loaded where heads[head.orderKey] == nil {
            // A delivery the store still calls running but no worker runs (cannot happen after recovery) would
            // block its key for good: schedule it as if pending; the claim will tell.
            var head = head
            head.running = false
            heads[head.orderKey] = head
        }
        queue = MinHeap()
        for head in heads.values where !head.running { queue.push(head) }
    }

    /// A new delivery: it becomes its key's head when the key has none (otherwise it waits behind it).
    mutating func offer(_ head: DeliveryHead) {
        guard heads[head.orderKey] == nil else { return }
        heads[head.orderKey] = head
        queue.push(head)
    }

    /// Sets (or, with nil, clears) the head of `key`, once its previous head finished or was found stale.
    mutating func setHead(_ head: DeliveryHead?, for key: String) {
        if let head {
            heads[key] = head
            if !head.running { queue.push(head) }
        } else {
            heads[key] = nil
        }
    }

    func head(for key: String) -> DeliveryHead? { heads[key] }

    /// The heads due at `now`, at most `limit`, earliest first; they are marked running.
    /// Heads set aside by `takeDue(holding:)` (location-bearing ones while Location Services are off).
    private var held: [DeliveryHead] = []

    var hasHeld: Bool { !held.isEmpty }

    /// Puts the held heads back in line.
    mutating func release() {
        for head in held where heads[head.orderKey] == head { queue.push(head) }
        held.removeAll()
    }

    mutating func takeDue(now: Date, limit: Int, holding: (DeliveryHead) -> Bool = { _ in false }) -> [DeliveryHead] {
        var taken: [DeliveryHead] = []
        while taken.count < limit, let top = queue.peek(), top.nextAttemptAt <= now {
            queue.pop()
            guard var head = heads[top.orderKey], head == top else { continue }
            if holding(head) {
                held.append(head)
                continue
            }
            head.running = true
            heads[top.orderKey] = head
            taken.append(head)
        }
        return taken
    }

    /// When the earliest waiting head is due.
    mutating func nextDue() -> Date? {
        while let top = queue.peek() {
            if let head = heads[top.orderKey], head == top { return top.nextAttemptAt }
            queue.pop()
        }
        return nil
    }
}

/// A binary min-heap of heads by (due time, id).
struct MinHeap {
    private var items: [DeliveryHead] = []

    var count: Int { items.count }

    private static func less(_ a: DeliveryHead, _ b: DeliveryHead) -> Bool {
        a.nextAttemptAt != b.nextAttemptAt ? a.nextAttemptAt < b.nextAttemptAt : a.id < b.id
    }

    func peek() -> DeliveryHead? { items.first }

    mutating func push(_ item: DeliveryHead) {
        items.append(item)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.less(items[child], items[parent]) else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    @discardableResult
    mutating func pop() -> DeliveryHead? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let top = items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < items.count && Self.less(items[left], items[smallest]) { smallest = left }
            if right < items.count && Self.less(items[right], items[smallest]) { smallest = right }
            if smallest == parent { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
        return top
    }
}
