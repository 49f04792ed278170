import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

/// The cluster's regions (Docs/cluster.md, "Regions"), against the cluster whose URL list is in
/// `GEOFENCE_BENCH_NATS` (`Scripts/nats-cluster.sh up DIR` prints it): `n` regions written to the bucket
/// as `import --nats` writes them (checked against the bucket, then pipelined), the whole bucket read back
/// as the import's check reads it, loaded as an engine loads it at start, and the time from a write to a
/// follower applying it.
func runClusterRegions(n: Int, report: Report) throws {
    // What loading costs the engine besides NATS: each value read back into a region, on one thread.
    let values = Country.regions(n, seed: 2).map { (ClusterRegionCodec.key(for: $0.id), ClusterRegionCodec.value($0)) }
    var decoded = 0
    let written = Date()
    let decode = seconds {
        for (key, value) in values {
            if case .success = ClusterRegionCodec.region(key: key, value: value, written: written) { decoded += 1 }
        }
    }
    report.add(
        "cluster regions, \(sizeName(n))", "decode the values (ClusterRegionCodec.region), one thread, no NATS",
        "\(grouped(decode, decimals: 1)) s", "\(decoded) regions")
    guard let urls = ProcessInfo.processInfo.environment["GEOFENCE_BENCH_NATS"] else {
        progress("cluster-regions: set GEOFENCE_BENCH_NATS to a cluster's URL list (Scripts/nats-cluster.sh up DIR)")
        return
    }
    let section = "cluster regions, \(sizeName(n)), R3 on loopback"
    let store = try ClusterRegionStore(connection: try NATSConnection(urls: urls, name: "bench-writer"))
    let regions = Country.regions(n, seed: 2)
    progress("cluster regions: writing \(sizeName(n))")
    let requestID = "bench-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
    // GEOFENCE_BENCH_SKIP_WRITE=1: the bucket holds them already (a second run on the same cluster).
    let skipWrite = ProcessInfo.processInfo.environment["GEOFENCE_BENCH_SKIP_WRITE"] == "1"
    let write = try seconds { if !skipWrite { try store.importAll(regions, replace: true, requestID: requestID) } }
    if !skipWrite {
        report.add(
            section, "import (check against the bucket, pipelined writes, read back)",
            "\(grouped(write, decimals: 1)) s",
            "\(grouped(Double(n) / write)) regions/s")
    }
    var keys = 0
    let scan = try seconds { keys = try store.scan(values: false).count }
    report.add(
        section, "read every key's last write, headers only (the import's check)", "\(grouped(scan, decimals: 1)) s",
        "\(keys) keys")

    progress("cluster regions: loading \(sizeName(n))")
    let loaded = LoadedCount()
    let follower = ClusterRegions(
        connection: try NATSConnection(urls: urls, name: "bench-follower"), log: { progress($0) },
        apply: { batch in loaded.add(batch) })
    var ready = false
    let load = try seconds {
        try follower.start()
        ready = follower.waitUntilLoaded(timeout: .seconds(600))
    }
    report.add(
        section, "engine start: load the bucket (ClusterRegions)", "\(grouped(load, decimals: 1)) s",
        "\(loaded.initialCount) regions\(ready ? "" : ", NOT LOADED")")

    // For comparison: nats.c's own key-value watch (the last value of each key, then `.caughtUp`), values
    // only, nothing decoded.
    progress("cluster regions: nats.c's KV watch of \(sizeName(n))")
    var watched = 0
    let watch = try seconds {
        let watcher = try store.bucket.watch()
        while let update = try watcher.next(timeout: .seconds(120)) {
            if case .caughtUp = update { break }
            watched += 1
        }
        watcher.stop()
    }
    report.add(
        section, "the same keys through nats.c's KV watch (kvStore_Watch), not decoded",
        "\(grouped(watch, decimals: 1)) s",
        "\(watched) entries")

    progress("cluster regions: latency of a change")
    var latencies: [Double] = []
    for index in 0..<20 {
        let region = try Region(
            id: "bench-latency-\(index)", center: Coordinate(latitude: 10, longitude: 10), radius: 100)
        let before = loaded.changeCount
        let started = nanoseconds()
        _ = try store.add(region, replace: true, requestID: nil)
        while loaded.changeCount == before && nanoseconds() - started < 5_000_000_000 { usleep(200) }
        latencies.append(Double(nanoseconds() - started) / 1e6)
    }
    follower.stop()
    latencies.sort()
    report.add(
        section, "a change, written until a follower applied it (20)",
        "median \(grouped(latencies[latencies.count / 2], decimals: 1)) ms",
        "max \(grouped(latencies.last ?? 0, decimals: 1)) ms")
}

/// What the follower applied, counted on its thread.
private final class LoadedCount: @unchecked Sendable {
    // @unchecked: touched with `lock` held.
    private let lock = NSLock()
    private var initial = 0
    private var changes = 0

    func add(_ batch: ClusterRegions.Batch) {
        lock.withLock {
            if batch.initial { initial = batch.changes.count } else { changes += batch.changes.count }
        }
    }

    var initialCount: Int { lock.withLock { initial } }
    var changeCount: Int { lock.withLock { changes } }
}
