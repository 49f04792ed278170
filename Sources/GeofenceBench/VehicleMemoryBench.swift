import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

/// Memory a vehicle costs in the engine's fix path, by part: `n` vehicles, two fixes each (as
/// `Scripts/bench-vehicles.sh` feeds the daemon), through the epoch assembler, the fix filter and the monitor on
/// their own, then through a whole `FixPipeline` with a real store and no regions. Each part is kept alive while
/// the next is built, so each row is the resident memory (RSS) that part added.
func runVehicleMemory(n: Int, report: Report) throws {
    let section = "memory per vehicle, \(sizeName(n)) vehicles, two fixes each"
    progress(section)
    let start = Date()
    var fixes: [Fix] = []
    fixes.reserveCapacity(2 * n)
    for round in 0..<2 {
        for v in 0..<n {
            let latitude: Double = 45 + Double(v % 1000) * 0.001
            let longitude: Double = 4 + Double(v / 1000) * 0.001 + Double(round) * 0.0001
            fixes.append(
                Fix(
                    subject: "veh-" + String(v).leftPadded(to: 6), time: start.addingTimeInterval(Double(round)),
                    mode: .threeD, latitude: latitude, longitude: longitude, horizontalAccuracy: 5))
        }
    }
    func perVehicle(_ bytes: Int) -> String { "\(grouped(Double(bytes) / Double(n), decimals: 0)) B" }

    var before = residentBytes()
    var assembler = EpochAssembler(settle: 0)
    for fix in fixes { _ = assembler.offer(fix, now: 0) }
    report.add(section, "epoch assembler (EpochAssembler)", perVehicle(residentBytes() - before))

    before = residentBytes()
    var filter = FixFilter()
    var weighted: [WeightedFix] = []
    weighted.reserveCapacity(fixes.count)
    for fix in fixes { if case .accepted(let w) = filter.evaluate(fix) { weighted.append(w) } }
    let filterBytes = residentBytes() - before - weighted.capacity * MemoryLayout<WeightedFix>.stride
    report.add(section, "fix filter (FixFilter)", perVehicle(filterBytes))

    before = residentBytes()
    var monitor = RegionMonitor()
    for fix in weighted { _ = monitor.process(fix, now: start) }
    report.add(section, "monitor (RegionMonitor: tracks, motion checks)", perVehicle(residentBytes() - before))
    weighted = []

    let directory = TemporaryDirectory("vehicles")
    defer { directory.remove() }
    let store = try StateStore(directory: directory.path + "/state")
    before = residentBytes()
    let pipeline = FixPipeline(store: store, settle: 0, clock: { start })
    try pipeline.load()
    _ = try pipeline.processForEvents(batch: fixes)
    _ = try pipeline.finish()
    report.add(
        section, "the whole fix path (FixPipeline: the three above and its own entries)",
        perVehicle(residentBytes() - before), "with a store; no regions")
    consume((assembler, filter, monitor, pipeline))
}
