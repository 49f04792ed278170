import Foundation

/// The monitor's settings: the decision rule and its defaults (documented in Docs/events.md).
public struct MonitorConfiguration: Sendable, Equatable {
    /// The hysteresis band never gets narrower than this on either side of the boundary (metres).
    public var minMargin: Double = 5
    /// The band's half-width is `max(minMargin, accuracyFactor · accuracy)`.
    public var accuracyFactor: Double = 1
    /// The accelerations of a manoeuvring subject (standard deviation, m/s²): a fix farther from where
    /// the subject's motion takes it than its accuracy and such accelerations allow is an outlier and
    /// changes no state (`MotionConsistency`).
    public var acceleration: Double = 4
    /// The outlier gate, in standard deviations of the expected position.
    public var outlierGate: Double = 4
    /// For a fix that follows a refused one, how many times likelier another lie is than the truth, a
    /// priori (receivers lie in bursts): such a fix is taken in only if its motion makes it likelier honest.
    public var burstOdds: Double = 2
    /// A change made by a fix that comes more than this many seconds (fix time) after the subject's
    /// previous fix happened unseen, across a gap, and is marked `inferred`.
    public var gapThreshold: Double = 60
    /// `determined outside` is reported only for regions whose boundary is within this many metres
    /// of the fix (beyond the band); every region farther away is silently outside.
    public var vicinity: Double = 1000
    /// Report a pass between two fixes of a subject known to be outside a region, the second conclusively
    /// outside and the first not conclusively inside, when every plausible path between them goes through it (`enter` then `exit`, both `inferred`, at their estimated times; the rule
    /// is in Docs/events.md, "Passes between fixes").
    public var inferPasses: Bool = true
    /// For an inferred pass: how fast a subject may speed up, then slow down again, between two fixes beyond
    /// the faster of their speeds (m/s², sustained over the gap): it bounds the length of any plausible path,
    /// and so how far that path can stray from the straight line.
    public var passAcceleration: Double = 0.5
    /// For an inferred pass: the most a subject's velocity changes per second in any direction, turning, braking
    /// and speeding up together (m/s²; a car's tyres on dry asphalt grip to about 8). With the courses and speeds
    /// of both fixes it bounds how far a path can swerve aside of the straight line between them, a second
    /// certificate beside the length's (Docs/events.md, "Passes between fixes"); 0 turns it off.
    public var passTurnAcceleration: Double = 8
    /// Let the subject's track decide where its fix cannot: a fix in the band changes a pair's state when the
    /// motion check's estimate (the fixes that agreed with the motion, fused) is conclusive, before and with
    /// the fix, and the fix is on that side of the boundary; a state already known only while the track moves.
    /// Where the estimate now is not conclusive, where the track puts the subject a few seconds back may be
    /// (Docs/events.md, "Decisions on the track").
    public var fusedDecisions: Bool = true
    /// The band of such an estimate: this many times as wide as a fix's whose accuracy is two standard
    /// deviations of the estimate (1.5: three standard deviations).
    public var fusedFactor: Double = 1.5

    /// The defaults, `geofence run`'s: a 5 m band at least, as wide as the accuracy, and the values above.
    public init() {}

    /// The hysteresis rule these settings give.
    package var band: HysteresisBand { HysteresisBand(minMargin: minMargin, accuracyFactor: accuracyFactor) }

    /// The outlier test these settings give.
    package var motion: MotionConsistency {
        MotionConsistency(manoeuvreAcceleration: acceleration, gate: outlierGate, burstOdds: burstOdds)
    }

    /// The margin for a fix of this accuracy.
    package func margin(accuracy: Double) -> Double { band.margin(accuracy: accuracy) }
}

/// What the store keeps for one (subject, region) pair.
package struct PairRecord: Sendable, Equatable {
    package var state: RegionState
    /// Fix time at which the current state began.
    package var since: Date?
    package var dwellFired: Bool

    package init(state: RegionState, since: Date? = nil, dwellFired: Bool = false) {
        self.state = state
        self.since = since
        self.dwellFired = dwellFired
    }
}

/// What the store keeps for one subject.
package struct SubjectRecord: Sendable, Equatable {
    /// Fix time of the subject's last accepted fix.
    package var lastFixTime: Date?
    /// Every region with a sequence number up to this one has been evaluated for the subject; a pair of
    /// such a region with no record is outside. Regions added later start `unknown`.
    package var baselineSeq: Int64
    package var lastFix: EventFix?

    package init(lastFixTime: Date?, baselineSeq: Int64, lastFix: EventFix? = nil) {
        self.lastFixTime = lastFixTime
        self.baselineSeq = baselineSeq
        self.lastFix = lastFix
    }
}

