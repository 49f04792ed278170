import Foundation

/// Picks one report per receiver epoch from gpsd's several.
///
/// gpsd sends a TPV for each sentence that updates the fix until it has learned which sentence ends a
/// receiver's cycle, so an epoch can arrive as several TPVs with the same time, each more complete than
/// the last: an RMC-based one without an error estimate, then a GGA-based one with `eph`. Taking the first
/// would act on the poorest (with a made-up accuracy); taking the last means waiting for the next epoch.
/// So a report goes on as soon as it is complete (time, a 2D/3D position and an accuracy), and an
/// incomplete one is held until a better one of its epoch arrives, the next epoch begins, or `settle`
/// seconds pass. Later reports of an epoch already passed on go on too, where the filter refuses them as
/// duplicates. Pure: the monotonic time is passed in.
public struct EpochAssembler: Sendable {
    /// How long an incomplete report waits for the rest of its epoch, seconds.
    public var settle: Double

    /// What became of a report.
    public enum Outcome: Sendable, Equatable {
        /// Go on to the filter.
        case ready(Fix)
        /// Replaced by a later report of the same epoch before it went on: a duplicate.
        case superseded(Fix)
    }

    private struct Pending: Sendable {
        var fix: Fix
        var arrived: Double
        var passed: Bool
    }

    private var pending: [String: Pending] = [:]

    public init(settle: Double = 0.3) {
        self.settle = settle
    }

    /// A report is complete when nothing later in its epoch could improve what the engine needs.
    public static func isComplete(_ fix: Fix) -> Bool {
        fix.time != nil && fix.mode >= .twoD && fix.latitude != nil && fix.longitude != nil
            && fix.horizontalAccuracy != nil
    }

    /// Takes one report; returns what goes on now, in order.
    public mutating func offer(_ fix: Fix, now: Double) -> [Outcome] {
        guard let time = fix.time else { return [.ready(fix)] }
        var out: [Outcome] = []
        if var p = pending[fix.subject], p.fix.time == time {
            if p.passed { return [.ready(fix)] }
            out.append(.superseded(p.fix))
            p.fix = fix
            p.arrived = now
            if EpochAssembler.isComplete(fix) {
                p.passed = true
                out.append(.ready(fix))
            }
            pending[fix.subject] = p
            return out
        }
        if let p = pending[fix.subject], !p.passed { out.append(.ready(p.fix)) }
        let complete = EpochAssembler.isComplete(fix)
        pending[fix.subject] = Pending(fix: fix, arrived: now, passed: complete)
        if complete { out.append(.ready(fix)) }
        return out
    }

    /// Reports that have waited `settle` seconds for the rest of their epoch.
    public mutating func due(now: Double) -> [Fix] {
        var out: [Fix] = []
        for (subject, p) in pending where !p.passed && now - p.arrived >= settle {
            out.append(p.fix)
            pending[subject]?.passed = true
        }
        return out.sorted { ($0.time ?? .distantPast) < ($1.time ?? .distantPast) }
    }

    /// Every report still held (at the end of a recording).
    public mutating func flush() -> [Fix] {
        due(now: .infinity)
    }
}
