import Foundation

/// Why the filter refused a fix. Every reason is counted and shown by `geofence replay --stats` and `status`.
package enum FixRejection: String, Sendable, CaseIterable, Codable {
    /// Mode below 2D: the receiver has no position.
    case noFix = "no-fix"
    /// The report carries no fix time, so it cannot be placed on the fix clock (gpsd sends such
    /// partial reports at the start of an epoch, before the receiver has sent a date).
    case noTime = "no-time"
    /// Latitude or longitude missing, not finite, or out of range.
    case invalidCoordinates = "invalid-coordinates"
    /// Exactly (0, 0): a receiver's placeholder, not a place anyone is.
    case nullIsland = "null-island"
    /// Fix time equal to the last accepted fix: another report of the same epoch.
    case duplicate = "duplicate"
    /// Fix time before the last accepted fix.
    case outOfOrder = "out-of-order"
    /// Fix time too far ahead of the wall clock at receipt.
    case future = "future"
    /// Fix time too far behind the wall clock at receipt.
    case stale = "stale"
    /// Horizontal accuracy worse than the configured maximum.
    case tooInaccurate = "too-inaccurate"
    /// The implied speed from the last accepted fix, allowing for both accuracies, is impossible.
    case implausibleJump = "implausible-jump"

    /// Words for people (`--stats`).
    package var label: String {
        switch self {
        case .noFix: "no fix (mode < 2)"
        case .noTime: "no time (partial epoch report)"
        case .invalidCoordinates: "invalid coordinates"
        case .nullIsland: "null island (0, 0)"
        case .duplicate: "duplicate (same epoch)"
        case .outOfOrder: "out of order (time went back)"
        case .future: "in the future"
        case .stale: "too old at receipt"
        case .tooInaccurate: "too inaccurate"
        case .implausibleJump: "implausible jump"
        }
    }
}

/// The filter's settings. Defaults suit a road vehicle with a consumer GNSS receiver.
public struct FixFilterConfiguration: Sendable, Equatable {
    /// Fixes whose horizontal accuracy is worse than this (metres) are refused: nothing can be learnt from
    /// them. A merely poor fix is weighed by the hysteresis band (conclusive for regions whose boundary it
    /// is far from), not refused.
    public var maxAccuracy: Double = 5000
    /// Highest believable ground speed, m/s (100 m/s = 360 km/h).
    public var maxSpeed: Double = 100
    /// Accuracy assumed when the receiver reports none (metres); such fixes are marked estimated.
    public var defaultAccuracy: Double = 25
    /// How far ahead of the wall clock at receipt a fix time may be (seconds), for every source: gpsd's
    /// fixes are refused by the filter, a fleet's by its source before they reach the filter.
    public var maxFutureSkew: Double = 5
    /// How old a live fix (gpsd's) may be at receipt (seconds); a fleet's fixes may be older.
    public var maxAgeAtReceipt: Double = 30
    /// After this many consecutive refused fixes that agree with each other (plausible speeds among
    /// themselves, time moving forward), the filter accepts the latest as the new truth. This is what
    /// keeps a receiver that really moved (or whose clock really stepped) from being locked out.
    public var resyncAfter: Int = 3

    /// The defaults above, `geofence run`'s.
    public init() {}
}

/// The verdict on one fix.
package enum FixVerdict: Sendable, Equatable {
    case accepted(WeightedFix)
    case rejected(FixRejection)

    /// The verdict of a judgement that hands an accepted fix to a callback and returns only a refusal
    /// (`FixFilter.evaluate(_:hint:accepted:)`, `FixPipeline`'s), for the callers that want the verdict.
    package init(_ judge: ((borrowing WeightedFix) -> Void) -> FixRejection?) {
        var accepted: WeightedFix? = nil
        if let rejection = judge({ accepted = copy $0 }) {
            self = .rejected(rejection)
        } else if let accepted {
            self = .accepted(accepted)
        } else {
            preconditionFailure("a fix neither accepted nor refused")
        }
    }
}

