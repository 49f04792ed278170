import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

/// `import` of `n` regions through `StateStore.importRegions`, then the daemon's start with them: opening
/// the store and `FixPipeline.load()`, once right after the import (every region still waiting for an
/// engine) and once more as a plain restart.
func runStore(n: Int, importing: Bool, starting: Bool, report: Report) throws {
    let name = sizeName(n)
    let directory = TemporaryDirectory("store")
    defer { directory.remove() }
    let regions = Country.regions(n, seed: 1)

    progress("import, \(name) regions")
    let store = try StateStore(directory: directory.path)
    let importTime = try seconds { try store.importRegions(regions) }
    try store.queue.close()
    if importing {
        report.add(
            "store, \(name) regions", "import (StateStore.importRegions)", "\(grouped(importTime, decimals: 2)) s",
            "\(grouped(Double(n) / importTime)) regions/s")
        let bytes =
            (try? FileManager.default.attributesOfItem(atPath: directory.path + "/" + StateStore.fileName)[.size])
            as? Int ?? 0
        report.add(
            "store, \(name) regions", "database size", "\(grouped(Double(bytes) / Double(n), decimals: 1)) B/region")
    }
    guard starting else { return }

    for label in ["first start after the import", "restart"] {
        progress("daemon start, \(name) regions, \(label)")
        var loaded = 0
        let time = try seconds {
            let store = try StateStore(directory: directory.path)
            let pipeline = FixPipeline(store: store)
            try pipeline.load()
            loaded = pipeline.monitor.regionCount
        }
        report.add(
            "store, \(name) regions", "daemon start (open + FixPipeline.load), \(label)",
            "\(grouped(time, decimals: 2)) s", "\(grouped(Double(loaded))) regions monitored")
    }
}
