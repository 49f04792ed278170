import Foundation
import GeofenceCore

/// A partition's hand-over (issue 26): taking, encoding, decoding and restoring the decision state of `n`
/// vehicles that have driven for a while among 100,000 regions, per vehicle, and the bytes per vehicle.
func runCheckpoint(n: Int, report: Report) {
    let fixesPerVehicle = 10
    progress("checkpoint, \(sizeName(n)) vehicles: driving them")
    let regions = Country.regions(100_000, seed: 5)
    var monitor = indexedMonitor(regions)
    var filter = FixFilter()
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    for weighted in makeMovingFixes(count: n * fixesPerVehicle, subjects: n, seed: 6) {
        if case .accepted(let accepted) = filter.evaluate(weighted.fix) { _ = monitor.process(accepted, now: now) }
    }
    let subjects = monitor.subjects

    progress("checkpoint, \(sizeName(n)) vehicles: measuring")
    var checkpoint = PartitionCheckpoint(fixSequence: 0, regionSeq: 0, vehicles: [:])
    let take = medianNanosecondsPerOperation(rounds: 5) {
        checkpoint = PartitionCheckpoint(fixSequence: 1, monitor: monitor, filter: filter, subjects: subjects)
        return n
    }
    var bytes: [UInt8] = []
    let encode = medianNanosecondsPerOperation(rounds: 5) {
        bytes = checkpoint.encode()
        return n
    }
    let decode = medianNanosecondsPerOperation(rounds: 5) {
        consume(try! PartitionCheckpoint(decoding: bytes))
        return n
    }
    let restore = medianNanosecondsPerOperation(rounds: 5) {
        var fresh = indexedMonitor([])
        var freshFilter = FixFilter()
        fresh.noteRegionSeq(checkpoint.regionSeq)
        try! checkpoint.restore(into: &fresh, filter: &freshFilter)
        consume(fresh)
        return n
    }
    let crc = medianNanosecondsPerOperation(rounds: 5) {
        consume(CRC32.checksum(bytes))
        return bytes.count
    }
    precondition((try? PartitionCheckpoint(decoding: bytes)) == checkpoint, "the bench's checkpoint round-trips")
    let pairs = checkpoint.vehicles.values.reduce(0) { $0 + ($1.state?.regions.count ?? 0) }
    let section = "partition checkpoint, \(sizeName(n)) vehicles after \(fixesPerVehicle) fixes each"
    report.add(
        section, "size", "\(grouped(Double(bytes.count) / Double(n), decimals: 1)) bytes/vehicle",
        "\(grouped(Double(bytes.count) / 1e6, decimals: 1)) MB in all; \(grouped(Double(pairs) / Double(n), decimals: 2)) pairs/vehicle (18 bytes each)"
    )
    report.add(section, "take (PartitionCheckpoint.init from filter + monitor)", "\(grouped(take)) ns/vehicle")
    report.add(
        section, "encode / decode", "\(grouped(encode)) / \(grouped(decode)) ns/vehicle",
        "\(grouped(Double(bytes.count) / Double(n) / encode * 1e3)) / \(grouped(Double(bytes.count) / Double(n) / decode * 1e3)) MB/s"
    )
    report.add(section, "restore into a fresh filter + monitor", "\(grouped(restore)) ns/vehicle")
    report.add(section, "CRC-32 (in encode and decode)", "\(grouped(1e3 / crc)) MB/s")
}
