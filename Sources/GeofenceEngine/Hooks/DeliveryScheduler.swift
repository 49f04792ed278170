import Foundation
import GeofenceCore
import GeofenceStore

/// Which deliveries may start: the head of each order key (its first pending or running delivery), ordered
/// by when it is due.
///
/// Only heads are held, never the backlog behind them, so memory grows with the number of keys that have work
/// (regions × hooks), not with the number of events waiting. The store gives the next head of a key when one
/// finishes.
package struct DeliveryScheduler {
    private var heads: [DeliveryOrderKey: DeliveryHead] = [:]
    /// Not-running heads by due time; stale entries (a head replaced or started since) are skipped when met.
    private var queue = Heap(by: DeliveryScheduler.dueFirst)

    /// The queue's order: by due time, then id.
    private static let dueFirst: @Sendable (DeliveryHead, DeliveryHead) -> Bool = { a, b in
        a.nextAttemptAt != b.nextAttemptAt ? a.nextAttemptAt < b.nextAttemptAt : a.id < b.id
    }

    package init() {}

    package var keyCount: Int { heads.count }
    var runningCount: Int { heads.values.reduce(0) { $0 + ($1.running ? 1 : 0) } }
    var isEmpty: Bool { heads.isEmpty }

    /// Replaces everything with `heads` (after a restart, or when the CLI changed deliveries); keys that have a
    /// delivery running keep it as their head, whatever the store says, until it finishes.
    mutating func reload(_ loaded: [DeliveryHead], running: [DeliveryOrderKey: DeliveryHead]) {
        held.removeAll()
        heads = running
        for head in loaded where heads[head.orderKey] == nil {
            // A delivery the store still calls running but no worker runs (cannot happen after recovery) would
            // block its key for good: schedule it as if pending; the claim will tell.
            var head = head
            head.running = false
            heads[head.orderKey] = head
        }
        queue = Heap(by: DeliveryScheduler.dueFirst)
        for head in heads.values where !head.running { queue.push(head) }
    }

    /// A new delivery: it becomes its key's head when the key has none (otherwise it waits behind it).
    package mutating func offer(_ head: DeliveryHead) {
        guard heads[head.orderKey] == nil else { return }
        heads[head.orderKey] = head
        queue.push(head)
    }

    /// Sets (or, with nil, clears) the head of `key`, once its previous head finished or was found stale.
    package mutating func setHead(_ head: DeliveryHead?, for key: DeliveryOrderKey) {
        if let head {
            heads[key] = head
            if !head.running { queue.push(head) }
        } else {
            heads[key] = nil
        }
    }

    func head(for key: DeliveryOrderKey) -> DeliveryHead? { heads[key] }

    /// The heads due at `now`, at most `limit`, earliest first; they are marked running.
    /// Heads set aside by `takeDue(holding:)` (location-bearing ones while Location Services are off).
    private var held: [DeliveryHead] = []

    var hasHeld: Bool { !held.isEmpty }

    /// Puts the held heads back in line.
    mutating func release() {
        for head in held where heads[head.orderKey] == head { queue.push(head) }
        held.removeAll()
    }

    package mutating func takeDue(now: Date, limit: Int, holding: (DeliveryHead) -> Bool = { _ in false })
        -> [DeliveryHead]
    {
        var taken: [DeliveryHead] = []
        while taken.count < limit, let top = queue.first, top.nextAttemptAt <= now {
            queue.popFirst()
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
    package mutating func nextDue() -> Date? {
        while let top = queue.first {
            if let head = heads[top.orderKey], head == top { return top.nextAttemptAt }
            queue.popFirst()
        }
        return nil
    }
}
