import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore
import GeofenceSystem

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// Commit-to-hook-start latency (issue 29), with the engine otherwise idle: `n` events committed one at a time,
/// `rate` a second, into a store opened as the daemon opens it, each followed by the wake-up the daemon's
/// monitor gives (`EventDelivery.wake`), each delivered by a `HookRunner` with the default configuration to one
/// global hook, `true`. In process, with the daemon's own objects, so that no gpsd or decoding sits in front of
/// the commit; the runner, its dispatch and its hook processes are what `geofence run` runs.
///
/// The spacing (20 ms at 50 a second) leaves the engine otherwise idle on this shared 2-core machine: a
/// `true` hook's whole cycle (claim, spawn, exit, outcome recorded) takes 2-4 ms, but the event's own commit
/// (`synchronous=FULL`, as the daemon commits) takes 1-12 ms of fsync on its virtual disk, and the store's write
/// lock is held through it; at 250 a second the runner fell behind, and at 100 the committing engine held the
/// lock most of the time, so the backlog, not the runner's reaction, made the figure. The events cycle through
/// the five state event types, whose deliveries have an order key each, so none waits for the one before it.
///
/// Two clocks, both the wall clock: "commit" is when the event's transaction has returned (taken by the
/// committing thread right after it, before the wake-up); `events.created_at` is stamped as the transaction
/// starts, so it also counts the commit itself (its fsync). The hook's start is `deliveries.started_at`,
/// taken as `posix_spawn` returns, which is after the child's exec (glibc spawns with `CLONE_VFORK`).
func runHookLatency(events n: Int, rate: Double, report: Report) throws {
    let section = "hooks, \(sizeName(n)) events at \(grouped(rate))/s, hook `true`, engine otherwise idle"
    progress(section)
    let directory = TemporaryDirectory("hooks")
    defer { directory.remove() }
    let store = try StateStore(directory: directory.path)
    // As `geofence run` opens it: checkpoints on a thread of their own (`WALCheckpointer`), unless
    // GEOFENCE_BENCH_INLINE_CHECKPOINTS is set (SQLite's own, in whichever commit crosses 1,000 pages: before).
    let checkpoints =
        ProcessInfo.processInfo.environment["GEOFENCE_BENCH_INLINE_CHECKPOINTS"] == nil
        ? try store.checkpointOnThread() : nil
    defer { checkpoints?.stop() }
    _ = try store.deliveries.addHook(GlobalHook(id: "trivial", events: [], command: "true", createdAt: Date()))
    let runner = HookRunner(store: store, logger: Logger(minimum: .info))
    let finished = DispatchSemaphore(value: 0)
    Task.detached {
        await runner.run()
        finished.signal()
    }

    let kinds = StateEvent.Kind.allCases
    var committed = [Double](repeating: 0, count: n)
    let period = UInt64(1e9 / rate)
    let start = MonotonicClock.nanoseconds() + 200_000_000
    for i in 0..<n {
        sleepUntil(start + UInt64(i) * period)
        let event = StateEvent(
            id: "bench-\(i)", type: kinds[i % kinds.count], time: Date(), state: "bench", subject: "bench")
        try store.outbox.append([event], now: Date())
        committed[i] = Date().timeIntervalSince1970
        runner.wake()
    }
    // Every delivery done (each hook runs once: `true` does not fail), or a minute without progress.
    var done = 0
    var lastProgress = MonotonicClock.nanoseconds()
    while done < n {
        let now = (try store.deliveries.countsByStatus()[.done]) ?? 0
        if now > done { lastProgress = MonotonicClock.nanoseconds() }
        done = now
        if MonotonicClock.nanoseconds() - lastProgress > 60_000_000_000 { break }
        usleep(10_000)
    }
    runner.finish()
    finished.wait()
    let rows = try store.queue.read { db in
        var rows: [(id: String, created: Double, started: Double, attempts: Int64)] = []
        try db.forEachRow(
            """
            SELECT e.id, e.created_at, d.started_at, d.attempts FROM deliveries d JOIN events e ON e.seq = d.event_seq
            WHERE d.status = 'done'
            """
        ) { s in
            rows.append(
                (try s.string("id"), try s.double("created_at"), try s.double("started_at"), try s.int64("attempts")))
        }
        return rows
    }
    var fromCommit: [Double] = []
    var fromCreated: [Double] = []
    for row in rows where row.attempts == 1 {
        guard let i = Int(row.id.dropFirst("bench-".count)), committed.indices.contains(i) else { continue }
        fromCommit.append((row.started - committed[i]) * 1000)
        fromCreated.append((row.started - row.created) * 1000)
    }
    guard !fromCommit.isEmpty else {
        report.add(section, "commit -> hook started", "FAILED", "no delivery done")
        return
    }
    let note = "\(fromCommit.count) deliveries done at the first attempt, of \(n) events"
    report.add(section, "commit -> hook started", percentiles(fromCommit), note)
    report.add(
        section, "events.created_at -> hook started", percentiles(fromCreated),
        "also counts the event's own commit (fsync)")
}

/// "p50 … / p90 … / p99 … / max … ms".
private func percentiles(_ milliseconds: [Double]) -> String {
    let sorted = milliseconds.sorted()
    func p(_ q: Double) -> String {
        let rank = Int((q / 100 * Double(sorted.count)).rounded(.up)) - 1
        return String(format: "%.2f", sorted[min(sorted.count - 1, max(0, rank))])
    }
    return "p50 \(p(50)) / p90 \(p(90)) / p99 \(p(99)) / max \(String(format: "%.2f", sorted.last!)) ms"
}

/// Sleeps until the monotonic clock reads `deadline` (nanoseconds); returns at once if it is past.
private func sleepUntil(_ deadline: UInt64) {
    while true {
        let now = MonotonicClock.nanoseconds()
        if now >= deadline { return }
        let remaining = deadline - now
        var t = timespec(tv_sec: Int(remaining / 1_000_000_000), tv_nsec: Int(remaining % 1_000_000_000))
        _ = nanosleep(&t, nil)
    }
}
