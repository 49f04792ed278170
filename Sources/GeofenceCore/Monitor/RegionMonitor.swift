import Foundation

/// The monitor's settings: the hysteresis rule and its defaults (documented in Docs/events.md).
public struct MonitorConfiguration: Sendable, Equatable {
    /// The hysteresis band never gets narrower than this on either side of the boundary (metres).
    public var minMargin: Double = 5
    /// The band's half-width is `max(minMargin, accuracyFactor · accuracy)`.
    public var accuracyFactor: Double = 1
    /// Consecutive conclusive fixes on the new side needed before a state changes. One lying fix
    /// (an outlier whose stated accuracy is wrong) is therefore never enough to fire an event.
    public var confirmations: Int = 2
    /// A change whose first confirming fix comes more than this many seconds (fix time) after the
    /// subject's previous fix happened unseen, across a gap, and is marked `inferred`.
    public var gapThreshold: Double = 60
    /// `determined outside` is reported only for regions whose boundary is within this many metres
    /// of the fix (beyond the band); every region farther away is silently outside.
    public var vicinity: Double = 1000

    public init() {}

    /// The margin for a fix of this accuracy.
    @inlinable
    public func margin(accuracy: Double) -> Double { max(minMargin, accuracyFactor * accuracy) }
}

/// What the store keeps for one (subject, region) pair.
public struct PairRecord: Sendable, Equatable {
    public var state: RegionState
    /// Fix time at which the current state began.
    public var since: Date?
    public var dwellFired: Bool

    public init(state: RegionState, since: Date? = nil, dwellFired: Bool = false) {
        self.state = state
        self.since = since
        self.dwellFired = dwellFired
    }
}

/// What the store keeps for one subject.
public struct SubjectRecord: Sendable, Equatable {
    /// Fix time of the subject's last accepted fix.
    public var lastFixTime: Date?
    /// Every region with a sequence number up to this one has been evaluated for the subject; a pair of
    /// such a region with no record is outside. Regions added later start `unknown`.
    public var baselineSeq: Int64
    public var lastFix: EventFix?

    public init(lastFixTime: Date?, baselineSeq: Int64, lastFix: EventFix? = nil) {
        self.lastFixTime = lastFixTime
        self.baselineSeq = baselineSeq
        self.lastFix = lastFix
    }
}

/// The changes one step of the monitor made: events to put in the outbox and records to persist, all in
/// one transaction.
public struct MonitorOutput: Sendable, Equatable {
    public struct PairUpdate: Sendable, Equatable {
        public var subject: String
        public var regionSeq: Int64
        /// nil: delete the record (the pair is outside, which is what no record means).
        public var record: PairRecord?

        public init(subject: String, regionSeq: Int64, record: PairRecord?) {
            self.subject = subject
            self.regionSeq = regionSeq
            self.record = record
        }
    }

    public struct SubjectUpdate: Sendable, Equatable {
        public var subject: String
        public var record: SubjectRecord

        public init(subject: String, record: SubjectRecord) {
            self.subject = subject
            self.record = record
        }
    }

    public struct StatusChange: Sendable, Equatable {
        public var regionSeq: Int64
        public var regionID: String
        public var status: RegionStatus

        public init(regionSeq: Int64, regionID: String, status: RegionStatus) {
            self.regionSeq = regionSeq
            self.regionID = regionID
            self.status = status
        }
    }

    public var events: [RegionEvent] = []
    public var pairUpdates: [PairUpdate] = []
    public var subjectUpdate: SubjectUpdate?
    public var statusChanges: [StatusChange] = []

    public init() {}

    public var isEmpty: Bool { events.isEmpty && pairUpdates.isEmpty && subjectUpdate == nil && statusChanges.isEmpty }
}

