import Foundation

/// Why the filter refused a fix. Every reason is counted and shown by `geofence replay --stats` and `status`.
public enum FixRejection: String, Sendable, CaseIterable, Codable {
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
    public var label: String {
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
    /// How far ahead of the wall clock at receipt a fix time may be (seconds).
    public var maxFutureSkew: Double = 5
    /// How old a fix may be at receipt (seconds).
    public var maxAgeAtReceipt: Double = 30
    /// After this many consecutive refused fixes that agree with each other (plausible speeds among
    /// themselves, time moving forward), the filter accepts the latest as the new truth. This is what
    /// keeps a receiver that really moved (or whose clock really stepped) from being locked out.
    public var resyncAfter: Int = 3

    /// The defaults above, `geofence run`'s.
    public init() {}
}

/// The verdict on one fix.
public enum FixVerdict: Sendable, Equatable {
    case accepted(WeightedFix)
    case rejected(FixRejection)
}

/// Counts of verdicts, by reason.
public struct FixFilterStatistics: Sendable, Equatable {
    public var accepted = 0
    /// Accepted fixes that ended a run of refused ones (the filter re-synchronised on them).
    public var resynchronized = 0
    public var rejected: [FixRejection: Int] = [:]

    public init() {}

    public var total: Int { accepted + rejected.values.reduce(0, +) }

    public subscript(reason: FixRejection) -> Int { rejected[reason, default: 0] }

    public mutating func merge(_ other: FixFilterStatistics) {
        accepted += other.accepted
        resynchronized += other.resynchronized
        for (reason, count) in other.rejected { rejected[reason, default: 0] += count }
    }
}

/// Decides, per subject, which fixes are good enough to act on.
///
/// Pure: the wall clock at receipt travels inside each `Fix`; the filter reads no clock.
public struct FixFilter: Sendable {
    public var configuration: FixFilterConfiguration
    public private(set) var statistics = FixFilterStatistics()
    private var subjects: [String: SubjectTrack] = [:]

    /// What the filter keeps of an accepted or candidate fix: what `plausible` needs, 40 bytes (a whole
    /// `WeightedFix` is ten times that, for every vehicle of a fleet).
    private struct Kept: Sendable {
        var time: Date
        var point: GeocentricPoint
        var accuracy: Double

        init(_ fix: WeightedFix) {
            time = fix.time
            point = GeocentricPoint(fix.coordinate)
            accuracy = fix.accuracy
        }
    }

    private struct SubjectTrack: Sendable {
        var last: Kept?
        /// Consecutive refused fixes (jumps or backwards time) that may prove to be the new truth.
        var candidates: [Kept] = []
    }

    public init(configuration: FixFilterConfiguration = FixFilterConfiguration()) {
        self.configuration = configuration
    }

    /// The fix time of a subject's last accepted fix.
    public func lastAcceptedTime(subject: String) -> Date? { subjects[subject]?.last?.time }

    /// Seeds a subject's last accepted fix (from the store after a restart), so a restart does not
    /// reopen the door to duplicates or jumps.
    public mutating func restore(_ fix: WeightedFix) {
        subjects[fix.subject, default: SubjectTrack()].last = Kept(fix)
    }

    /// Forgets these subjects' tracks (vehicles not heard from for long, whose state the monitor let go
    /// too); `restore` brings a subject back.
    public mutating func forget(_ gone: [String]) {
        for subject in gone { subjects[subject] = nil }
        if !gone.isEmpty && subjects.isSparse { subjects = subjects.compacted }
    }

    /// Counts a refusal decided before the filter (a report superseded within its epoch is a duplicate).
    public mutating func count(_ reason: FixRejection) {
        statistics.rejected[reason, default: 0] += 1
    }

    /// Judges one fix, updates the per-subject track, and counts the verdict.
    public mutating func evaluate(_ fix: Fix) -> FixVerdict {
        let verdict = judge(fix)
        switch verdict {
        case .accepted: statistics.accepted += 1
        case .rejected(let reason): statistics.rejected[reason, default: 0] += 1
        }
        return verdict
    }

    private mutating func judge(_ fix: Fix) -> FixVerdict {
        let c = configuration
        guard fix.mode >= .twoD else { return .rejected(.noFix) }
        guard let lat = fix.latitude, let lon = fix.longitude else { return .rejected(.invalidCoordinates) }
        let coordinate = Coordinate(latitude: lat, longitude: lon)
        guard coordinate.isValid else { return .rejected(.invalidCoordinates) }
        if lat == 0 && lon == 0 { return .rejected(.nullIsland) }
        // A time beyond the years 0000-9999 is no time (the decoders refuse it first; a library caller may not).
        guard let time = fix.time, Fix.representableTimes.contains(time.timeIntervalSince1970) else {
            return .rejected(.noTime)
        }
        if let received = fix.receivedAt {
            let lead = time.timeIntervalSince(received)
            if lead > c.maxFutureSkew { return .rejected(.future) }
            if -lead > c.maxAgeAtReceipt { return .rejected(.stale) }
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
        if accuracy > c.maxAccuracy { return .rejected(.tooInaccurate) }

        let weighted = WeightedFix(
            fix: fix, time: time, coordinate: coordinate, accuracy: accuracy, accuracyEstimated: estimated)
        // The subject's track is judged in place (its entry made if new, as before): one hash of the subject.
        let (verdict, resynchronized) = Self.judge(
            weighted, Kept(weighted), track: &subjects[fix.subject, default: SubjectTrack()],
            maxSpeed: c.maxSpeed, resyncAfter: c.resyncAfter)
        if resynchronized { statistics.resynchronized += 1 }
        return verdict
    }

    /// `judge`'s decision against the subject's track, which it updates; and whether it re-synchronised.
    private static func judge(
        _ weighted: WeightedFix, _ kept: Kept, track: inout SubjectTrack, maxSpeed: Double, resyncAfter: Int
    ) -> (FixVerdict, resynchronized: Bool) {
        let time = weighted.time
        func plausible(from a: Kept, to b: Kept) -> Bool { Self.plausible(from: a, to: b, maxSpeed: maxSpeed) }
        guard let last = track.last else {
            track.last = kept
            return (.accepted(weighted), false)
        }
        if time == last.time { return (.rejected(.duplicate), false) }
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
            return (.accepted(weighted), false)
        }
        // A refused fix may be the first of a new truth: keep a run of mutually consistent ones.
        if let previous = track.candidates.last {
            if kept.time == previous.time { return (.rejected(.duplicate), false) }
            if kept.time < previous.time || !plausible(from: previous, to: kept) {
                track.candidates.removeAll()
            }
        }
        track.candidates.append(kept)
        if track.candidates.count >= max(1, resyncAfter) {
            track.last = kept
            track.candidates.removeAll()
            return (.accepted(weighted), true)
        }
        return (.rejected(reason), false)
    }

    /// Whether moving from `a` to `b` is possible at `maxSpeed`, giving both fixes the benefit of their accuracy.
    private static func plausible(from a: Kept, to b: Kept, maxSpeed: Double) -> Bool {
        let dt = b.time.timeIntervalSince(a.time)
        guard dt > 0 else { return false }
        let reach = maxSpeed * dt + a.accuracy + b.accuracy
        // The chord is a lower bound of the geodesic; comparing it against the reach is conservative
        // in the direction of acceptance, which is the safe side for a plausibility check.
        return a.point.chord(to: b.point) <= reach
    }
}
