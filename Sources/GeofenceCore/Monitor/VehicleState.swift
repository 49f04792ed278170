import Foundation

/// One vehicle's state in the region monitor, as one value: everything its next fix is judged against (the
/// motion check's track, its last fix time and baseline, whether an unseen stretch comes first) and its
/// state in each region (inside or outside, since when, whether the dwell fired). Regions are named by
/// their sequence number, so a snapshot taken from one monitor restores into another that holds the same
/// regions (a restart, a partition moving to another node).
///
/// Not in it: the fix filter's per-vehicle state (`FixFilter.VehicleMemory`; `PartitionCheckpoint` holds both),
/// and the monitor's caches (the regions near the vehicle), which the next fix finds again.
package struct VehicleState: Sendable, Equatable {
    package var subject: String
    /// Fix time of the vehicle's last accepted fix.
    package var lastFixTime: Date?
    /// Every region up to this sequence number was evaluated for the vehicle; one without a pair is outside.
    package var baselineSeq: Int64
    /// The next fix comes after an unseen stretch (Location Services were off).
    package var gapPending: Bool
    /// The motion check's track (nil before the first fix).
    package var motion: MotionConsistency.Track?
    /// The last accepted fix (at `lastFixTime`): where a pass to the next fix starts (Docs/events.md).
    package var lastFix: EventFix?
    /// The vehicle's state in each region it is in or near, by region sequence number.
    package var regions: [Int64: PairRecord]
    /// Fix time of the last change of any of its pairs, or of its motion track's start: the track looks back
    /// no farther (Docs/events.md, "Decisions on the track"). Nil: the last fix time (a restart from the store,
    /// whose motion track starts again at that fix).
    package var lastChange: Date?
    /// The fixes of the motion track's current run of refused fixes, in order: if the run starts the track over,
    /// they decide then (Docs/events.md, "Decisions on the track"). Empty when there is no run, or when not all
    /// of its fixes are known (then it is not replayed).
    package var refused: [WeightedFix]
    /// The accepted fix before the last one, when a pass to the next fix may start across the last (Docs/events.md,
    /// "Passes between fixes"): nil when it may not.
    package var passAnchor: RegionMonitor.PassAnchor?

    package init(
        subject: String, lastFixTime: Date?, baselineSeq: Int64, gapPending: Bool = false,
        motion: MotionConsistency.Track? = nil, lastFix: EventFix? = nil, regions: [Int64: PairRecord] = [:],
        lastChange: Date? = nil, refused: [WeightedFix] = [], passAnchor: RegionMonitor.PassAnchor? = nil
    ) {
        self.refused = refused
        self.passAnchor = passAnchor
        self.subject = subject
        self.lastFixTime = lastFixTime
        self.baselineSeq = baselineSeq
        self.gapPending = gapPending
        self.motion = motion
        self.lastFix = lastFix
        self.regions = regions
        self.lastChange = lastChange
    }

    /// `passAnchor` when it can start a pass: only with the last fix, which the pass goes across, and before it.
    package var usablePassAnchor: RegionMonitor.PassAnchor? {
        guard let anchor = passAnchor, lastFix != nil, let last = lastFixTime, anchor.time < last else { return nil }
        return anchor
    }
}

extension VehicleState {
    /// A vehicle as the store keeps it: its record and its pairs. The store keeps the last fix, not the
    /// motion check's track: the track starts again from that fix, which is what the first fix after a
    /// restart is judged against.
    package init(
        subject: String, record: SubjectRecord, pairs: [(regionSeq: Int64, record: PairRecord)],
        motion: MotionConsistency
    ) {
        var track: MotionConsistency.Track?
        if let fix = record.lastFix, let time = record.lastFixTime {
            track = motion.start(
                at: GeocentricPoint(Coordinate(latitude: fix.latitude, longitude: fix.longitude)),
                time: time.timeIntervalSince1970, accuracy: fix.accuracy)
        }
        var regions: [Int64: PairRecord] = [:]
        for (seq, pair) in pairs { regions[seq] = pair }
        self.init(
            subject: subject, lastFixTime: record.lastFixTime, baselineSeq: record.baselineSeq, motion: track,
            lastFix: record.lastFixTime == nil ? nil : record.lastFix, regions: regions)
    }
}

extension RegionMonitor {
    /// A snapshot of one vehicle's state (nil: the monitor does not hold it).
    package func vehicleState(of subject: String) -> VehicleState? {
        guard let i = trackBySubject[subject] else { return nil }
        let track = tracks[i]
        var regions: [Int64: PairRecord] = [:]
        for slot in track.pairs.slots {
            guard let pair = track.pairs[slot] else { continue }
            regions[self.regions.records[Int(slot)].seq] = pair.record
        }
        return VehicleState(
            subject: subject, lastFixTime: track.lastFixTime, baselineSeq: track.baselineSeq,
            gapPending: track.gapPending, motion: motions[i], lastFix: track.previous, regions: regions,
            lastChange: track.lastChange, refused: track.refused, passAnchor: track.across.first)
    }

    /// Loads a vehicle's state as the store keeps it (after a restart, or when an evicted vehicle comes back).
    package mutating func restore(
        subject: String, record: SubjectRecord, pairs: [(regionSeq: Int64, record: PairRecord)]
    ) {
        restore(VehicleState(subject: subject, record: record, pairs: pairs, motion: configuration.motion))
    }

    /// Puts a vehicle's state back, in place of what the monitor held of it. Pairs of regions the monitor
    /// does not hold are left out; each pair is taken to be what the store holds.
    package mutating func restore(_ state: VehicleState) {
        var track = Track(lastFixTime: state.lastFixTime, baselineSeq: state.baselineSeq)
        track.gapPending = state.gapPending
        // Without it, the track looks back no farther than its last fix.
        track.lastChange = state.lastChange ?? state.lastFixTime
        track.previous = state.lastFixTime == nil ? nil : state.lastFix
        track.refused = state.refused
        if let anchor = state.usablePassAnchor { track.across = [anchor] }
        for (seq, record) in state.regions.sorted(by: { $0.key < $1.key }) {
            guard let slot = regions.slot(seq: seq) else { continue }
            track.pairs[slot] = Pair(record: record, stored: record)
        }
        if let i = trackBySubject[state.subject] {
            tracks[i] = track
            motions[i] = state.motion
        } else {
            trackBySubject[state.subject] = tracks.count
            tracks.append(track)
            motions.append(state.motion)
            names.append(state.subject)
        }
    }
}