/// The changes one step of the monitor made: events to put in the outbox and records to persist, all in
/// one transaction.
package struct MonitorOutput: Sendable, Equatable {
    package struct PairUpdate: Sendable, Equatable {
        package var subject: String
        package var regionSeq: Int64
        /// nil: delete the record (the pair is outside, which is what no record means).
        package var record: PairRecord?

        package init(subject: String, regionSeq: Int64, record: PairRecord?) {
            self.subject = subject
            self.regionSeq = regionSeq
            self.record = record
        }
    }

    package struct SubjectUpdate: Sendable, Equatable {
        package var subject: String
        package var record: SubjectRecord

        package init(subject: String, record: SubjectRecord) {
            self.subject = subject
            self.record = record
        }
    }

    package struct StatusChange: Sendable, Equatable {
        package var regionSeq: Int64
        package var regionID: String
        package var status: RegionStatus

        package init(regionSeq: Int64, regionID: String, status: RegionStatus) {
            self.regionSeq = regionSeq
            self.regionID = regionID
            self.status = status
        }
    }

    package var events: [RegionEvent] = []
    package var pairUpdates: [PairUpdate] = []
    package var subjectUpdate: SubjectUpdate?
    package var statusChanges: [StatusChange] = []

    package init() {}

    /// The row matched, not compared with `nil`: the comparison copied it (an optional of a struct of strings)
    /// and destroyed the copy through its value witnesses, some 300 instructions a call, several a fix.
    @inlinable
    package var isEmpty: Bool {
        if case .some = subjectUpdate { return false }
        return events.isEmpty && pairUpdates.isEmpty && statusChanges.isEmpty
    }
}

/// How the monitor finds the regions a fix could affect.
package enum CandidateSearch: Sendable, Equatable {
    /// The spatial index (`SpatialRegionIndex`): a fix is tested against the few regions near it, however
    /// many there are in all.
    case spatialIndex
    /// Every region is tested on every fix (`LinearRegionIndex`): the reference the index is checked
    /// against, in tests and benchmarks.
    case linearScan
}