/// The per-(subject, region) state machine of DESIGN.md: hysteresis, confirmation, dwell, expiry, gaps.
///
/// Pure: fixes carry their own time and the wall clock (`now`, for event ids only) is passed in.
/// State is sparse so that a fleet of subjects against a million regions stays small: a pair has a
/// record only while it is `inside`, `unknown` or changing; no record means outside.
public struct RegionMonitor: Sendable {
    public var configuration: MonitorConfiguration

    private struct Slot: Sendable {
        var region: Region
        var seq: Int64
        var center: GeocentricPoint
        var accuracyLimited: Bool
    }

    private struct Pair: Sendable {
        var record: PairRecord
        /// What the store holds for this pair (nil: no row).
        var stored: PairRecord?
        var pending: RegionState?
        var pendingCount = 0
        var pendingSince: Date?
        var pendingInferred = false
    }

    private struct Track: Sendable {
        var lastFixTime: Date?
        var baselineSeq: Int64
        var pairs: [Int32: Pair] = [:]
    }

    private var slots: [Slot?] = []
    private var freeSlots: [Int32] = []
    private var slotByID: [String: Int32] = [:]
    private var slotBySeq: [Int64: Int32] = [:]
    private var maxSeq: Int64 = 0
    private var index = LinearRegionIndex()
    /// (expiry, seq), kept sorted by expiry so the next one to expire is first.
    private var expiries: [(Date, Int64)] = []
    private var tracks: [String: Track] = [:]
    private var ids: EventIDGenerator
    private var scratch: [Int32] = []

    public init(
        configuration: MonitorConfiguration = MonitorConfiguration(),
        ids: EventIDGenerator = EventIDGenerator()
    ) {
        self.configuration = configuration
        self.ids = ids
    }

    // MARK: Regions

    public var regionCount: Int { slotByID.count }

    public func region(id: String) -> Region? {
        slotByID[id].flatMap { slots[Int($0)]?.region }
    }

    /// The ids of the monitored regions among these sequence numbers.
    public func regionIDs(seqs: Set<Int64>) -> [String] {
        seqs.compactMap { slotBySeq[$0].flatMap { slots[Int($0)]?.region.id } }
    }

    /// Regions currently limited by accuracy (the last fix near them was too poor to ever be inside).
    public func isAccuracyLimited(id: String) -> Bool {
        slotByID[id].flatMap { slots[Int($0)]?.accuracyLimited } ?? false
    }