/// What one fix is on its own, before its subject's track is looked at: the one answer, for every source,
/// to whether a fix is usable, from the future or too old (`FixFilter.classify`).
package enum FixClass: Sendable, Equatable {
    /// A 2D or 3D fix with a valid position other than (0, 0), and a time neither too far ahead of the
    /// clock at receipt nor (for a live fix) too old at it.
    case usable(time: Date, coordinate: Coordinate)
    /// Mode below 2D: the receiver has no position.
    case noFix(FixMode)
    /// Latitude or longitude absent.
    case noPosition
    /// Latitude or longitude not finite, or out of range.
    case badPosition
    /// Exactly (0, 0): a receiver's placeholder.
    case nullIsland
    /// No fix time, or one beyond the years 0000-9999.
    case noTime
    /// The fix time is `lead` seconds ahead of the clock at receipt, more than `maxFutureSkew`.
    case future(lead: Double)
    /// A live fix `age` seconds old at receipt, more than `maxAgeAtReceipt`.
    case stale(age: Double)

    package var isUsable: Bool {
        if case .usable = self { return true }
        return false
    }

    /// The filter's reason for refusing the fix; nil when it is usable.
    package var rejection: FixRejection? {
        switch self {
        case .usable: nil
        case .noFix: .noFix
        case .noPosition, .badPosition: .invalidCoordinates
        case .nullIsland: .nullIsland
        case .noTime: .noTime
        case .future: .future
        case .stale: .stale
        }
    }
}

/// Counts of verdicts, by reason.
package struct FixFilterStatistics: Sendable, Equatable {
    package var accepted = 0
    /// Accepted fixes that ended a run of refused ones (the filter re-synchronised on them).
    package var resynchronized = 0
    package var rejected: [FixRejection: Int] = [:]

    package init() {}

    package var total: Int { accepted + rejected.values.reduce(0, +) }

    package subscript(reason: FixRejection) -> Int { rejected[reason, default: 0] }

    package mutating func merge(_ other: FixFilterStatistics) {
        accepted += other.accepted
        resynchronized += other.resynchronized
        for (reason, count) in other.rejected { rejected[reason, default: 0] += count }
    }
}