/// The per-(subject, region) state machine of DESIGN.md: the hysteresis band, the motion check, dwell,
/// expiry, gaps.
///
/// Pure: fixes carry their own time and the wall clock (`now`, for event ids and `releaseHeld`) is passed
/// in. State is sparse so that a fleet of subjects against a million regions stays small: a pair has a
/// record only while it is `inside`, `unknown` or changing; no record means outside. Regions are kept
/// compactly (`RegionTable`: about 85 bytes each, and 14 more for the index) and found through a spatial
/// index (`SpatialRegionIndex`), so a fix reads only the regions near it (Docs/spatial-index.md,
/// Docs/benchmarks.md).
///
/// The rule (Docs/events.md): every accepted fix is first judged against its subject's motion
/// (`MotionConsistency`): an outlier changes nothing. Any other fix is classified against each region near
/// it by the `HysteresisBand`, and a conclusive fix on the other side of a boundary changes the pair's
/// state at once: no second fix is needed, and none is waited for.
package struct RegionMonitor: Sendable {
    package var configuration: MonitorConfiguration
    package let candidateSearch: CandidateSearch

    var regions = RegionTable()
    var spatialIndex: SpatialRegionIndex
    var linearIndex = LinearRegionIndex()
    var maxSeq: Int64 = 0
    var expiries = ExpiryQueue()
    /// Subjects' state, in an array found through a dictionary: a fix then hashes its subject once,
    /// and its track is taken out of and put back into the array without hashing again.
    var tracks: [Track] = []
    @usableFromInline var trackBySubject: [String: Int] = [:]
    /// What each subject's fixes say of its motion (`MotionConsistency`), by track position: apart from the
    /// tracks, so that it is updated in place and never copied with them.
    var motions: [MotionConsistency.Track?] = []
    /// Each track's subject, by track position (to find a track's entry in `trackBySubject`, and to check a
    /// caller's hint, `track(of:hint:)`).
    @usableFromInline var names: [String] = []
    let ids: EventIDs
    var scratch: [Int32] = []
    var nearbyScratch: [NearbyRegion] = []
    /// The candidates of a pass between two fixes (`inferPasses`), kept for the next.
    var passScratch: [Int32] = []
    /// Whether the fix being processed was in the band of a region its subject stays outside of (`step` sets it):
    /// a pass to the next fix may then start across it (`Track.across`).
    var inBandOutside = false
    /// Fixes answered from a subject's neighbourhood rather than the index (for the benchmark and tests).
    package internal(set) var fixesFromNeighbourhoods = 0
    /// Fixes that disagreed with their subject's motion and so changed no state.
    package private(set) var outliers = 0
    /// Fixes that ended a run of outliers agreeing with each other: the subject's motion started over.
    package private(set) var resynchronized = 0
    /// Counts changes to the regions (added, removed, accuracy-limited or not): neighbourhoods taken
    /// before the last change are stale.
    var regionGeneration: UInt64 = 0

    /// A monitor whose events take their ids from `ids` (the engine's one generator, `EventIDs`).
    package init(
        configuration: MonitorConfiguration = MonitorConfiguration(),
        ids: EventIDs = EventIDs(),
        candidateSearch: CandidateSearch = .spatialIndex
    ) {
        self.configuration = configuration
        self.ids = ids
        self.candidateSearch = candidateSearch
        // Queries ask for the vicinity plus a fix's margin (a few metres, more for a poor fix).
        spatialIndex = SpatialRegionIndex(
            layout: .init(expectedExtra: max(0, configuration.vicinity) + configuration.minMargin + 20))
    }

    /// A monitor with a generator of its own (tests that compare two monitors' events give each the same one).
    package init(
        configuration: MonitorConfiguration = MonitorConfiguration(), ids: EventIDGenerator,
        candidateSearch: CandidateSearch = .spatialIndex
    ) {
        self.init(configuration: configuration, ids: EventIDs(ids), candidateSearch: candidateSearch)
    }

    // MARK: Regions

    package var regionCount: Int { regions.count }

    /// Bytes held for the monitored regions: their records and the index (per-subject state aside).
    package var regionMemoryFootprint: Int {
        regions.memoryFootprint + spatialIndex.memoryFootprint + linearIndex.memoryFootprint
            + expiries.memoryFootprint
    }

    /// Subjects that keep a neighbourhood (see `findCandidates`), the regions in them, and the bytes they
    /// hold: per-subject state, apart from `regionMemoryFootprint`.
    package var neighbourhoods: (subjects: Int, regions: Int, bytes: Int) {
        tracks.reduce(into: (0, 0, 0)) { sum, track in
            let capacity = track.neighbourhood.neighbours.capacity
            guard capacity > 0 else { return }
            sum.0 += 1
            sum.1 += track.neighbourhood.neighbours.count
            sum.2 += capacity * MemoryLayout<Neighbourhood.Neighbour>.stride
        }
    }

    /// Makes room for `count` regions in all, so that loading them grows nothing step by step.
    package mutating func reserveCapacity(_ count: Int) {
        regions.reserveCapacity(count)
        if candidateSearch == .spatialIndex { spatialIndex.reserveCapacity(count) }
    }

    /// Packs the spatial index and the region table tightly: worth calling once after inserting many
    /// regions at once.
    package mutating func compactIndex() {
        spatialIndex.compact()
        regions.trimCapacity()
        returnFreedPages()
    }

    /// Gives the pages of freed heap memory back to the system (glibc's `malloc_trim`, found at run time;
    /// nothing elsewhere). A load frees the pools' old copies (grown, repacked, trimmed) and the sorts'
    /// scratch arrays; once glibc has raised its mmap threshold (it does after freeing a large block),
    /// those were heap blocks, which stay resident after `free`: about 10 bytes a region at a million.
    private func returnFreedPages() {
        #if os(Linux)
            guard let symbol = dlsym(nil, "malloc_trim") else { return }
            let trim = unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
            _ = trim(0)
        #endif
    }

    package func region(id: String) -> Region? {
        regions.slot(id: id).map { regions.region(slot: $0) }
    }

    /// The ids of the monitored regions among these sequence numbers.
    package func regionIDs(seqs: Set<Int64>) -> [String] {
        seqs.compactMap { regions.slot(seq: $0).map { regions.id(slot: $0) } }
    }

    /// Regions currently limited by accuracy (the last fix near them was too poor to ever be inside).
    package func isAccuracyLimited(id: String) -> Bool {
        regions.slot(id: id).map { regions.records[Int($0)].flags.contains(.accuracyLimited) } ?? false
    }

    /// Adds a region to monitoring, or replaces the one with the same id (its pair states start over).
    /// `seq` must grow with every insertion: it orders regions against subjects' baselines.
    package mutating func insert(_ region: Region, seq: Int64) {
        if regions.slot(id: region.id) != nil { remove(id: region.id) }
        index(regions.insert(region, seq: seq), seq: seq)
        if let expires = region.expires { expiries.push(.init(at: expires, seq: seq)) }
    }

    /// Adds a region given by its basic fields: the same as inserting the `Region` it stands for, without
    /// building one (for loading many at once).
    package mutating func insert(_ region: CompactRegion, seq: Int64) {
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
    package mutating func remove(id: String) -> Region? {
        guard let slot = regions.slot(id: id) else { return nil }
        regionGeneration &+= 1
        let region = regions.region(slot: slot)
        let record = regions.records[Int(slot)]
        switch candidateSearch {
        case .spatialIndex: spatialIndex.remove(slot: slot, center: record.center, radius: record.radius)
        case .linearScan: linearIndex.remove(slot: slot)
        }
        regions.remove(slot: slot)
        if region.expires != nil && expiries.regionLeft() {
            expiries.rebuild(
                regions.liveSlots.compactMap { slot in
                    regions.expires(slot: slot).map { .init(at: $0, seq: regions.records[Int(slot)].seq) }
                })
        }
        // The slot will be reused: no pair may outlive its region. Positions, not keys, so that no
        // subject's name is hashed and the table is changed in place.
        for i in tracks.indices where !tracks[i].pairs.isEmpty && tracks[i].pairs[slot] != nil {
            tracks[i].pairs[slot] = nil
        }
        return region
    }

    // MARK: Subjects

    /// Puts back one region's pairs (when a region that left monitoring, for its owner's permission or the
    /// active-region limit, comes back): a subject inside it is still inside.
    package mutating func restorePairs(regionSeq: Int64, pairs: [(subject: String, record: PairRecord)]) {
        guard let slot = regions.slot(seq: regionSeq) else { return }
        for (subject, record) in pairs {
            guard let i = trackBySubject[subject] else { continue }
            tracks[i].pairs[slot] = Pair(record: record, stored: record)
        }
    }

    /// The sequence numbers of the regions being monitored.
    package var regionSeqs: Set<Int64> {
        Set(regions.records.lazy.filter { $0.flags.contains(.live) }.map(\.seq))
    }

    /// Marks every subject as coming back from a gap: the next change of each is reported `inferred`
    /// (after Location Services were off, the engine did not see what happened meanwhile), and its next
    /// fix is not judged against its motion before the gap.
    package mutating func beginGap() {
        for i in tracks.indices { tracks[i].gapPending = true }
    }

    /// The state of a pair as the monitor sees it.
    package func state(subject: String, regionID: String) -> RegionState {
        guard let slot = regions.slot(id: regionID) else { return .unknown }
        guard let i = trackBySubject[subject] else { return .unknown }
        let track = tracks[i]
        if let pair = track.pairs[slot] { return pair.record.state }
        return regions.records[Int(slot)].seq <= track.baselineSeq ? .outside : .unknown
    }

    package var subjects: [String] { names }

    /// How many subjects the monitor holds.
    package var subjectCount: Int { tracks.count }

    /// Whether the monitor holds this subject's state (it may have been evicted, or never seen).
    ///
    /// Inlinable: called through a class's stored monitor (`FixPipeline`, once per fix), an opaque call made a
    /// copy of the whole monitor for it (a retain and a release of each of its buffers); inlined, it reads the
    /// one dictionary.
    @inlinable
    package func knows(subject: String) -> Bool { trackBySubject[subject] != nil }

    /// The position of the subject's track (nil: the monitor does not hold it), trying `hint` first: a position
    /// an earlier call returned, kept by a caller that sees the subject's fixes one after another (`FixPipeline`).
    /// The hint is taken only when the track there is the subject's; a stale one (the track removed, evicted,
    /// or another moved into its place; any value at all) costs the look-up by name, never another's track.
    /// Always inlined for the same reason as `knows(subject:)` (merely inlinable, it was called, with a copy of
    /// the monitor, once a fix).
    @inlinable @inline(__always)
    package func track(of subject: String, hint: Int) -> Int? {
        if hint >= 0, hint < names.count, names[hint] == subject { return hint }
        return trackBySubject[subject]
    }

    /// `track(of:hint:)` through an inout access. A caller that holds the monitor in a class's stored property
    /// (`FixPipeline`) reads it this way: through the non-mutating one, the compiler copied the whole monitor for
    /// the call and destroyed the copy after (a retain and a release of each of its buffers, some 1,650
    /// instructions a fix); an inout access needs no copy.
    @inlinable @inline(__always)
    package mutating func locateTrack(of subject: String, hint: Int) -> Int? {
        track(of: subject, hint: hint)
    }

    /// Forgets every subject whose last fix is before `cutoff` (fix time): a vehicle not heard from for a
    /// day costs no memory. Its state must be in the store already (the caller commits first); `restore`
    /// brings it back with its next fix. Returns the subjects forgotten.
    package mutating func evict(lastFixBefore cutoff: Date) -> [String] {
        var gone: [String] = []
        var i = 0
        while i < tracks.count {
            guard let last = tracks[i].lastFixTime, last < cutoff else {
                i += 1
                continue
            }
            gone.append(names[i])
            removeTrack(at: i)
        }
        if !gone.isEmpty && tracks.isSparse {
            tracks = Array(tracks)
            motions = Array(motions)
            names = Array(names)
            trackBySubject = trackBySubject.compacted
        }
        return gone
    }

    /// Drops these subjects from memory (a partition given up to another engine, which restores them from its
    /// checkpoint). Returns how many it held.
    @discardableResult
    package mutating func forget(subjects gone: some Sequence<String>) -> Int {
        var count = 0
        for subject in gone {
            guard let i = trackBySubject[subject] else { continue }
            removeTrack(at: i)
            count += 1
        }
        if count > 0 && tracks.isSparse {
            tracks = Array(tracks)
            motions = Array(motions)
            names = Array(names)
            trackBySubject = trackBySubject.compacted
        }
        return count
    }

    /// Swap-removes one track (its motion and name too) from the arrays, keeping the dictionary right.
    private mutating func removeTrack(at i: Int) {
        let last = tracks.count - 1
        trackBySubject[names[i]] = nil
        if i != last {
            tracks.swapAt(i, last)
            motions.swapAt(i, last)
            names.swapAt(i, last)
            trackBySubject[names[i]] = i
        }
        tracks.removeLast()
        motions.removeLast()
        names.removeLast()
    }

    // MARK: Steps

    /// Whether an expired region leaves the monitor when its expiry is reported (a single engine: its store
    /// removes it too). A cluster engine keeps it (`false`): its partitions' fixes come in separate streams, so
    /// a fix from before the expiry may still come after another's from after it, and must be judged against
    /// the region. Either way a fix at or after a region's expiry time is never judged against it.
    package var removesExpiredRegions = true

    /// Expires every region whose expiry time is at or before `time`.
    package mutating func expire(upTo time: Date, now: Date) -> MonitorOutput {
        var out = MonitorOutput()
        expireRegions(upTo: time, now: now, into: &out)
        return out
    }

    /// Runs one accepted fix through every region that could be affected by it. `track` is a hint for
    /// `track(of:hint:)`: the position of the subject's track, if the caller knows it (checked, as there).
    package mutating func process(_ fix: WeightedFix, now: Date, track hint: Int = -1) -> MonitorOutput {
        var out = MonitorOutput()
        process(fix, now: now, track: hint, into: &out)
        return out
    }

    /// `process(_:now:track:)`, its output appended to `out`. (Built in a local of the long function and
    /// returned, the output was copied on the way out, some 150 instructions a fix: the local is captured by
    /// the function's closures, so the compiler cannot move it.)
    package mutating func process(
        _ fix: WeightedFix, now: Date, track hint: Int = -1, into out: inout MonitorOutput
    ) {
        // Read once: each `fix.subject` copied the whole fix (its outlined copy and destroy) to read the name.
        let subject = fix.subject
        expireRegions(upTo: fix.time, now: now, into: &out)
        // Regions inserted since the last fix may sit in unsorted tails of the index: sorted in here, so
        // that queries stay short (a few microseconds, after a batch of insertions only).
        if spatialIndex.needsFlush { spatialIndex.flush() }

        let trackIndex: Int
        if let i = self.track(of: subject, hint: hint) {
            trackIndex = i
        } else {
            trackIndex = tracks.count
            trackBySubject[subject] = trackIndex
            tracks.append(Track(lastFixTime: nil, baselineSeq: 0))
            motions.append(nil)
            names.append(subject)
        }
        // Changed in place where it is kept, the array out of `self` meanwhile (the array's reference swapped, 8
        // bytes): nothing `process(_:subject:trackIndex:track:now:into:)` calls reads `tracks`. (Before, the track
        // itself was swapped out and back, some 250 bytes moved four times and an empty track made and destroyed
        // for each fix, to keep its pair table from being copied on write.)
        var all: [Track] = []
        swap(&all, &tracks)
        process(fix, subject: subject, trackIndex: trackIndex, track: &all[trackIndex], now: now, into: &out)
        swap(&all, &tracks)
    }

    /// `process(_:now:track:into:)` with the subject's track found: `track` is `tracks[trackIndex]`, held
    /// outside `self` by the caller.
    ///
    /// `replaying`: the fix is one of a run of refused fixes that has just started the motion over (`replayRun`):
    /// the motion check has judged it, and it decides as the first fixes of a track do.
    private mutating func process(
        _ fix: WeightedFix, subject: String, trackIndex: Int, track: inout Track, now: Date,
        replaying: Bool = false, into out: inout MonitorOutput
    ) {
        let c = configuration
        let point = fix.point

        // The track's expectation at this fix before it is taken in, for the decisions on the track.
        var before: MotionConsistency.Estimate? = nil
        let verdict: MotionConsistency.Verdict
        // This fix agreed with the motion right after fixes it refused (a burst of lies, mostly).
        var afterRefused = false
        if replaying {
            verdict = .resynchronized
        } else {
            // A fix that disagrees with the subject's motion is an outlier: it changes nothing, not even the
            // time the next fix's gap is measured from. After a stretch the engine did not watch (Location
            // Services off), the motion starts over: what the subject did meanwhile is unknown.
            if track.gapPending { motions[trackIndex] = nil }
            // Read in place (`?.`), not bound to a copy of the track.
            if c.fusedDecisions {
                before = motions[trackIndex]?.prediction(by: c.motion, at: fix.time.timeIntervalSince1970)
            }
            verdict = c.motion.update(
                &motions[trackIndex], point: point, time: fix.time.timeIntervalSince1970, accuracy: fix.accuracy,
                velocity: Self.reportedVelocity(fix))
            switch verdict {
            case .outlier:
                outliers += 1
                keepRefused(fix, run: motions[trackIndex]?.run ?? 0, track: &track)
                return
            case .resynchronized:
                resynchronized += 1
                replayRun(before: fix, subject: subject, trackIndex: trackIndex, track: &track, now: now, into: &out)
            case .first, .agrees:
                // Released, not kept for the next run: some 170 bytes a fix, for every subject that ever had one.
                if !track.refused.isEmpty {
                    track.refused = []
                    afterRefused = true
                }
            }
        }
        // The previous accepted fix, for a pass between it and this one: only when both agree with the motion
        // and nothing unseen lies between them (a resynchronized track, a stretch the engine did not watch).
        let previousFix = track.previous
        track.previous = EventFix(fix)
        let passFrom: EventFix? = verdict == .agrees && !track.gapPending ? previousFix : nil
        // Where that fix was, as the candidate search left it (nil after a restore: computed again).
        let passFromPoint = track.lastPoint

        // What the track says at this fix, when it may decide: a fix that agreed with a motion seen throughout,
        // not the track's first, not one that started it over, not the first after a stretch not watched.
        var fused: FusedTrack? = nil
        if c.fusedDecisions, verdict == .agrees, !track.gapPending, let before,
            let after = motions[trackIndex]?.estimate(by: c.motion)
        {
            // Looking back: no farther than the last change of any of the subject's pairs (a pair that changed
            // since then was decided by what came later) nor than the track's start.
            let lookBack = track.lastChange.map { min(Self.recallLimit, fix.time.timeIntervalSince($0)) } ?? 0
            fused = FusedTrack(before: before, after: after, lookBack: lookBack)
        }
        // The track (re)starts here: it cannot look back before this fix.
        if verdict != .agrees || track.gapPending { track.lastChange = fix.time }
        let gap = track.lastFixTime.map { fix.time.timeIntervalSince($0) }
        let acrossGap = track.gapPending || (gap.map { $0 > c.gapThreshold || $0 < 0 } ?? false)
        track.gapPending = false
        let margin = c.band.margin(accuracy: fix.accuracy)

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
        // the index's own; and their cold records (the event's id), which a jump away needs for its exits.
        var touched: UInt16 = 0
        if !track.pairs.isEmpty && !nearby {
            regions.records.withUnsafeBufferPointer { records in
                for slot in track.pairs.slots { touched &+= records[Int(slot)].flags.rawValue }
            }
            touched &+= UInt16(truncatingIfNeeded: regions.touchCold(track.pairs.slots))
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

        // Off the neighbourhood (a jump, or a first fix), the events' ids are read from cold memory: all of
        // them are loaded together here, where one event after another waited for two misses each.
        if !nearby { touched &+= UInt16(truncatingIfNeeded: regions.touchEventData(slots)) }
        // Uses the loads above so they stay; reserving no capacity changes nothing.
        if touched == 0x5A5A { out.events.reserveCapacity(0) }

        // Passes between the previous fix and this one come before this fix's own events: they are earlier.
        let eventsBefore = out.events.count
        let anchor = track.across.first
        if !track.across.isEmpty { track.across = [] }
        if c.inferPasses, let from = passFrom, let previousTime = track.lastFixTime {
            var passed: [Int32] = []
            inferPasses(
                from: from, fromPoint: passFromPoint, at: previousTime, to: fix, point: point, track: track, now: now,
                passed: &passed, into: &out)
            // And across the previous fix, where it was in a region's band: from the fix before it, for the regions
            // it said nothing of (the subject's only fix inside was inconclusive, the others lies refused), all in
            // order of time with the passes just found. Not for a fix at the time of the one before (the motion
            // check takes it as saying nothing new): the pass from that one stopped at the same test.
            if let anchor, fix.time.timeIntervalSince(previousTime) > 0.002 {
                let fromPoint =
                    passFromPoint ?? GeocentricPoint(Coordinate(latitude: from.latitude, longitude: from.longitude))
                inferPasses(
                    from: anchor.fix, fromPoint: nil, at: anchor.time, to: fix, point: point, track: track, now: now,
                    across: (fromPoint, c.band.margin(accuracy: from.accuracy)), passed: &passed, into: &out)
                if out.events.count - eventsBefore > 1 { out.events[eventsBefore...].sort(by: Self.passOrder) }
            }
        }

        inBandOutside = false
        // Records from the neighbourhood when it is current (it was just used or taken), else scattered
        // over memory.
        let copies = candidateSearch == .spatialIndex && track.neighbourhood.generation == regionGeneration
        for slot in slots {
            let record = (copies ? track.neighbourhood.record(slot: slot) : nil) ?? regions.records[Int(slot)]
            guard regions.applies(record, slot: slot, to: subject) else { continue }
            // A region kept past its expiry (`removesExpiredRegions` off) is nothing to a fix from after it.
            if record.flags.contains(.hasDetails), let expires = regions.expires(slot: slot), expires <= fix.time {
                continue
            }
            let r = record.radius

            // A region no fix of this accuracy can ever be conclusively inside.
            let limited = HysteresisBand.isAccuracyLimited(radius: r, margin: margin)
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
            if existing == nil, known,
                HysteresisBand.isOutside(distanceLowerBound: bounds.lower, radius: r, margin: margin)
            {
                continue
            }

            var pair = existing ?? Pair(record: PairRecord(state: known ? .outside : .unknown), stored: nil)
            let was = pair.record.state
            step(
                &pair, slot: slot, record: record, bounds: bounds, fix: fix, margin: margin, acrossGap: acrossGap,
                fused: fused, now: now, into: &out)
            if pair.record.state != was { track.lastChange = fix.time }
            keep(pair, slot: slot, seq: record.seq, subject: subject, track: &track, into: &out)
        }
        scratch = slots
        // A pass to the next fix may start across this one: from the previous fix, when this one agreed with the
        // motion right after fixes it refused (the lies of a burst: this may be the only honest fix in a region),
        // was in the band of a region it left outside, changed no pair and brought out no event (so every pair
        // was at the previous fix as it is now, and the pass's times fall after every event before it). A pair can
        // change without an event (inside to outside, decided by the track, in a region that notifies no exit):
        // such a pair was inside at the previous fix, and a pass from there would be an `enter` it never made.
        // Only after refused fixes: a second pass search for every fix in some band would cost the dense fleets'
        // fixes a query along the segment each time they near a boundary.
        if inBandOutside, afterRefused, c.inferPasses, let from = passFrom, let previousTime = track.lastFixTime,
            out.events.count == eventsBefore, track.lastChange != fix.time
        {
            track.across = [PassAnchor(fix: from, time: previousTime)]
        }

        track.lastFixTime = fix.time
        track.baselineSeq = maxSeq
        out.subjectUpdate = .init(
            subject: subject,
            record: SubjectRecord(lastFixTime: fix.time, baselineSeq: maxSeq, lastFix: EventFix(fix)))
    }

    /// The velocity a fix reports (its speed along its course), in earth-centred axes; nil without both. The local
    /// east and north are taken on the sphere through the fix (the geocentric latitude: within 0.2° of the
    /// geodetic, nothing for a direction known to 5°).
    package static func reportedVelocity(_ fix: WeightedFix) -> GeocentricPoint? {
        guard let speed = fix.fix.speed, let course = fix.fix.course, speed.isFinite, course.isFinite,
            speed >= 0, speed < 200
        else { return nil }
        let p = fix.point
        let rho = (p.x * p.x + p.y * p.y).squareRoot()
        let r = (rho * rho + p.z * p.z).squareRoot()
        guard rho > 1, r > 1 else { return nil }
        let inverseRho = 1 / rho
        let inverseR = 1 / r
        let (cosL, sinL) = (p.x * inverseRho, p.y * inverseRho)
        let (cosP, sinP) = (rho * inverseR, p.z * inverseR)
        let (sine, cosine) = Degrees.roughSinCos(course)
        let east = speed * sine
        let north = speed * cosine
        return GeocentricPoint(
            x: -sinL * east - sinP * cosL * north, y: cosL * east - sinP * sinL * north, z: cosP * north)
    }

    /// Keeps a refused fix with the run the motion check counts it in (`run` fixes, this one the last): a run that
    /// starts the motion over is replayed (`replayRun`). A run not all of whose fixes are here (it began before
    /// the state was restored) keeps none, and is not replayed.
    private func keepRefused(_ fix: WeightedFix, run: UInt8, track: inout Track) {
        if run == 1 {
            track.refused.removeAll(keepingCapacity: true)
        } else if track.refused.count + 1 != Int(run) {
            track.refused = []
            return
        }
        // As a checkpoint keeps it (`WeightedFix(kept:subject:time:)`): a take-over replays the same fixes.
        track.refused.append(WeightedFix(kept: EventFix(fix), subject: fix.subject, time: fix.time))
    }

    /// A run of refused fixes has started the subject's motion over at `fix`: the run was the truth the track had
    /// lost (a subject that pulled away or braked during a burst of lies, or a wrong start), and its earlier fixes
    /// decide now, in order, each as the first fixes of a track do (the plain rule, no pass, no decision on the
    /// track), before `fix` does. Their events come late, at `fix`, with their own fixes and times: a region
    /// crossed while the track refused the fixes of the crossing is reported, not missed. Nothing is replayed
    /// when the motion started over for a clock that stepped back (the run's fixes are not all between the last
    /// fix taken in and this one).
    private mutating func replayRun(
        before fix: WeightedFix, subject: String, trackIndex: Int, track: inout Track, now: Date,
        into out: inout MonitorOutput
    ) {
        guard !track.refused.isEmpty else { return }
        var run: [WeightedFix] = []
        swap(&run, &track.refused)
        var previous = track.lastFixTime ?? .distantPast
        var inOrder = true
        for earlier in run {
            if earlier.time <= previous || earlier.time >= fix.time { inOrder = false }
            previous = earlier.time
        }
        // A run's filter takes its second fix up to 60 m/s from its first, so the last lie of a burst can head a
        // run of the honest fixes after it (traced: a lie 27 m off claiming 4.4 m, then four honest fixes of
        // 10-11 m, whose errors let no test of the two or three after it tell the lie by its place). The run's
        // first fix is left out: a crossing it made is reported by the next, one fix later.
        if inOrder, run.count >= 2 {
            for earlier in run.dropFirst() {
                process(
                    earlier, subject: subject, trackIndex: trackIndex, track: &track, now: now, replaying: true,
                    into: &out)
            }
        }
    }

    /// Puts a pair back in its subject's table after a step, and records what the store must learn.
    private func keep(
        _ pair: Pair, slot: Int32, seq: Int64, subject: String, track: inout Track, into out: inout MonitorOutput
    ) {
        var pair = pair
        let wanted: PairRecord? = pair.record.state == .outside ? nil : pair.record
        if wanted != pair.stored {
            out.pairUpdates.append(.init(subject: subject, regionSeq: seq, record: wanted))
            pair.stored = wanted
        }
        if pair.record.state == .outside {
            track.pairs[slot] = nil
        } else {
            track.pairs[slot] = pair
        }
    }

    // MARK: Expiry

    private mutating func expireRegions(upTo time: Date, now: Date, into out: inout MonitorOutput) {
        while let next = expiries.first, next.at <= time {
            expiries.pop()
            // A region removed (or replaced) since it was queued left this entry behind.
            guard let slot = regions.slot(seq: next.seq) else { continue }
            let id = regions.id(slot: slot)
            let radius = regions.eventRadius(regions.records[Int(slot)])
            if removesExpiredRegions { remove(id: id) }
            out.statusChanges.append(.init(regionSeq: next.seq, regionID: id, status: .expired))
            out.events.append(
                RegionEvent(
                    id: ids.next(now: now), type: .expired, region: id, subject: nil, time: next.at, state: nil,
                    previous: nil, inferred: false, distance: nil, radius: radius, fix: nil))
        }
    }
}
