import Foundation

extension RegionMonitor {
    /// One (subject, region) pair as the monitor follows it.
    struct Pair: Sendable {
        var record: PairRecord
        /// What the store holds for this pair (nil: no row).
        var stored: PairRecord?
    }

    /// What one subject's state holds.
    struct Track: Sendable {
        var lastFixTime: Date?
        var baselineSeq: Int64
        var pairs = PairTable<Pair>()
        /// The next fix comes after an unseen stretch (see `beginGap`).
        var gapPending = false
        /// The last accepted fix (its time is `lastFixTime`): where a pass to the next one starts.
        var previous: EventFix?
        /// Where the last fix was, and the regions around the recent fixes when the subject moves slowly
        /// enough for one list to serve several fixes (see `findCandidates`).
        var lastPoint: GeocentricPoint?
        var neighbourhood = Neighbourhood()
        /// Fixes to go before trying a neighbourhood again, after one came out too large.
        var crowdedFixes: UInt8 = 0
        /// Fix time of the last change of any of the subject's pairs, or of its track's start: the track looks
        /// back no farther (`FusedTrack.lookBack`).
        var lastChange: Date?
        /// The fixes of the motion check's current run of refused fixes, in order (`MotionConsistency.Track.run`
        /// of them): when the run starts the track over, it was the truth, and its fixes decide in turn
        /// (`replayRun`). Empty for a run whose fixes are not all here (it began before a hand-over).
        var refused: [WeightedFix] = []
        /// Where a pass to the next fix may start from across the last one (`PassAnchor`): at most one, kept
        /// only while the last fix was in the band of a region it left outside (an array: empty, it costs the
        /// track one word).
        var across: [PassAnchor] = []

        init(lastFixTime: Date?, baselineSeq: Int64) {
            self.lastFixTime = lastFixTime
            self.baselineSeq = baselineSeq
        }
    }

    /// The accepted fix before the last one, when the last came right after refused fixes, was in the band of some
    /// region it left outside, changed no pair and brought out no event (`process`): a pass from here to the next
    /// fix, across the last (`inferPasses(across:)`), sees a subject whose only fix inside was inconclusive (a burst
    /// of lies took the others).
    /// Kept in a partition's checkpoint (state flag 128), so that a take-over finds the same passes.
    package struct PassAnchor: Sendable, Equatable {
        package var fix: EventFix
        package var time: Date

        package init(fix: EventFix, time: Date) {
            self.fix = fix
            self.time = time
        }
    }

    /// One pair, one fix: classify with the hysteresis band, transition, dwell.
    mutating func step(
        _ pair: inout Pair, slot: Int32, record: RegionTable.Record, bounds: (lower: Double, upper: Double),
        fix: WeightedFix, margin: Double, acrossGap: Bool, fused: FusedTrack? = nil, now: Date,
        into out: inout MonitorOutput
    ) {
        var r = record.radius
        var bounds = bounds
        if let polygon = regions.polygon(record, slot: slot) {
            // The same rule with the signed distance to the boundary for `d` and 0 for `r`; it needs the
            // distance only out to the band's edge (and the vicinity's, for a pair not yet determined).
            let reach = margin + (pair.record.state == .unknown ? configuration.vicinity : 0)
            let d = polygon.signedDistance(to: fix.point, limit: reach * 1.001 + 0.01)
            bounds = (d, d)
            r = 0
        }
        var observed = configuration.band.classify(bounds: bounds, radius: r, margin: margin) {
            r == 0 ? bounds.lower : Geodesic.distance(fix.coordinate, regions.center(slot: slot))
        }
        // A fix in the band says nothing; the subject's track may (`fusedDecisions`).
        if observed == nil, let fused {
            observed = fusedState(
                fused, current: pair.record.state, slot: slot, record: record, fixBounds: bounds, radius: r)
        }
        if observed == nil && pair.record.state == .outside { inBandOutside = true }

        // Far beyond the boundary, an unknown pair is simply outside: nothing to report.
        if pair.record.state == .unknown, observed == .outside,
            HysteresisBand.isBeyondVicinity(
                distanceLowerBound: bounds.lower, radius: r, margin: margin, vicinity: configuration.vicinity)
        {
            pair.record = PairRecord(state: .outside, since: fix.time)
            return
        }

        guard let observed, observed != pair.record.state else {
            if pair.record.state == .inside && observed != .outside {
                checkDwell(&pair, slot: slot, record: record, fix: fix, bounds: bounds, now: now, into: &out)
            }
            return
        }

        let previous = pair.record.state
        pair.record = PairRecord(state: observed, since: fix.time, dwellFired: false)
        let type: RegionEventType
        if previous == .unknown {
            type = .determined
        } else {
            type = observed == .inside ? .enter : .exit
            let kind: NotifyKind = observed == .inside ? .enter : .exit
            guard record.flags.contains(.notify(kind)) else {
                if observed == .inside {
                    checkDwell(&pair, slot: slot, record: record, fix: fix, bounds: bounds, now: now, into: &out)
                }
                return
            }
        }
        out.events.append(
            makeEvent(
                type, slot: slot, record: record, fix: fix, bounds: bounds, state: observed, previous: previous,
                inferred: type == .determined ? false : acrossGap, now: now))
        if observed == .inside {
            checkDwell(&pair, slot: slot, record: record, fix: fix, bounds: bounds, now: now, into: &out)
        }
    }

    mutating func checkDwell(
        _ pair: inout Pair, slot: Int32, record: RegionTable.Record, fix: WeightedFix,
        bounds: (lower: Double, upper: Double), now: Date, into out: inout MonitorOutput
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
                .dwell, slot: slot, record: record, fix: fix, bounds: bounds, state: .inside, previous: nil,
                inferred: false, now: now))
    }

    /// An event of a pair. For a polygon, its `distance` is the signed distance to the boundary (negative
    /// inside) and its `radius` 0. For a circle, its `distance` is the middle of the chord's bounds on the
    /// geodesic when they are within a millimetre of each other (any fix within 30 km of the centre: events
    /// carry it to 0.1 m), so that an event does not cost a geodesic; farther, Vincenty's geodesic to 0.1 mm
    /// from the two points' earth-centred axes (about a third of Karney's exact one, and no read of the
    /// region's cold record for its centre in degrees).
    mutating func makeEvent(
        _ type: RegionEventType, slot: Int32, record: RegionTable.Record, fix: WeightedFix,
        bounds: (lower: Double, upper: Double), state: RegionState, previous: RegionState?, inferred: Bool, now: Date
    ) -> RegionEvent {
        let distance: Double
        if let polygon = regions.polygon(record, slot: slot) {
            distance = polygon.signedDistance(to: fix.coordinate)
        } else {
            distance =
                bounds.upper - bounds.lower < 1e-3
                ? (bounds.lower + bounds.upper) / 2 : Geodesic.distance(fix.point, record.center)
        }
        return RegionEvent(
            id: ids.next(now: now), type: type, region: regions.id(slot: slot), subject: fix.subject, time: fix.time,
            state: state, previous: previous, inferred: inferred, distance: distance,
            radius: regions.eventRadius(record),
            fix: EventFix(fix))
    }
}
