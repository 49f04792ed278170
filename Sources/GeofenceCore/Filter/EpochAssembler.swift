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
package struct EpochAssembler: Sendable {
    /// How long an incomplete report waits for the rest of its epoch, seconds.
    package var settle: Double

    /// What became of a report.
    package enum Outcome: Sendable, Equatable {
        /// Go on to the filter.
        case ready(Fix)
        /// Replaced by a later report of the same epoch before it went on: a duplicate.
        case superseded(Fix)
    }

    /// An incomplete report waiting for the rest of its epoch.
    private struct Held: Sendable {
        var fix: Fix
        var arrived: Double
    }

    /// Each subject's latest epoch that went on (its reports since then are duplicates), by slot (`subjects`),
    /// and the few reports held: apart, so that a fleet costs a time per vehicle, and `due` looks at the held
    /// ones only.
    private var subjects = SubjectSlots()
    private var passed: [Date] = []
    private var held: [String: Held] = [:]

    package init(settle: Double = 0.3) {
        self.settle = settle
    }

    /// A report is complete when nothing later in its epoch could improve what the engine needs.
    package static func isComplete(_ fix: Fix) -> Bool {
        fix.time != nil && fix.mode >= .twoD && fix.latitude != nil && fix.longitude != nil
            && fix.horizontalAccuracy != nil
    }

    /// The time of the subject's latest epoch that went on (nil: none yet).
    package func passedTime(of subject: String) -> Date? {
        subjects.slot(of: subject).map { passed[$0] }
    }

    /// Records that an epoch of the subject went on.
    private mutating func pass(_ subject: String, time: Date, slot known: Int?) {
        if let known {
            passed[known] = time
        } else if let slot = subjects.slot(of: subject) {
            passed[slot] = time
        } else {
            _ = subjects.append(subject)
            passed.append(time)
        }
    }

    /// The usual report of a fleet, without building an array of outcomes: true when `offer` would return
    /// `[.ready(fix)]` and nothing held, having done what it would do (the report goes on as it is); false,
    /// having changed nothing, when the caller must `offer` it. `hint` is the subject's slot from an earlier
    /// call (any value at first: it is checked, and set to the slot found).
    @inline(__always)
    package mutating func passesOn(_ fix: Fix, hint: inout Int) -> Bool {
        guard held.isEmpty, let time = fix.time else { return false }
        let known = subjects.slot(of: fix.subject, hint: hint)
        if let known {
            hint = known
            // A later report of an epoch already passed on: on to the filter, which refuses it as a duplicate.
            if passed[known] == time { return true }
        }
        guard EpochAssembler.isComplete(fix) else { return false }
        if let known {
            passed[known] = time
        } else {
            hint = subjects.append(fix.subject)
            passed.append(time)
        }
        return true
    }

    /// Takes one report; returns what goes on now, in order.
    package mutating func offer(_ fix: Fix, now: Double) -> [Outcome] {
        guard let time = fix.time else { return [.ready(fix)] }
        // The subject's entry is found once, compared, and replaced in place.
        var known = subjects.slot(of: fix.subject)
        if let known, passed[known] == time { return [.ready(fix)] }
        var out: [Outcome] = []
        if !held.isEmpty, let h = held.removeValue(forKey: fix.subject) {
            // A better report of the held epoch replaces it; the next epoch sends it on as it is.
            out.append(h.fix.time == time ? .superseded(h.fix) : .ready(h.fix))
            if h.fix.time != time, let heldTime = h.fix.time {
                pass(fix.subject, time: heldTime, slot: known)
                known = subjects.slot(of: fix.subject)
            }
        }
        if EpochAssembler.isComplete(fix) {
            pass(fix.subject, time: time, slot: known)
            out.append(.ready(fix))
        } else {
            held[fix.subject] = Held(fix: fix, arrived: now)
        }
        return out
    }

    /// Reports that have waited `settle` seconds for the rest of their epoch.
    package mutating func due(now: Double) -> [Fix] {
        guard !held.isEmpty else { return [] }
        var out: [Fix] = []
        for (subject, h) in held where now - h.arrived >= settle {
            out.append(h.fix)
            held[subject] = nil
            if let time = h.fix.time { pass(subject, time: time, slot: nil) }
        }
        return out.sorted { ($0.time ?? .distantPast) < ($1.time ?? .distantPast) }
    }

    /// Forgets these subjects (vehicles not heard from for long).
    package mutating func forget(_ gone: [String]) {
        for subject in gone {
            held[subject] = nil
            guard let slot = subjects.slot(of: subject) else { continue }
            subjects.remove(at: slot)
            passed.swapAt(slot, passed.count - 1)
            passed.removeLast()
        }
        if !gone.isEmpty && subjects.isSparse {
            subjects.compact()
            passed = Array(passed)
        }
    }

    /// Every report still held (at the end of a recording).
    package mutating func flush() -> [Fix] {
        due(now: .infinity)
    }
}
