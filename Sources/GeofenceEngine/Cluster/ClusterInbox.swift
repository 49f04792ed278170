import Foundation
import GeofenceCore

/// What the cluster engine's thread is told, in the order it happened: ownership and regions by the threads
/// that follow the leases and the region bucket, fixes by the partitions' consumers.
package enum ClusterInput: Sendable {
    /// This engine owns `partition` now, under lease `term`.
    case acquired(partition: Int, term: UInt64)
    /// This engine must stop judging `partition` (its lease is lost or given back).
    case lost(partition: Int)
    /// A region is new or changed: `seq` is the revision of its entry in the region bucket.
    case regionPut(Region, seq: Int64)
    case regionRemoved(id: String)
    /// Every change of the region bucket up to this revision has been posted (deletions included).
    case regionsTaken(upTo: Int64)
    /// A fix from a partition's consumer, with the term of the ownership whose consumer delivered it.
    case fix(NATSDelivery, partition: Int, term: UInt64)
}

/// The cluster engine's inbox: two queues, one thread taking from them. Control (ownership, regions) is never
/// refused nor waits, so that the thread renewing leases is never held up by a backlog of fixes; fixes are
/// bounded, and a consumer that finds the queue full waits (nats.c's flow control then holds the server back).
package final class ClusterInbox: @unchecked Sendable {
    // @unchecked: every field is only touched under `condition`'s lock.
    private let condition = NSCondition()
    private var control: [ClusterInput] = []
    private var fixes: [ClusterInput] = []
    private var fixHead = 0
    private var stopped = false
    /// Fixes waiting, at most.
    package let capacity: Int

    package init(capacity: Int = 20_000) {
        self.capacity = capacity
    }

    /// Queues a change of ownership or regions. Never waits.
    package func post(_ input: ClusterInput) {
        condition.lock()
        control.append(input)
        condition.broadcast()
        condition.unlock()
    }

    /// Queues a fix; waits while the queue is full. Returns false once the inbox is stopped.
    @discardableResult
    package func post(fix input: ClusterInput) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !stopped && fixes.count - fixHead >= capacity { condition.wait() }
        guard !stopped else { return false }
        fixes.append(input)
        condition.broadcast()
        return true
    }

    /// Everything control has queued, then up to `limit` fixes; waits up to `timeout` seconds for anything.
    /// Nil once stopped.
    package func take(limit: Int, timeout: Double) -> (control: [ClusterInput], fixes: ArraySlice<ClusterInput>)? {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date(timeIntervalSinceNow: timeout)
        while !stopped && control.isEmpty && fixHead == fixes.count {
            if !condition.wait(until: deadline) { break }
        }
        guard !stopped else { return nil }
        let taken = control
        control.removeAll(keepingCapacity: true)
        let end = min(fixes.count, fixHead + limit)
        let batch = fixes[fixHead..<end]
        fixHead = end
        if fixHead == fixes.count {
            fixes.removeAll(keepingCapacity: true)
            fixHead = 0
        } else if fixHead > 4096 && fixHead * 2 > fixes.count {
            fixes.removeFirst(fixHead)
            fixHead = 0
        }
        condition.broadcast()
        return (taken, batch)
    }

    /// Fixes waiting now.
    package var waitingFixes: Int {
        condition.lock()
        defer { condition.unlock() }
        return fixes.count - fixHead
    }

    /// Wakes every waiter; `take` returns nil and `post(fix:)` false from now on.
    package func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }
}
