import Foundation

extension RegionMonitor {
    /// What the subject's track says at one fix, for the decisions on the track (Docs/events.md, "Decisions
    /// on the track"): built in `process` when `fusedDecisions` is on and the fix agreed with the motion.
    struct FusedTrack: Sendable {
        /// Where the fixes before this one put the subject at its time (the track's expectation, this fix not
        /// taken in), and where the track puts it with this fix. Two estimates of 96 bytes (with what carries them back), not the two tracks
        /// they are read from (some 220 bytes each, copied several times a fix on their way to `fusedState`).
        var before: MotionConsistency.Estimate
        var after: MotionConsistency.Estimate
        /// How far back (seconds) the track may look for where it put the subject (`Estimate.recollection`): the
        /// track knows a moving subject's past position better than its present one, as the fixes since have
        /// shown where it went. No farther than `recallLimit`, its start, or a change of any of the subject's
        /// pairs since; below a second, not at all.
        var lookBack: Double = 0
    }

    /// How far back (seconds) the track looks at most.
    static let recallLimit = 8.0

    /// The least speed (m/s) at which a track may change a pair's state: a parked receiver's estimate, however
    /// certain, sits where its fixes' errors put it and must not creep across a boundary.
    static let fusedSpeed = 1.0

    /// What the track decides for a pair whose fix is in the band (it says nothing), or nil. The track
    /// decides only when its estimate is conclusive on one side, both from the fixes before this one and
    /// with it (so that no single fix decides), with a band `fusedFactor` times as wide as a fix of its
    /// uncertainty would get; when the fix itself is on that side of the boundary (the estimate never
    /// decides what the fix contradicts); and, to change a state already known, when the track moves.
    func fusedState(
        _ fused: FusedTrack, current: RegionState, slot: Int32, record: RegionTable.Record,
        fixBounds: (lower: Double, upper: Double), radius r: Double
    ) -> RegionState? {
        let after = fused.after
        // Moving: the speed well clear of zero (more than `fusedSpeed` and three standard deviations).
        let moving = after.speed > max(Self.fusedSpeed, 3 * after.speedSigma)
        guard current == .unknown || moving else { return nil }
        // Where the fixes before this one put the subject at its time (this fix not taken in), and with it.
        func decided(_ before: MotionConsistency.Estimate, _ after: MotionConsistency.Estimate) -> RegionState? {
            guard let side = fusedSide(after, slot: slot, record: record, radius: r), side != current,
                fusedSide(before, slot: slot, record: record, radius: r) == side
            else { return nil }
            // The fix on the decided side of the boundary (for a polygon, `r` is 0 and the bounds are its
            // signed distance).
            let agrees = side == .inside ? fixBounds.upper <= r : fixBounds.lower >= r
            return agrees ? side : nil
        }
        if let side = decided(fused.before, after) { return side }
        // Looking back, where the track knows the subject's position best (`pv/vv` seconds back): both estimates
        // carried back to the same moment. Worked out here, for a pair whose fix is in the band, not for every fix.
        guard fused.lookBack >= 1 else { return nil }
        let lag = after.clearestLag(limit: fused.lookBack)
        guard lag >= 1 else { return nil }
        return decided(fused.before.recollection(lag: lag), after.recollection(lag: lag))
    }

    /// What one estimate says about a region, by the hysteresis rule with a margin for an accuracy of
    /// `fusedFactor` times two standard deviations (a fix's accuracy is taken as two).
    private func fusedSide(
        _ estimate: MotionConsistency.Estimate, slot: Int32, record: RegionTable.Record, radius r: Double
    ) -> RegionState? {
        let c = configuration
        let margin = c.band.margin(accuracy: c.fusedFactor * 2 * estimate.sigma)
        let bounds: (lower: Double, upper: Double)
        if let polygon = regions.polygon(record, slot: slot) {
            let d = polygon.signedDistance(to: estimate.position, limit: margin * 1.001 + 0.01)
            bounds = (d, d)
        } else {
            bounds = Geodesic.distanceBounds(chord: estimate.position.chord(to: record.center))
        }
        // `exact` is asked only within millimetres of the band's edge: the chord's bounds serve (the
        // estimate is itself uncertain by metres).
        return c.band.classify(bounds: bounds, radius: r, margin: margin) { (bounds.lower + bounds.upper) / 2 }
    }
}