    /// Adds a region to monitoring, or replaces the one with the same id (its pair states start over).
    /// `seq` must grow with every insertion: it orders regions against subjects' baselines.
    public mutating func insert(_ region: Region, seq: Int64) {
        if slotByID[region.id] != nil { remove(id: region.id) }
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
        } else {
            slot = Int32(slots.count)
            slots.append(nil)
        }
        slots[Int(slot)] = Slot(
            region: region, seq: seq, center: GeocentricPoint(region.center), accuracyLimited: false)
        slotByID[region.id] = slot
        slotBySeq[seq] = slot
        maxSeq = max(maxSeq, seq)
        index.insert(slot: slot, center: region.center, radius: region.radius)
        if let expires = region.expires {
            let at = expiries.firstIndex { $0.0 > expires } ?? expiries.endIndex
            expiries.insert((expires, seq), at: at)
        }
    }

    /// Takes a region out of monitoring. Its pair states go with it.
    @discardableResult
    public mutating func remove(id: String) -> Region? {
        guard let slot = slotByID.removeValue(forKey: id), let old = slots[Int(slot)] else { return nil }
        slots[Int(slot)] = nil
        slotBySeq[old.seq] = nil
        freeSlots.append(slot)
        index.remove(slot: slot)
        expiries.removeAll { $0.1 == old.seq }
        for key in tracks.keys { tracks[key]!.pairs[slot] = nil }
        return old.region
    }

    // MARK: Subjects

    /// Loads a subject's persisted state (after a restart).
    public mutating func restore(
        subject: String, record: SubjectRecord, pairs: [(regionSeq: Int64, record: PairRecord)]
    ) {
        var track = Track(lastFixTime: record.lastFixTime, baselineSeq: record.baselineSeq)
        for (seq, pair) in pairs {
            guard let slot = slotBySeq[seq] else { continue }
            track.pairs[slot] = Pair(record: pair, stored: pair)
        }
        tracks[subject] = track
    }

    /// The state of a pair as the monitor sees it.
    public func state(subject: String, regionID: String) -> RegionState {
        guard let slot = slotByID[regionID], let s = slots[Int(slot)] else { return .unknown }
        guard let track = tracks[subject] else { return .unknown }
        if let pair = track.pairs[slot] { return pair.record.state }
        return s.seq <= track.baselineSeq ? .outside : .unknown
    }

    public var subjects: [String] { Array(tracks.keys) }

    // MARK: Steps

    /// Expires every region whose expiry time is at or before `time`.
    public mutating func expire(upTo time: Date, now: Date) -> MonitorOutput {
        var out = MonitorOutput()
        expireRegions(upTo: time, now: now, into: &out)
        return out
    }

    /// Runs one accepted fix through every region that could be affected by it.
    public mutating func process(_ fix: WeightedFix, now: Date) -> MonitorOutput {
        var out = MonitorOutput()
        expireRegions(upTo: fix.time, now: now, into: &out)

        let c = configuration
        var track = tracks[fix.subject] ?? Track(lastFixTime: nil, baselineSeq: 0)
        let gap = track.lastFixTime.map { fix.time.timeIntervalSince($0) }
        let acrossGap = gap.map { $0 > c.gapThreshold || $0 < 0 } ?? false
        let margin = c.margin(accuracy: fix.accuracy)
        let point = GeocentricPoint(fix.coordinate)

        scratch.removeAll(keepingCapacity: true)
        index.candidates(near: point, extra: margin + c.vicinity, into: &scratch)
        for slot in track.pairs.keys where !scratch.contains(slot) { scratch.append(slot) }

        for slot in scratch {
            guard let s = slots[Int(slot)], s.region.applies(to: fix.subject) else { continue }
            var pair =
                track.pairs[slot]
                ?? Pair(record: PairRecord(state: s.seq <= track.baselineSeq ? .outside : .unknown), stored: nil)
            step(
                &pair, slot: slot, fix: fix, point: point, margin: margin, acrossGap: acrossGap, now: now, into: &out)
            let wanted: PairRecord? = pair.record.state == .outside ? nil : pair.record
            if wanted != pair.stored {
                out.pairUpdates.append(.init(subject: fix.subject, regionSeq: s.seq, record: wanted))
                pair.stored = wanted
            }
            if pair.record.state == .outside && pair.pending == nil {
                track.pairs[slot] = nil
            } else {
                track.pairs[slot] = pair
            }
        }

        track.lastFixTime = fix.time
        track.baselineSeq = maxSeq
        tracks[fix.subject] = track
        out.subjectUpdate = .init(
            subject: fix.subject,
            record: SubjectRecord(lastFixTime: fix.time, baselineSeq: maxSeq, lastFix: EventFix(fix)))
        return out
    }

    /// One pair, one fix: classify with the hysteresis band, confirm, transition, dwell.
    private mutating func step(
        _ pair: inout Pair, slot: Int32, fix: WeightedFix, point: GeocentricPoint, margin: Double, acrossGap: Bool,
        now: Date, into out: inout MonitorOutput
    ) {
        guard var s = slots[Int(slot)] else { return }
        let r = s.region.radius
        let chord = point.chord(to: s.center)
        let bounds = Geodesic.distanceBounds(chord: chord)

        // A region no fix of this accuracy can ever be conclusively inside.
        let limited = r <= margin
        if limited != s.accuracyLimited {
            s.accuracyLimited = limited
            slots[Int(slot)] = s
            out.statusChanges.append(
                .init(regionSeq: s.seq, regionID: s.region.id, status: limited ? .accuracyLimited : .monitoring))
        }

        let observed: RegionState?
        if bounds.upper <= r - margin {
            observed = .inside
        } else if bounds.lower >= r + margin {
            observed = .outside
        } else if bounds.lower > r - margin && bounds.upper < r + margin {
            observed = nil
        } else {
            // The bounds straddle a band edge: settle it with the exact distance.
            let d = Geodesic.distance(fix.coordinate, s.region.center)
            observed = d <= r - margin ? .inside : (d >= r + margin ? .outside : nil)
        }

        // Far beyond the boundary, an unknown pair is simply outside: nothing to report.
        if pair.record.state == .unknown, observed == .outside, bounds.lower >= r + margin + configuration.vicinity {
            pair.record = PairRecord(state: .outside, since: fix.time)
            pair.pending = nil
            return
        }

        guard let observed, observed != pair.record.state else {
            pair.pending = nil
            pair.pendingCount = 0
            if pair.record.state == .inside && observed != .outside {
                checkDwell(&pair, region: s.region, fix: fix, now: now, into: &out)
            }
            return
        }

        if pair.pending == observed {
            pair.pendingCount += 1
        } else {
            pair.pending = observed
            pair.pendingCount = 1
            pair.pendingSince = fix.time
            pair.pendingInferred = acrossGap
        }
        guard pair.pendingCount >= max(1, configuration.confirmations) else { return }

        let previous = pair.record.state
        pair.record = PairRecord(state: observed, since: pair.pendingSince ?? fix.time, dwellFired: false)
        let inferred = pair.pendingInferred
        pair.pending = nil
        pair.pendingCount = 0

        let type: RegionEventType
        if previous == .unknown {
            type = .determined
        } else {
            type = observed == .inside ? .enter : .exit
            let kind: NotifyKind = observed == .inside ? .enter : .exit
            guard s.region.notify.contains(kind) else {
                if observed == .inside { checkDwell(&pair, region: s.region, fix: fix, now: now, into: &out) }
                return
            }
        }
        out.events.append(
            makeEvent(
                type, region: s.region, fix: fix, state: observed, previous: previous,
                inferred: type == .determined ? false : inferred, now: now))
        if observed == .inside { checkDwell(&pair, region: s.region, fix: fix, now: now, into: &out) }
    }

    private mutating func checkDwell(
        _ pair: inout Pair, region: Region, fix: WeightedFix, now: Date, into out: inout MonitorOutput
    ) {
        guard let dwell = region.dwell, !pair.record.dwellFired, let since = pair.record.since else { return }
        guard fix.time.timeIntervalSince(since) >= dwell else { return }
        pair.record.dwellFired = true
        guard region.notify.contains(.dwell) else { return }
        out.events.append(
            makeEvent(.dwell, region: region, fix: fix, state: .inside, previous: nil, inferred: false, now: now))
    }

    private mutating func makeEvent(
        _ type: RegionEventType, region: Region, fix: WeightedFix, state: RegionState, previous: RegionState?,
        inferred: Bool, now: Date
    ) -> RegionEvent {
        RegionEvent(
            id: ids.next(now: now), type: type, region: region.id, subject: fix.subject, time: fix.time,
            state: state, previous: previous, inferred: inferred,
            distance: Geodesic.distance(fix.coordinate, region.center), radius: region.radius, fix: EventFix(fix))
    }

    private mutating func expireRegions(upTo time: Date, now: Date, into out: inout MonitorOutput) {
        while let (at, seq) = expiries.first, at <= time {
            expiries.removeFirst()
            guard let slot = slotBySeq[seq], let s = slots[Int(slot)] else { continue }
            remove(id: s.region.id)
            out.statusChanges.append(.init(regionSeq: seq, regionID: s.region.id, status: .expired))
            out.events.append(
                RegionEvent(
                    id: ids.next(now: now), type: .expired, region: s.region.id, subject: nil, time: at, state: nil,
                    previous: nil, inferred: false, distance: nil, radius: s.region.radius, fix: nil))
        }
    }
}
