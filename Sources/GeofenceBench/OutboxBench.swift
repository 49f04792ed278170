import Foundation
import GeofenceCore
import GeofenceStore

/// The store's hot readers, by the CPU time of the reading thread (median of 5 rounds over one database):
/// the daemon start's region snapshot (`monitoringSnapshot` of `regions` regions, in chunks of 50,000 as
/// `FixPipeline.load` reads), a sink paging through `n` events (`events(after:limit: 1000)`, as the sink
/// runner reads), and hook dispatch creating one delivery per event for one global hook
/// (`dispatchDeliveries(limit: 500)`).
func runOutbox(n: Int, regions: Int, report: Report) throws {
    let section = "store reads, \(sizeName(regions)) regions, \(sizeName(n)) events"
    let directory = TemporaryDirectory("outbox")
    defer { directory.remove() }
    progress("store reads: writing \(sizeName(regions)) regions and \(sizeName(n)) events")
    let store = try StateStore(directory: directory.path)
    try store.regions.addAll(Country.regions(regions, seed: 1))
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

    func cpuSeconds(rounds: Int, _ body: () throws -> Int, expect: Int) throws -> Double {
        var times: [Double] = []
        for _ in 0..<rounds {
            let before = threadNanoseconds()
            let count = try body()
            times.append(Double(threadNanoseconds() - before) / 1e9)
            precondition(count == expect, "read \(count) of \(expect)")
        }
        return median(times)
    }

    progress("store reads: the region snapshot")
    let snapshot = try cpuSeconds(
        rounds: 5,
        {
            try countPages(of: 50_000, { $0.seq }) {
                try store.regions.monitoringSnapshot(after: $0, upTo: .max, limit: $1)
            }
        }, expect: regions)
    report.add(
        section, "region snapshot (monitoringSnapshot), CPU s, median of 5", "\(grouped(snapshot, decimals: 3)) s",
        "\(grouped(Double(regions) / snapshot)) regions/s")

    progress("store reads: a sink's reads")
    let read = try cpuSeconds(
        rounds: 5,
        {
            try countPages(of: 1000, { $0.seq }) { try store.outbox.events(after: $0, limit: $1) }
        }, expect: n)
    report.add(
        section, "sink read (events(after:limit: 1000)), CPU s, median of 5", "\(grouped(read, decimals: 3)) s",
        "\(grouped(Double(n) / read)) events/s")

    progress("store reads: hook dispatch")
    _ = try store.deliveries.addHook(GlobalHook(id: "bench", events: [], command: "true", createdAt: start))
    let dispatch = try cpuSeconds(
        rounds: 5,
        {
            try store.queue.write { db in
                try db.execute("DELETE FROM deliveries")
                try db.execute("UPDATE hook_dispatch SET cursor = 0 WHERE id = 1")
            }
            // As the hooks' sink does: 500 events read after the cursor, their deliveries made, the cursor moved.
            var created = 0
            while true {
                let cursor = try store.deliveries.hookDispatchState().cursor
                let events = try store.outbox.events(after: cursor, limit: 500)
                if events.isEmpty { break }
                created += try store.deliveries.dispatchDeliveries(of: events, now: start).count
            }
            return created
        }, expect: n)
    report.add(
        section, "hook dispatch (dispatchDeliveries(limit: 500)), CPU s, median of 5",
        "\(grouped(dispatch, decimals: 3)) s", "\(grouped(Double(n) / dispatch)) events/s")
}

/// Reads pages of `size` after seq 0 until one comes back short, as the store's readers page; returns the
/// number of items read.
private func countPages<Item>(
    of size: Int, _ seq: (Item) -> Int64, _ page: (_ after: Int64, _ limit: Int) throws -> [Item]
) rethrows -> Int {
    var count = 0
    var after: Int64 = 0
    while true {
        let items = try page(after, size)
        count += items.count
        guard let last = items.last, items.count == size else { return count }
        after = seq(last)
    }
}
