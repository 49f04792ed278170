import Foundation
import GeofenceCore
import GeofenceStore

/// The outbox's two readers: a sink paging through `n` events with `events(after:limit:)` (pages of 1000,
/// as the sink runner reads), and hook dispatch creating one delivery per event for one global hook
/// (`dispatchDeliveries`, pages of 500). Each is the median of a few rounds over the same database.
func runOutbox(n: Int, report: Report) throws {
    let name = sizeName(n)
    let section = "outbox, \(name) events"
    let directory = TemporaryDirectory("outbox")
    defer { directory.remove() }
    progress("outbox: writing \(name) events")
    let store = try StateStore(directory: directory.path)
    let start = Date(timeIntervalSince1970: 1_700_000_000)
    var batch: [StateEvent] = []
    for i in 0..<n {
        batch.append(
            StateEvent(
                id: "event-\(i)", type: .device, time: start.addingTimeInterval(Double(i)), state: "added",
                subject: "vehicle-\(i % 1000)", reason: "a benchmark event"))
        if batch.count == 10_000 || i == n - 1 {
            try store.outbox.append(batch, now: start)
            batch.removeAll(keepingCapacity: true)
        }
    }

    progress("outbox: reading \(name) events as a sink does")
    var reads: [Double] = []
    for _ in 0..<5 {
        var count = 0
        reads.append(
            try seconds {
                var after: Int64 = 0
                while true {
                    let page = try store.outbox.events(after: after, limit: 1000)
                    guard let last = page.last else { break }
                    count += page.count
                    after = last.seq
                }
            })
        precondition(count == n, "read \(count) of \(n) events")
    }
    let read = median(reads)
    report.add(
        section, "sink read (events(after:limit: 1000)), median of 5", "\(grouped(read, decimals: 3)) s",
        "\(grouped(Double(n) / read)) events/s")

    progress("outbox: dispatching \(name) events to one hook")
    _ = try store.deliveries.addHook(GlobalHook(id: "bench", events: [], command: "true", createdAt: start))
    var dispatches: [Double] = []
    for _ in 0..<3 {
        try store.queue.write { db in
            try db.execute("DELETE FROM deliveries")
            try db.execute("UPDATE hook_dispatch SET cursor = 0 WHERE id = 1")
        }
        var created = 0
        dispatches.append(
            try seconds {
                while true {
                    let result = try store.deliveries.dispatchDeliveries(limit: 500, now: start)
                    created += result.created.count
                    if !result.more { break }
                }
            })
        precondition(created == n, "dispatched \(created) of \(n) events")
    }
    let dispatch = median(dispatches)
    report.add(
        section, "hook dispatch (dispatchDeliveries(limit: 500)), median of 3", "\(grouped(dispatch, decimals: 3)) s",
        "\(grouped(Double(n) / dispatch)) events/s")
}
