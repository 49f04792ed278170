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

/// How the monitor finds the regions a fix could affect.
public enum CandidateSearch: Sendable, Equatable {
    /// The spatial index (`SpatialRegionIndex`): a fix is tested against the few regions near it, however
    /// many there are in all.
    case spatialIndex
    /// Every region is tested on every fix (`LinearRegionIndex`): the reference the index is checked
    /// against, in tests and benchmarks.
    case linearScan
}

/// The per-(subject, region) state machine of DESIGN.md: hysteresis, confirmation, dwell, expiry, gaps.
///
/// Pure: fixes carry their own time and the wall clock (`now`, for event ids only) is passed in.
/// State is sparse so that a fleet of subjects against a million regions stays small: a pair has a
/// record only while it is `inside`, `unknown` or changing; no record means outside. Regions are kept
/// compactly (`RegionTable`: about 125 bytes each, and 14 more for the index) and found through a spatial
/// index (`SpatialRegionIndex`), so a fix reads only the regions near it (Docs/spatial-index.md,
/// Docs/benchmarks.md).
public struct RegionMonitor: Sendable {
    public var configuration: MonitorConfiguration
    public let candidateSearch: CandidateSearch

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
        var pairs = PairTable()
        /// The next fix comes after an unseen stretch (see `beginGap`).
        var gapPending = false
        /// Where the last fix was, and the regions around the recent fixes when the subject moves slowly
        /// enough for one list to serve several fixes (see `findCandidates`).
        var lastPoint: GeocentricPoint?
        var neighbourhood = Neighbourhood()
        /// Fixes to go before trying a neighbourhood again, after one came out too large.
        var crowdedFixes: UInt8 = 0
    }

    /// The regions around one place, with copies of their records, taken with `reach` metres to spare:
    /// what a vehicle's next fixes need, since each is a few metres from the last. Good only while the
    /// monitor's `regionGeneration` is what it was taken at (any region added, removed or changed makes
    /// the subject take a new one).
    ///
    /// Why it gives what the linear scan gives: it holds every region whose centre's chord from `origin`
    /// is under `radius + reach` (and a few more). For a point `P` at chord `d` from `origin` and an
    /// extra distance `e` with `d + e <= reach`, a centre within chord `radius + e` of `P` is within
    /// `radius + e + d <= radius + reach` of `origin` (the triangle inequality), so it is in the list; the
    /// list is then filtered with the linear scan's own test.
    private struct Neighbourhood: Sendable {
        struct Neighbour: Sendable {
            var record: RegionTable.Record
            var slot: Int32
        }

        var origin = GeocentricPoint(x: 0, y: 0, z: 0)
        /// −∞ when there is none.
        var reach = -Double.infinity
        var generation: UInt64 = 0
        var neighbours: [Neighbour] = []

        func covers(_ point: GeocentricPoint, extra: Double, generation: UInt64) -> Bool {
            generation == self.generation && extra >= 0 && point.chord(to: origin) + extra <= reach
        }

        func record(slot: Int32) -> RegionTable.Record? {
            for n in neighbours where n.slot == slot { return n.record }
            return nil
        }

        /// Appends the slots the linear scan returns for `point` and `extra`, which `covers`.
        func append(near point: GeocentricPoint, extra: Double, into slots: inout [Int32]) {
            for n in neighbours where point.chord(to: n.record.center) < n.record.radius + extra + 1e-6 {
                slots.append(n.slot)
            }
        }
    }

    /// A subject's pairs by slot. A subject is inside or near a handful of regions, so two small arrays
    /// searched in order beat a dictionary: one short, contiguous read instead of a hash and a scattered
    /// bucket (the pairs of a fleet's subjects are rarely in the cache). Past `indexThreshold` pairs, a
    /// dictionary index keeps lookups constant-time.
    private struct PairTable: Sendable {
        private(set) var slots: [Int32] = []
        private var pairs: [Pair] = []
        private var index: [Int32: Int]?
        private static let indexThreshold = 32

        var isEmpty: Bool { slots.isEmpty }

        subscript(slot: Int32) -> Pair? {
            get { position(of: slot).map { pairs[$0] } }
            set {
                if let i = position(of: slot) {
                    if let newValue {
                        pairs[i] = newValue
                    } else {
                        remove(at: i)
                    }
                } else if let newValue {
                    slots.append(slot)
                    pairs.append(newValue)
                    if index != nil {
                        index![slot] = slots.count - 1
                    } else if slots.count > Self.indexThreshold {
                        index = Dictionary(uniqueKeysWithValues: slots.enumerated().map { ($0.element, $0.offset) })
                    }
                }
            }
        }

        private func position(of slot: Int32) -> Int? {
            if let index { return index[slot] }
            return slots.firstIndex(of: slot)
        }

        private mutating func remove(at i: Int) {
            let removed = slots[i]
            let last = slots.count - 1
            if i != last {
                slots[i] = slots[last]
                pairs[i] = pairs[last]
                index?[slots[i]] = i
            }
            slots.removeLast()
            pairs.removeLast()
            index?[removed] = nil
            if slots.count < Self.indexThreshold / 2 { index = nil }
        }
    }

    /// A region waiting for its expiry time.
    private struct Expiry: Sendable {
        var at: Date
        var seq: Int64

        /// Earlier first; among equal times, the region inserted first (sequence numbers grow).
        func precedes(_ other: Expiry) -> Bool { at < other.at || (at == other.at && seq < other.seq) }
    }

    private var regions = RegionTable()
    private var spatialIndex: SpatialRegionIndex
    private var linearIndex = LinearRegionIndex()
    private var maxSeq: Int64 = 0
    /// A binary min-heap. Removed regions leave their entry behind (skipped when it comes up), and the
    /// heap is rebuilt when such leftovers outnumber the live ones.
    private var expiries: [Expiry] = []
    private var expiringCount = 0
    /// Subjects' state, in an array found through a dictionary: a fix then hashes its subject once,
    /// and its track is taken out of and put back into the array without hashing again.
    private var tracks: [Track] = []
    private var trackBySubject: [String: Int] = [:]
    private var ids: EventIDGenerator
    private var scratch: [Int32] = []
    private var nearbyScratch: [NearbyRegion] = []
    /// The distance a subject's neighbourhood is taken with beyond what its fix asks for (metres): a
    /// vehicle at 30 m/s uses one for 8 fixes or more, a parked one until a region changes.
    static let neighbourhoodReach = 250.0
    /// Regions a neighbourhood holds at most (56 bytes each, searched in order), and the fixes a subject
    /// whose neighbourhood would hold more waits before it tries again.
    static let neighbourhoodLimit = 64
    static let crowdedPause: UInt8 = 32
    /// Fixes answered from a subject's neighbourhood rather than the index (for the benchmark and tests).
    public private(set) var fixesFromNeighbourhoods = 0
    /// Counts changes to the regions (added, removed, accuracy-limited or not): neighbourhoods taken
    /// before the last change are stale.
    private var regionGeneration: UInt64 = 0

    public init(
        configuration: MonitorConfiguration = MonitorConfiguration(),
        ids: EventIDGenerator = EventIDGenerator(),
        candidateSearch: CandidateSearch = .spatialIndex
    ) {
        self.configuration = configuration
        self.ids = ids
        self.candidateSearch = candidateSearch
        // Queries ask for the vicinity plus a fix's margin (a few metres to the filter's 100 m limit).
        spatialIndex = SpatialRegionIndex(
            layout: .init(expectedExtra: max(0, configuration.vicinity) + configuration.minMargin + 20))
    }

    // MARK: Regions

    public var regionCount: Int { regions.count }

    /// Bytes held for the monitored regions: their records and the index (per-subject state aside).
    public var regionMemoryFootprint: Int {
        regions.memoryFootprint + spatialIndex.memoryFootprint + linearIndex.memoryFootprint
            + expiries.capacity * MemoryLayout<Expiry>.stride
    }

    /// Subjects that keep a neighbourhood (see `findCandidates`), the regions in them, and the bytes they
    /// hold: per-subject state, apart from `regionMemoryFootprint`.
    public var neighbourhoods: (subjects: Int, regions: Int, bytes: Int) {
        tracks.reduce(into: (0, 0, 0)) { sum, track in
            let capacity = track.neighbourhood.neighbours.capacity
            guard capacity > 0 else { return }
            sum.0 += 1
            sum.1 += track.neighbourhood.neighbours.count
            sum.2 += capacity * MemoryLayout<Neighbourhood.Neighbour>.stride
        }
    }

    /// Makes room for `count` regions in all, so that loading them grows nothing step by step.
    public mutating func reserveCapacity(_ count: Int) {
        regions.reserveCapacity(count)
        if candidateSearch == .spatialIndex { spatialIndex.reserveCapacity(count) }
    }

    /// Packs the spatial index tightly: worth calling once after inserting many regions at once.
    public mutating func compactIndex() {
        spatialIndex.compact()
    }

    public func region(id: String) -> Region? {
        regions.slot(id: id).map { regions.region(slot: $0) }
    }

    /// The ids of the monitored regions among these sequence numbers.
    public func regionIDs(seqs: Set<Int64>) -> [String] {
        seqs.compactMap { regions.slot(seq: $0).map { regions.id(slot: $0) } }
    }

    /// Regions currently limited by accuracy (the last fix near them was too poor to ever be inside).
    public func isAccuracyLimited(id: String) -> Bool {
        regions.slot(id: id).map { regions.records[Int($0)].flags.contains(.accuracyLimited) } ?? false
    }

    /// Adds a region to monitoring, or replaces the one with the same id (its pair states start over).
    /// `seq` must grow with every insertion: it orders regions against subjects' baselines.
    public mutating func insert(_ region: Region, seq: Int64) {
        if regions.slot(id: region.id) != nil { remove(id: region.id) }
        index(regions.insert(region, seq: seq), seq: seq)
        if let expires = region.expires {
            pushExpiry(Expiry(at: expires, seq: seq))
            expiringCount += 1
        }
    }

    /// Adds a region given by its basic fields: the same as inserting the `Region` it stands for, without
    /// building one (for loading many at once).
    public mutating func insert(_ region: CompactRegion, seq: Int64) {
        if regions.slot(id: region.id) != nil { remove(id: region.id) }
        index(regions.insert(region, seq: seq), seq: seq)
    }

    private mutating func index(_ slot: Int32, seq: Int64) {
        maxSeq = max(maxSeq, seq)
        regionGeneration &+= 1
        let record = regions.records[Int(slot)]
        switch candidateSearch {
        case .spatialIndex:
            spatialIndex.insert(
                slot: slot, center: record.center, radius: record.radius, marked: regions.needsAttention(slot))
        case .linearScan:
            linearIndex.insert(slot: slot, center: regions.center(slot: slot), radius: record.radius)
        }
    }

    /// Takes a region out of monitoring. Its pair states go with it.
    @discardableResult
    public mutating func remove(id: String) -> Region? {
        guard let slot = regions.slot(id: id) else { return nil }
        regionGeneration &+= 1
        let region = regions.region(slot: slot)
        let record = regions.records[Int(slot)]
        switch candidateSearch {
        case .spatialIndex: spatialIndex.remove(slot: slot, center: record.center, radius: record.radius)
        case .linearScan: linearIndex.remove(slot: slot)
        }
        regions.remove(slot: slot)
        if region.expires != nil {
            expiringCount -= 1
            if expiries.count > 2 * expiringCount + 64 { rebuildExpiries() }
        }
        // The slot will be reused: no pair may outlive its region. Positions, not keys, so that no
        // subject's name is hashed and the table is changed in place.
        for i in tracks.indices where !tracks[i].pairs.isEmpty && tracks[i].pairs[slot] != nil {
            tracks[i].pairs[slot] = nil
        }
        return region
    }

    // MARK: Subjects

    /// Loads a subject's persisted state (after a restart).
    public mutating func restore(
        subject: String, record: SubjectRecord, pairs: [(regionSeq: Int64, record: PairRecord)]
    ) {
        var track = Track(lastFixTime: record.lastFixTime, baselineSeq: record.baselineSeq)
        for (seq, pair) in pairs {
            guard let slot = regions.slot(seq: seq) else { continue }
            track.pairs[slot] = Pair(record: pair, stored: pair)
        }
        if let i = trackBySubject[subject] {
            tracks[i] = track
        } else {
            trackBySubject[subject] = tracks.count
            tracks.append(track)
        }
    }

    /// Puts back one region's pairs (when a region that left monitoring, for its owner's permission or the
    /// active-region limit, comes back): a subject inside it is still inside.
    public mutating func restorePairs(regionSeq: Int64, pairs: [(subject: String, record: PairRecord)]) {
        guard let slot = regions.slot(seq: regionSeq) else { return }
        for (subject, record) in pairs {
            guard let i = trackBySubject[subject] else { continue }
            tracks[i].pairs[slot] = Pair(record: record, stored: record)
        }
    }

    /// The sequence numbers of the regions being monitored.
    public var regionSeqs: Set<Int64> {
        Set(regions.records.lazy.filter { $0.flags.contains(.live) }.map(\.seq))
    }

    /// Marks every subject as coming back from a gap: the next change of each is reported `inferred`
    /// (after Location Services were off, the engine did not see what happened meanwhile).
    public mutating func beginGap() {
        for i in tracks.indices { tracks[i].gapPending = true }
    }

    /// The state of a pair as the monitor sees it.
    public func state(subject: String, regionID: String) -> RegionState {
        guard let slot = regions.slot(id: regionID) else { return .unknown }
        guard let i = trackBySubject[subject] else { return .unknown }
        let track = tracks[i]
        if let pair = track.pairs[slot] { return pair.record.state }
        return regions.records[Int(slot)].seq <= track.baselineSeq ? .outside : .unknown
    }

    public var subjects: [String] { Array(trackBySubject.keys) }

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
        // Regions inserted since the last fix may sit in unsorted tails of the index: sorted in here, so
        // that queries stay short (a few microseconds, after a batch of insertions only).
        if spatialIndex.needsFlush { spatialIndex.flush() }

        let c = configuration
        let trackIndex: Int
        if let i = trackBySubject[fix.subject] {
            trackIndex = i
        } else {
            trackIndex = tracks.count
            trackBySubject[fix.subject] = trackIndex
            tracks.append(Track(lastFixTime: nil, baselineSeq: 0))
        }
        // Out of the array while it changes, so that its pair table is not copied on write.
        var track = Track(lastFixTime: nil, baselineSeq: 0)
        swap(&track, &tracks[trackIndex])
        let gap = track.lastFixTime.map { fix.time.timeIntervalSince($0) }
        let acrossGap = track.gapPending || (gap.map { $0 > c.gapThreshold || $0 < 0 } ?? false)
        track.gapPending = false
        let margin = c.margin(accuracy: fix.accuracy)
        let point = GeocentricPoint(fix.coordinate)

        // The vicinity matters only for regions this subject has never been evaluated against (to report
        // `determined outside` near them); once every region is known, a region farther than its band is
        // outside and stays so, and the query can be the band alone: a much smaller box to read.
        let allKnown = track.baselineSeq >= maxSeq
        let extra = allKnown ? margin : margin + c.vicinity
        let nearby =
            candidateSearch == .spatialIndex
            && track.neighbourhood.covers(point, extra: extra, generation: regionGeneration)

        // The subject's pairs are usually with regions near its previous fix, whose records may have left
        // the cache since: unless its neighbourhood has them, their loads are started now, to overlap with
        // the index's own.
        var touched: UInt16 = 0
        if !track.pairs.isEmpty && !nearby {
            regions.records.withUnsafeBufferPointer { records in
                for slot in track.pairs.slots { touched &+= records[Int(slot)].flags.rawValue }
            }
        }
        var slots = scratch
        scratch = []
        slots.removeAll(keepingCapacity: true)
        findCandidates(
            near: point, extra: extra, margin: margin, settledIf: allKnown, nearby: nearby, track: &track,
            into: &slots)
        slots.append(contentsOf: track.pairs.slots)
        // One order, whoever found the regions and whatever the pair table's hash order: the index and the
        // linear scan then give identical outputs, event for event.
        if slots.count > 1 {
            slots.sort()
            var kept = 1
            for i in 1..<slots.count where slots[i] != slots[kept - 1] {
                slots[kept] = slots[i]
                kept += 1
            }
            slots.removeLast(slots.count - kept)
        }

        // Uses the loads above so they stay; reserving no capacity changes nothing.
        if touched == 0x5A5A { out.events.reserveCapacity(0) }

        // Records from the neighbourhood when it is current (it was just used or taken), else scattered
        // over memory.
        let copies = candidateSearch == .spatialIndex && track.neighbourhood.generation == regionGeneration
        for slot in slots {
            let record = (copies ? track.neighbourhood.record(slot: slot) : nil) ?? regions.records[Int(slot)]
            guard regions.applies(record, slot: slot, to: fix.subject) else { continue }
            let r = record.radius

            // A region no fix of this accuracy can ever be conclusively inside.
            let limited = r <= margin
            if limited != record.flags.contains(.accuracyLimited) {
                regions.setAccuracyLimited(limited, slot: slot)
                regionGeneration &+= 1
                if candidateSearch == .spatialIndex {
                    spatialIndex.setMark(
                        regions.needsAttention(slot), slot: slot, center: record.center, radius: record.radius)
                }
                out.statusChanges.append(
                    .init(
                        regionSeq: record.seq, regionID: regions.id(slot: slot),
                        status: limited ? .accuracyLimited : .monitoring))
            }

            let bounds = Geodesic.distanceBounds(chord: point.chord(to: record.center))
            let existing = track.pairs[slot]
            let known = record.seq <= track.baselineSeq
            // The common case, settled without building a pair: outside, and this fix says so too.
            if existing == nil, known, bounds.lower >= r + margin, bounds.upper > r - margin { continue }

            var pair = existing ?? Pair(record: PairRecord(state: known ? .outside : .unknown), stored: nil)
            step(
                &pair, slot: slot, record: record, bounds: bounds, fix: fix, margin: margin, acrossGap: acrossGap,
                now: now, into: &out)
            let wanted: PairRecord? = pair.record.state == .outside ? nil : pair.record
            if wanted != pair.stored {
                out.pairUpdates.append(.init(subject: fix.subject, regionSeq: record.seq, record: wanted))
                pair.stored = wanted
            }
            if pair.record.state == .outside && pair.pending == nil {
                track.pairs[slot] = nil
            } else {
                track.pairs[slot] = pair
            }
        }
        scratch = slots

        track.lastFixTime = fix.time
        track.baselineSeq = maxSeq
        tracks[trackIndex] = track
        out.subjectUpdate = .init(
            subject: fix.subject,
            record: SubjectRecord(lastFixTime: fix.time, baselineSeq: maxSeq, lastFix: EventFix(fix)))
        return out
    }

    /// Appends, in no particular order, the slots `LinearRegionIndex` returns (regions whose centre's chord
    /// from `point` is under `radius + extra`, plus a micrometre) that this fix could change.
    ///
    /// A subject that moves little from one fix to the next (a vehicle, a few to a few dozen metres a
    /// second) keeps the regions around it in its track (`Neighbourhood`, taken with `neighbourhoodReach`
    /// to spare, with copies of their records) and answers from that short list while it covers the fix
    /// (`nearby`): a few dozen contiguous bytes instead of the index's and the records' scattered pools.
    ///
    /// Otherwise, with the index, most regions are settled from what it knows alone (bounds on distance
    /// and radius): when every region is known to the subject (`allKnown`), and the subject has no pair
    /// with the region, and the fix is conclusively outside it, and its accuracy-limited status stays as it
    /// is, and it monitors every subject, then `step` would change nothing. Skipping those saves reading
    /// their records, which are scattered over memory: at a million regions, that is most of a fix's cost.
    private mutating func findCandidates(
        near point: GeocentricPoint, extra: Double, margin: Double, settledIf allKnown: Bool, nearby: Bool,
        track: inout Track, into slots: inout [Int32]
    ) {
        defer { track.lastPoint = point }
        switch candidateSearch {
        case .linearScan:
            linearIndex.candidates(near: point, extra: extra, into: &slots)
        case .spatialIndex where nearby:
            fixesFromNeighbourhoods += 1
            track.neighbourhood.append(near: point, extra: extra, into: &slots)
        case .spatialIndex
        where allKnown && track.lastPoint.map { $0.chord(to: point) < Self.neighbourhoodReach } ?? false
            && track.crowdedFixes == 0:
            // Slow enough for a neighbourhood to serve the next fixes too (and asking for the band alone:
            // one taken with the vicinity, right after regions were added, would hold many more).
            let reach = extra + Self.neighbourhoodReach
            let first = slots.count
            spatialIndex.candidates(near: point, extra: reach, into: &slots)
            var neighbours = track.neighbourhood.neighbours
            track.neighbourhood = Neighbourhood()
            neighbours.removeAll(keepingCapacity: true)
            regions.records.withUnsafeBufferPointer { records in
                for slot in slots[first...] {
                    let record = records[Int(slot)]
                    if record.flags.contains(.live) && point.chord(to: record.center) < record.radius + reach + 1e-5 {
                        neighbours.append(Neighbourhood.Neighbour(record: record, slot: slot))
                    }
                }
            }
            slots.removeSubrange(first...)
            let taken = Neighbourhood(origin: point, reach: reach, generation: regionGeneration, neighbours: neighbours)
            taken.append(near: point, extra: extra, into: &slots)
            if neighbours.count <= Self.neighbourhoodLimit {
                track.neighbourhood = taken
            } else {
                // Amid more regions than a list is worth copying (a dense city, and a change anywhere makes
                // every list stale): the index answers this subject's next fixes, as for a jumping one.
                track.crowdedFixes = Self.crowdedPause
            }
        case .spatialIndex:
            if track.crowdedFixes > 0 { track.crowdedFixes -= 1 }
            var near = nearbyScratch
            nearbyScratch = []
            near.removeAll(keepingCapacity: true)
            // Jumping about (or a first fix): a neighbourhood would not serve the next fix.
            if track.neighbourhood.neighbours.capacity > 0 { track.neighbourhood = Neighbourhood() }
            spatialIndex.nearby(point, extra: extra, into: &near)
            let pairs = track.pairs
            defer { nearbyScratch = near }
            var unsettled = 0
            for region in near {
                // `chord ≥ lower bound ≥ r + margin + 10 µm` makes `Geodesic.distanceBounds` conclusive.
                if allKnown && region.chordLowerBound >= region.radiusUpperBound + margin + 1e-5
                    && region.radiusLowerBound > margin && !region.marked
                    && (pairs.isEmpty || pairs[region.slot] == nil)
                {
                    continue
                }
                slots.append(region.slot)
                unsettled += 1
            }
            guard unsettled > 0 else { return }
            // The index may add regions a little farther away (it rounds centres to a grid). Dropping them
            // with the reference's own test keeps even `accuracyLimited` status changes identical. This
            // loop is also where each remaining record comes into the cache, all of them together (a
            // record is 48 bytes and may span two cache lines: `live` is read from the second).
            regions.records.withUnsafeBufferPointer { records in
                var kept = slots.count - unsettled
                for i in kept..<slots.count {
                    let record = records[Int(slots[i])]
                    if record.flags.contains(.live) && point.chord(to: record.center) < record.radius + extra + 1e-6 {
                        slots[kept] = slots[i]
                        kept += 1
                    }
                }
                slots.removeLast(slots.count - kept)
            }
        }
    }

    /// One pair, one fix: classify with the hysteresis band, confirm, transition, dwell.
    private mutating func step(
        _ pair: inout Pair, slot: Int32, record: RegionTable.Record, bounds: (lower: Double, upper: Double),
        fix: WeightedFix, margin: Double, acrossGap: Bool, now: Date, into out: inout MonitorOutput
    ) {
        let r = record.radius
        let observed: RegionState?
        if bounds.upper <= r - margin {
            observed = .inside
        } else if bounds.lower >= r + margin {
            observed = .outside
        } else if bounds.lower > r - margin && bounds.upper < r + margin {
            observed = nil
        } else {
            // The bounds straddle a band edge: settle it with the exact distance.
            let d = Geodesic.distance(fix.coordinate, regions.center(slot: slot))
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
                checkDwell(&pair, slot: slot, record: record, fix: fix, now: now, into: &out)
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
            guard record.flags.contains(.notify(kind)) else {
                if observed == .inside { checkDwell(&pair, slot: slot, record: record, fix: fix, now: now, into: &out) }
                return
            }
        }
        out.events.append(
            makeEvent(
                type, slot: slot, record: record, fix: fix, state: observed, previous: previous,
                inferred: type == .determined ? false : inferred, now: now))
        if observed == .inside { checkDwell(&pair, slot: slot, record: record, fix: fix, now: now, into: &out) }
    }

    private mutating func checkDwell(
        _ pair: inout Pair, slot: Int32, record: RegionTable.Record, fix: WeightedFix, now: Date,
        into out: inout MonitorOutput
    ) {
        guard let dwell = regions.dwell(record, slot: slot), !pair.record.dwellFired, let since = pair.record.since
        else {
            return
        }
        guard fix.time.timeIntervalSince(since) >= dwell else { return }
        pair.record.dwellFired = true
        guard record.flags.contains(.notifyDwell) else { return }
        out.events.append(
            makeEvent(
                .dwell, slot: slot, record: record, fix: fix, state: .inside, previous: nil, inferred: false, now: now))
    }

    private mutating func makeEvent(
        _ type: RegionEventType, slot: Int32, record: RegionTable.Record, fix: WeightedFix, state: RegionState,
        previous: RegionState?, inferred: Bool, now: Date
    ) -> RegionEvent {
        RegionEvent(
            id: ids.next(now: now), type: type, region: regions.id(slot: slot), subject: fix.subject, time: fix.time,
            state: state, previous: previous, inferred: inferred,
            distance: Geodesic.distance(fix.coordinate, regions.center(slot: slot)), radius: record.radius,
            fix: EventFix(fix))
    }

    // MARK: Expiry

    private mutating func expireRegions(upTo time: Date, now: Date, into out: inout MonitorOutput) {
        while let next = expiries.first, next.at <= time {
            popExpiry()
            // A region removed (or replaced) since it was queued left this entry behind.
            guard let slot = regions.slot(seq: next.seq) else { continue }
            let id = regions.id(slot: slot)
            let radius = regions.records[Int(slot)].radius
            remove(id: id)
            out.statusChanges.append(.init(regionSeq: next.seq, regionID: id, status: .expired))
            out.events.append(
                RegionEvent(
                    id: ids.next(now: now), type: .expired, region: id, subject: nil, time: next.at, state: nil,
                    previous: nil, inferred: false, distance: nil, radius: radius, fix: nil))
        }
    }

    private mutating func pushExpiry(_ expiry: Expiry) {
        expiries.append(expiry)
        var i = expiries.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard expiries[i].precedes(expiries[parent]) else { break }
            expiries.swapAt(i, parent)
            i = parent
        }
    }

    private mutating func popExpiry() {
        let last = expiries.removeLast()
        guard !expiries.isEmpty else { return }
        expiries[0] = last
        siftDown(from: 0)
    }

    private mutating func siftDown(from start: Int) {
        var i = start
        while true {
            var first = i
            let left = 2 * i + 1
            if left < expiries.count && expiries[left].precedes(expiries[first]) { first = left }
            if left + 1 < expiries.count && expiries[left + 1].precedes(expiries[first]) { first = left + 1 }
            guard first != i else { return }
            expiries.swapAt(i, first)
            i = first
        }
    }

    private mutating func rebuildExpiries() {
        expiries = regions.liveSlots.compactMap { slot in
            regions.expires(slot: slot).map { Expiry(at: $0, seq: regions.records[Int(slot)].seq) }
        }
        for i in stride(from: expiries.count / 2, through: 0, by: -1) { siftDown(from: i) }
    }
}