/// Decides, per subject, which fixes are good enough to act on.
///
/// Pure: the wall clock at receipt travels inside each `Fix`; the filter reads no clock.
package struct FixFilter: Sendable {
    package var configuration: FixFilterConfiguration
    package private(set) var statistics = FixFilterStatistics()
    /// Each subject's memory, by slot (`subjects`): a caller that keeps the slot (`evaluate(_:hint:)`) finds
    /// it without hashing the subject's name.
    private var subjects = SubjectSlots()
    private var memories: [VehicleMemory] = []

    /// What the filter keeps of an accepted or candidate fix: what `plausible` needs, 40 bytes (a whole
    /// `WeightedFix` is four times that, for every vehicle of a fleet).
    package struct KeptFix: Sendable, Equatable {
        package var time: Date
        package var point: GeocentricPoint
        package var accuracy: Double

        init(_ fix: borrowing WeightedFix) {
            time = fix.time
            point = fix.point
            accuracy = fix.accuracy
        }

        /// A kept fix field by field (a checkpoint's): nothing is validated.
        package init(time: Date, point: GeocentricPoint, accuracy: Double) {
            self.time = time
            self.point = point
            self.accuracy = accuracy
        }
    }

    /// Everything the filter remembers of one vehicle, as one value: its next fix is judged against this alone
    /// (`memory(of:)` takes it, `restore(_:subject:)` puts it back, in this filter or another).
    package struct VehicleMemory: Sendable, Equatable {
        /// The last accepted fix.
        package var last: KeptFix?
        /// Consecutive refused fixes (jumps or backwards time) that may prove to be the new truth.
        package var candidates: [KeptFix] = []

        package init(last: KeptFix? = nil, candidates: [KeptFix] = []) {
            self.last = last
            self.candidates = candidates
        }
    }

    package init(configuration: FixFilterConfiguration = FixFilterConfiguration()) {
        self.configuration = configuration
    }

    /// The fix time of a subject's last accepted fix.
    package func lastAcceptedTime(subject: String) -> Date? { memory(of: subject)?.last?.time }

    /// Seeds a subject's last accepted fix (from the store after a restart), so a restart does not
    /// reopen the door to duplicates or jumps.
    package mutating func restore(_ fix: WeightedFix) {
        let slot = self.slot(of: fix.subject)
        memories[slot].last = KeptFix(fix)
    }

    /// The subject's slot, made (with an empty memory) if it has none.
    private mutating func slot(of subject: String, hint: Int = -1) -> Int {
        if let slot = subjects.slot(of: subject, hint: hint) { return slot }
        memories.append(VehicleMemory())
        return subjects.append(subject)
    }

    /// What the filter remembers of `subject` (nil: nothing, as for a vehicle never seen).
    package func memory(of subject: String) -> VehicleMemory? { subjects.slot(of: subject).map { memories[$0] } }

    /// Puts back what the filter remembers of `subject` (from `memory(of:)`, here or in another filter), in
    /// place of what it held; nil forgets the subject.
    package mutating func restore(_ memory: VehicleMemory?, subject: String) {
        if let memory {
            let slot = self.slot(of: subject)
            memories[slot] = memory
        } else if let slot = subjects.slot(of: subject) {
            remove(slot: slot)
        }
    }

    /// The subjects the filter remembers, in no particular order.
    package var rememberedSubjects: [String] { subjects.names }

    private mutating func remove(slot: Int) {
        subjects.remove(at: slot)
        memories.swapAt(slot, memories.count - 1)
        memories.removeLast()
    }

    /// Forgets these subjects' tracks (vehicles not heard from for long, whose state the monitor let go
    /// too); `restore` brings a subject back.
    package mutating func forget(_ gone: [String]) {
        for subject in gone { if let slot = subjects.slot(of: subject) { remove(slot: slot) } }
        if !gone.isEmpty && subjects.isSparse {
            subjects.compact()
            memories = Array(memories)
        }
    }

    /// Counts a refusal decided before the filter (a report superseded within its epoch is a duplicate).
    package mutating func count(_ reason: FixRejection) {
        statistics.rejected[reason, default: 0] += 1
    }

    /// What `fix` is on its own (`FixClass`), judged at `now`, the wall clock when it was received (nil: a
    /// recording, whose times are judged only against each other). Every source asks this: gpsd's fixes
    /// through the filter, at their `receivedAt`; a fleet source at its receipt time, before it passes a
    /// fix on; the liveness watchdogs, with no time (a fix's age is not whether data arrives).
    ///
    /// A fix is from the future when its time is more than `maxFutureSkew` ahead of `now`, whatever the
    /// source. Only a live fix, one that carries its `receivedAt`, is judged for its age: a fleet's fixes
    /// may rightly be old (the backlog of a persistent session, a lagging stream).
    package func classify(_ fix: Fix, now: Date?) -> FixClass {
        Self.classify(fix, now: now, configuration: configuration)
    }

    /// `classify(_:now:)` under these settings, for a judge that keeps no tracks (a fleet source's intake).
    package static func classify(_ fix: Fix, now: Date?, configuration c: FixFilterConfiguration) -> FixClass {
        guard fix.mode >= .twoD else { return .noFix(fix.mode) }
        guard let lat = fix.latitude, let lon = fix.longitude else { return .noPosition }
        let coordinate = Coordinate(latitude: lat, longitude: lon)
        guard coordinate.isValid else { return .badPosition }
        if lat == 0 && lon == 0 { return .nullIsland }
        // A time beyond the years 0000-9999 is no time (the decoders refuse it first; a library caller may not).
        guard let time = fix.time, Fix.representableTimes.contains(time.timeIntervalSince1970) else {
            return .noTime
        }
        if let now {
            let lead = time.timeIntervalSince(now)
            if lead > c.maxFutureSkew { return .future(lead: lead) }
            if fix.receivedAt != nil, -lead > c.maxAgeAtReceipt { return .stale(age: -lead) }
        }
        return .usable(time: time, coordinate: coordinate)
    }

    /// Judges one fix, updates the per-subject track, and counts the verdict.
    package mutating func evaluate(_ fix: Fix) -> FixVerdict {
        var hint = -1
        return evaluate(fix, hint: &hint)
    }

    /// `evaluate(_:)` for a caller that keeps the subject's slot: `hint` is the slot an earlier call left
    /// (any value at first: it is checked against the subject, and a stale one costs a look-up by name, never
    /// another subject's track), and is set to the slot used when the track was judged.
    package mutating func evaluate(_ fix: Fix, hint: inout Int) -> FixVerdict {
        FixVerdict { evaluate(fix, hint: &hint, accepted: $0) }
    }

    /// `evaluate(_:hint:)` for a caller that takes the accepted fix where the filter made it (`FixPipeline`):
    /// `accepted` hears it (borrowed) before this returns nil; a refused fix returns why. Returned in a verdict
    /// through three functions, the fix (some 170 bytes) was moved ten times a fix. `accepted` must not use
    /// this filter.
    package mutating func evaluate(
        _ fix: Fix, hint: inout Int, accepted: (borrowing WeightedFix) -> Void
    ) -> FixRejection? {
        let rejection = judge(fix, hint: &hint, accepted: accepted)
        if let rejection {
            statistics.rejected[rejection, default: 0] += 1
        } else {
            statistics.accepted += 1
        }
        return rejection
    }

    @inline(__always)
    private mutating func judge(
        _ fix: Fix, hint: inout Int, accepted: (borrowing WeightedFix) -> Void
    ) -> FixRejection? {
        let c = configuration
        // A live fix is judged against its own receipt time; a recording's and a fleet's have none here.
        let time: Date
        let coordinate: Coordinate
        switch classify(fix, now: fix.receivedAt) {
        case .usable(let t, let point):
            time = t
            coordinate = point
        case let refused:
            return refused.rejection ?? .noFix
        }
        let accuracy: Double
        let estimated: Bool
        if let reported = fix.horizontalAccuracy, reported.isFinite, reported >= 0 {
            accuracy = reported
            estimated = false
        } else {
            accuracy = c.defaultAccuracy
            estimated = true
        }
        if accuracy > c.maxAccuracy { return .tooInaccurate }

        let weighted = WeightedFix(
            fix: fix, time: time, coordinate: coordinate, accuracy: accuracy, accuracyEstimated: estimated)
        // The subject's track is judged in place (its entry made if new, as before): no hash of the subject
        // with a good hint, one without.
        let slot = self.slot(of: fix.subject, hint: hint)
        hint = slot
        let (rejection, resynchronized) = Self.judge(
            KeptFix(weighted), track: &memories[slot], maxSpeed: c.maxSpeed, resyncAfter: c.resyncAfter)
        if resynchronized { statistics.resynchronized += 1 }
        if rejection == nil { accepted(weighted) }
        return rejection
    }

    /// `judge`'s decision against the subject's track, which it updates (nil: accepted); and whether it
    /// re-synchronised.
    private static func judge(
        _ kept: KeptFix, track: inout VehicleMemory, maxSpeed: Double, resyncAfter: Int
    ) -> (FixRejection?, resynchronized: Bool) {
        let time = kept.time
        func plausible(from a: KeptFix, to b: KeptFix) -> Bool { Self.plausible(from: a, to: b, maxSpeed: maxSpeed) }
        guard let last = track.last else {
            track.last = kept
            return (nil, false)
        }
        if time == last.time { return (.duplicate, false) }
        let reason: FixRejection?
        if time < last.time {
            reason = .outOfOrder
        } else if !plausible(from: last, to: kept) {
            reason = .implausibleJump
        } else {
            reason = nil
        }
        guard let reason else {
            track.last = kept
            track.candidates.removeAll()
            return (nil, false)
        }
        // A refused fix may be the first of a new truth: keep a run of mutually consistent ones.
        if let previous = track.candidates.last {
            if kept.time == previous.time { return (.duplicate, false) }
            if kept.time < previous.time || !plausible(from: previous, to: kept) {
                track.candidates.removeAll()
            }
        }
        track.candidates.append(kept)
        if track.candidates.count >= max(1, resyncAfter) {
            track.last = kept
            track.candidates.removeAll()
            return (nil, true)
        }
        return (reason, false)
    }

    /// Whether moving from `a` to `b` is possible at `maxSpeed`, giving both fixes the benefit of their accuracy.
    private static func plausible(from a: KeptFix, to b: KeptFix, maxSpeed: Double) -> Bool {
        let dt = b.time.timeIntervalSince(a.time)
        guard dt > 0 else { return false }
        let reach = maxSpeed * dt + a.accuracy + b.accuracy
        // The chord is a lower bound of the geodesic; comparing it against the reach is conservative
        // in the direction of acceptance, which is the safe side for a plausibility check.
        return a.point.chord(to: b.point) <= reach
    }
}
