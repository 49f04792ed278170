import Foundation

/// The decision state of a set of vehicles (a partition of the fleet, in cluster mode), as one value that can
/// be stored and restored exactly: for each vehicle, what the fix filter remembers of it
/// (`FixFilter.VehicleMemory`) and its state in the monitor (`VehicleState`: the motion check's track, last
/// fix time, baseline, gap flag, and its state in each region, dwell included), with the position in the fix
/// stream it covers and the highest region seq it was judged against.
///
/// The promise: restored (`restore(into:filter:)`) into a new filter and monitor that hold the same regions,
/// and fed the fixes after `fixSequence`, they make exactly the events the filter and monitor it was taken
/// from would have made. Decisions run on fix time, and everything a decision reads is in here; what is
/// left out is cache (a vehicle's neighbourhood of regions, found again by its next fix) or counts.
///
/// Not in it: the settings of the filter and the monitor (both owners must run the same), region-wide state
/// (which regions are limited by accuracy: status, not events), and the gpsd epoch assembler's reports
/// held within an epoch (a fleet's fixes do not pass through it).
///
/// `encode()` and `init(decoding:)` give it a compact binary form (PartitionCheckpoint+Encoding.swift).
package struct PartitionCheckpoint: Sendable, Equatable {
    /// The encoding's version this code writes (and the only one it reads).
    package static let currentFormatVersion: UInt16 = 1

    /// One vehicle's part: either side may be absent (a vehicle the monitor holds from the store, whose
    /// filter memory was not kept; in principle, the reverse).
    package struct Vehicle: Sendable, Equatable {
        /// Its state in the monitor; its `subject` is the vehicle's key in `vehicles`.
        package var state: VehicleState?
        /// What the fix filter remembers of it.
        package var filter: FixFilter.VehicleMemory?

        package init(state: VehicleState?, filter: FixFilter.VehicleMemory?) {
            self.state = state
            self.filter = filter
        }
    }

    /// The version of the encoding the checkpoint was read from (`currentFormatVersion` for one taken here).
    package var formatVersion: UInt16
    /// The fix stream's sequence number of the last fix whose effect the state holds: a new owner replays
    /// from the next one.
    package var fixSequence: UInt64
    /// The highest region seq the monitor had taken when the checkpoint was taken: a monitor that restores it
    /// must have taken every region change up to this one (`RegionMonitor.regionSeqHighWater`).
    package var regionSeq: Int64
    /// The vehicles, by subject.
    package var vehicles: [String: Vehicle]

    package init(
        fixSequence: UInt64, regionSeq: Int64, vehicles: [String: Vehicle],
        formatVersion: UInt16 = PartitionCheckpoint.currentFormatVersion
    ) {
        self.formatVersion = formatVersion
        self.fixSequence = fixSequence
        self.regionSeq = regionSeq
        self.vehicles = vehicles
    }

    /// Takes the state of `subjects` (a partition: the caller decides which) from a filter and a monitor that
    /// have judged every fix of the stream up to `fixSequence`. A subject neither holds is left out.
    package init(
        fixSequence: UInt64, monitor: RegionMonitor, filter: FixFilter, subjects: some Sequence<String>
    ) {
        var vehicles: [String: Vehicle] = [:]
        for subject in subjects {
            let state = monitor.vehicleState(of: subject)
            let memory = filter.memory(of: subject)
            guard state != nil || memory != nil else { continue }
            vehicles[subject] = Vehicle(state: state, filter: memory)
        }
        self.init(fixSequence: fixSequence, regionSeq: monitor.regionSeqHighWater, vehicles: vehicles)
    }

    /// Takes the state of every subject the filter or the monitor holds (a filter and a monitor that serve
    /// one partition).
    package init(fixSequence: UInt64, monitor: RegionMonitor, filter: FixFilter) {
        self.init(
            fixSequence: fixSequence, monitor: monitor, filter: filter,
            subjects: Set(monitor.subjects).union(filter.rememberedSubjects))
    }

    /// Puts every vehicle's state into `monitor` and `filter` (fresh ones, that hold the same regions), in
    /// place of what they held of those vehicles; a part the checkpoint lacks is left as it was. Refused,
    /// changing nothing, when the monitor has not taken every region change the state was judged against
    /// (a pair with a region it has not loaded yet would be lost).
    package func restore(into monitor: inout RegionMonitor, filter: inout FixFilter) throws(PartitionCheckpointError) {
        guard monitor.regionSeqHighWater >= regionSeq else {
            throw .regionsBehind(checkpoint: regionSeq, monitor: monitor.regionSeqHighWater)
        }
        // In the order of their names, so that two restores of one checkpoint build identical monitors.
        for subject in vehicles.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            guard let vehicle = vehicles[subject] else { continue }
            if var state = vehicle.state {
                state.subject = subject
                monitor.restore(state)
            }
            if let memory = vehicle.filter { filter.restore(memory, subject: subject) }
        }
    }
}

/// Why a checkpoint was refused: one line for a log, saying what was wrong and where.
package enum PartitionCheckpointError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bytes end before what they declare (`count` bytes, `needed` at least): a torn or partial write.
    case truncated(count: Int, needed: UInt64)
    /// The bytes do not start with the checkpoint's magic number.
    case notACheckpoint
    /// A version of the encoding this code does not read.
    case unsupportedVersion(UInt16)
    /// More bytes than the checkpoint declares.
    case trailingBytes(count: Int, declared: UInt64)
    /// The checksum does not match the bytes: they were changed or torn.
    case checksumMismatch(stored: UInt32, computed: UInt32)
    /// A field that no state can hold (a checksum that matched over hostile bytes): what, and at which byte.
    case invalid(field: String, offset: Int, reason: String)
    /// `restore` into a monitor that has not taken every region change up to the checkpoint's.
    case regionsBehind(checkpoint: Int64, monitor: Int64)

    package var description: String {
        switch self {
        case .truncated(let count, let needed):
            "checkpoint refused: truncated (\(count) bytes, \(needed) expected)"
        case .notACheckpoint:
            "checkpoint refused: not a geofence partition checkpoint (bad magic number)"
        case .unsupportedVersion(let version):
            "checkpoint refused: format version \(version), this engine reads version \(PartitionCheckpoint.currentFormatVersion)"
        case .trailingBytes(let count, let declared):
            "checkpoint refused: \(count) bytes where \(declared) are declared"
        case .checksumMismatch(let stored, let computed):
            "checkpoint refused: checksum mismatch (stored \(Self.hex(stored)), computed \(Self.hex(computed))): corrupted or torn"
        case .invalid(let field, let offset, let reason):
            "checkpoint refused: \(field) at byte \(offset) \(reason)"
        case .regionsBehind(let checkpoint, let monitor):
            "checkpoint refused: it was taken against regions up to seq \(checkpoint), the monitor has taken up to \(monitor) only"
        }
    }

    private static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return "0x" + String(repeating: "0", count: 8 - digits.count) + digits
    }
}

extension RegionMonitor {
    /// The highest region seq the monitor has taken: inserted, or noted by `noteRegionSeq` (a removal).
    package var regionSeqHighWater: Int64 { maxSeq }

    /// Notes that every region change up to `seq` has been taken, though none of them added a region (in a
    /// cluster, where a region's seq is its revision in the regions bucket, a removal has a seq too). A
    /// monitor that took a removal of the highest region otherwise stays below the checkpoints taken by
    /// another that had inserted that region before. Regions inserted later must still have higher seqs.
    package mutating func noteRegionSeq(_ seq: Int64) {
        maxSeq = max(maxSeq, seq)
    }
}
