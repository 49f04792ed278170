import Foundation

/// Passes between two fixes (Docs/events.md, "Passes between fixes"): a subject known to be outside a region,
/// whose fix is conclusively outside it, and every plausible path between which and the fix before goes through
/// it, passed through it unseen. The rule, in short: any path between the two true positions is no longer than `L` (the faster of the
/// fixes' speeds over the gap, plus what `passAcceleration` could add and take away again), so it lies in the
/// ellipse with foci at the two fixes and axes sum `L + a1 + a2` (the fixes' accuracies). Every such path crosses
/// each line perpendicular to the segment between the fixes, inside the ellipse: if at some point of the segment
/// the ellipse's whole width lies inside the region, deeper than `minMargin`, every path went through it. Where
/// both fixes carry a course, a second bound on that width comes from how sharply the subject can turn
/// (`SidewaysReach`, with `passTurnAcceleration`), and the narrower of the two is used: each holds for every
/// plausible path, so both do.
extension RegionMonitor {
    /// Each fix's speed must be at least this share of the average speed between the two (straight line) for a
    /// pass to be inferred: a subject stopped at either fix may have driven anywhere between.
    static let steadyShare = 0.5
    /// Below this speed (m/s) a reported course is taken to say nothing (a Doppler velocity's direction is then
    /// mostly its noise), and the turning bound is not used.
    static let courseSpeed = 2.0
    /// The turning bound is worked out only across gaps at least this long (seconds). A second apart it would
    /// show passes only through circles of 10-15 m, and would send every fast fix of a dense fleet to the
    /// index for them (the length bound's tests end there for such fixes); across a burst of lies or a sparse
    /// report it is what tells.
    static let turnGap = 2.0
    /// How far a reported velocity may be off when the receiver says nothing of it (gpsd's `epd` and `eps`
    /// are not read): its course by 5°, or what an error of `speedError` across it makes at its speed, whichever
    /// is more, and its speed by `speedError`. A receiver's Doppler velocity is good to a few tenths of a metre a
    /// second; the synthetic fixes' courses are off by up to 3°, their speeds by up to 0.3 m/s. The motion check
    /// takes a reported velocity in with the same errors: one home for them, there.
    static let courseError = MotionConsistency.reportedCourseError
    static let speedError = MotionConsistency.reportedSpeedError

    /// The course error assumed for a fix at `speed` (degrees).
    static func assumedCourseError(speed: Double) -> Double {
        max(courseError, asin(min(1, speedError / max(speed, 1e-9))) * 180 / .pi)
    }

    /// One pass found: a region, and when the straight segment went in and out of it.
    struct InferredPass {
        var slot: Int32
        var record: RegionTable.Record
        var enter: Date
        var exit: Date
    }

    /// Appends the `enter` and `exit` of every region the subject must have passed through between `from` (its
    /// previous accepted fix, at `previousTime`) and `fix`, in order of their estimated times, and adds their slots
    /// to `passed`; regions already in `passed` are left alone.
    ///
    /// `across`: `from` is the fix before the previous one, which was at `across.point` with the band's margin
    /// `across.margin`; only regions in whose band that fix was (it said nothing of them) are looked at. A fix on
    /// the way only ever narrows the paths the subject can have taken, so a pass every path from `from` to `fix`
    /// makes is made by those through it too.
    mutating func inferPasses(
        from: EventFix, fromPoint: GeocentricPoint?, at previousTime: Date, to fix: WeightedFix, point: GeocentricPoint,
        track: Track, now: Date, across: (point: GeocentricPoint, margin: Double)? = nil, passed: inout [Int32],
        into out: inout MonitorOutput
    ) {
        let c = configuration
        let dt = fix.time.timeIntervalSince(previousTime)
        // Speeds bound the path; without them (or with nonsense) nothing is certain.
        guard dt > 0.002, dt.isFinite, let s1 = from.speed, let s2 = fix.fix.speed, s1.isFinite, s2.isFinite,
            s1 >= 0, s2 >= 0
        else { return }
        let start = Coordinate(latitude: from.latitude, longitude: from.longitude)
        let p1 = fromPoint ?? GeocentricPoint(start)
        let chord = p1.chord(to: point)
        let a1 = from.accuracy
        let a2 = fix.accuracy
        let acceleration = max(0, c.passAcceleration)
        // The longest plausible path: never faster than the faster end speed plus `acceleration·t` from the start,
        // nor plus `acceleration·(dt − t)` before the end: at most `vMax·dt + acceleration·dt²/4`.
        let length = max(s1, s2) * dt + acceleration * dt * dt / 4
        let sum = length + a1 + a2
        // The speeds cannot have carried the subject between the fixes (they contradict each other), or the
        // subject was not moving steadily: stopped, or much slower than the distance it covered says, at either
        // fix (stop and go: it may have driven far faster, and farther round, between).
        guard sum.isFinite, sum >= chord, min(s1, s2) * dt >= Self.steadyShare * chord else { return }
        let m1 = c.band.margin(accuracy: a1)
        let m2 = c.band.margin(accuracy: a2)
        // Cheapest test first (every dense fix makes it): a point `depth` inside the region is at least
        // `depth − m1` from the first fix (not conclusively inside: in the band at most `m1` deep) and
        // `depth + m2` from the second (conclusively outside), so `depth ≤ (d + m1 − m2)/2`; and the depth needed
        // is at least `minMargin` plus the ellipse's half-width at the segment's ends, `2b²/S`
        // (`b² = (S² − d²)/4`), its narrowest over the segment.
        let ellipseNarrowest = (sum * sum - chord * chord) / (2 * sum)
        // The turning bound applies with courses at both fixes, at a speed where a course means something,
        // across a gap long enough (`turnGap`). It grows with the gap's square, the ellipse about in proportion:
        // where `A·T²/16` (the bound with the courses along the line and no position error) is already wider
        // than the ellipse (from some 12 s at 28 m/s and 8 m/s²), it is not worked out, which only ever leaves
        // a pass unreported. It is never below the larger accuracy (a path may start or end that far aside), so
        // that is a floor for the test before it is worked out.
        let turning =
            c.passTurnAcceleration > 0 && dt >= Self.turnGap && min(s1, s2) >= Self.courseSpeed
            && from.course?.isFinite == true && fix.fix.course?.isFinite == true
            && c.passTurnAcceleration * dt * dt / 16 < (sum * sum - chord * chord).squareRoot() / 2
        let floor = turning ? min(ellipseNarrowest, max(a1, a2)) : ellipseNarrowest
        guard chord + m1 >= m2 + 2 * (floor * 0.999 + c.minMargin) else { return }
        var dLon = fix.coordinate.longitude - start.longitude
        if dLon > 180 { dLon -= 360 }
        if dLon < -180 { dLon += 360 }
        // The segment's direction on the local plane: good to far better than the 90° asked of the courses
        // below, and, over the few hundred metres where the turning bound matters, to far less than the 5° of
        // course error it assumes.
        func segmentAzimuth() -> Double {
            let meanLatitude = (start.latitude + fix.coordinate.latitude) / 2 * .pi / 180
            return atan2(dLon * cos(meanLatitude), fix.coordinate.latitude - start.latitude) * 180 / .pi
        }
        // How far a path can swerve aside, from the courses at both ends (infinite without them, too slow for
        // a course to mean anything, or with speeds that changed faster than the acceleration allows).
        var swerve = Double.infinity
        if turning, let c1 = from.course, let c2 = fix.fix.course,
            abs(s2 - s1) - 2 * Self.speedError <= c.passTurnAcceleration * dt
        {
            let azimuth = segmentAzimuth()
            let starting = SidewaysReach.lateral(
                speed: s1, course: c1, azimuth: azimuth, speedError: Self.speedError,
                courseError: Self.assumedCourseError(speed: s1))
            let ending = SidewaysReach.lateral(
                speed: s2, course: c2, azimuth: azimuth, speedError: Self.speedError,
                courseError: Self.assumedCourseError(speed: s2))
            swerve = SidewaysReach.reach(
                accuracies: (a1, a2), starting: starting, ending: ending, time: dt,
                acceleration: c.passTurnAcceleration)
        }
        let narrowest = min(ellipseNarrowest, swerve)
        guard chord + m1 >= m2 + 2 * (narrowest * 0.999 + c.minMargin) else { return }
        // Tighter, for fast dense fixes (the first fix may be in the band, so the test above passes for many at
        // 25-30 m/s): such a point is `ℓ` along the segment with `ℓ ≥ depth − m1 ≥ narrowest + minMargin − m1`
        // and `d − ℓ ≥ depth + m2 ≥ narrowest + minMargin + m2`; the half-width (the ellipse's, or the turning
        // bound where that is less) is concave along the segment, so there it is at least its least at those two
        // ends, and the depth at least that plus `minMargin`.
        let halfMinor = (sum * sum - chord * chord).squareRoot() / 2
        func halfWidth(at l: Double) -> Double {
            let u = min(chord, max(0, l)) - chord / 2
            return min(swerve, halfMinor * max(0, 1 - (u * u) / (sum * sum / 4)).squareRoot())
        }
        let least = min(
            halfWidth(at: narrowest + c.minMargin - m1), halfWidth(at: chord - (narrowest + c.minMargin + m2)))
        guard chord + m1 + 0.01 >= m2 + 2 * (least * 0.999 + c.minMargin) else { return }

        // The segment's length: the chord, which for the few kilometres between two fixes is the geodesic to
        // a millimetre (shorter, so the ellipse below comes out wider: more cautious).
        let d = chord
        guard d.isFinite, d > 0, sum > d else { return }
        // A course that points away from the other fix: the subject was not heading along the segment.
        let azimuth = segmentAzimuth()
        func agrees(_ course: Double?) -> Bool {
            guard let course, course.isFinite else { return true }
            let diff = abs((course - azimuth).truncatingRemainder(dividingBy: 360))
            return min(diff, 360 - diff) <= 90
        }
        guard agrees(from.course), agrees(fix.fix.course) else { return }
        let semiMajor = sum / 2
        let semiMinor = (sum * sum - d * d).squareRoot() / 2
        guard semiMinor.isFinite else { return }

        // The regions whose centre is within its radius of some point of the segment: a cap around its middle.
        func at(_ f: Double) -> Coordinate {
            var lon = start.longitude + dLon * f
            if lon > 180 { lon -= 360 }
            if lon < -180 { lon += 360 }
            return Coordinate(latitude: start.latitude + (fix.coordinate.latitude - start.latitude) * f, longitude: lon)
        }
        let middle = GeocentricPoint(at(0.5))
        // A region deep enough has its centre within `radius − narrowest − minMargin` of the segment (a chord
        // `sag` below the surface), so within that plus `d/2` of the middle.
        let reach = max(0, d / 2 + d * d / 6e6 + 1 - narrowest - c.minMargin)
        var slots = passScratch
        passScratch = []
        defer { passScratch = slots }
        slots.removeAll(keepingCapacity: true)
        switch candidateSearch {
        case .spatialIndex:
            // Only regions large enough to be deep enough (see the test on each below): most levels are skipped.
            spatialIndex.candidates(
                near: middle, extra: reach, minimumRadius: narrowest + c.minMargin - d * d / 6e6 - 0.02,
                into: &slots)
        case .linearScan: linearIndex.candidates(near: middle, extra: reach, into: &slots)
        }
        guard !slots.isEmpty else { return }
        slots.sort()

        // Distance from a point to the chord between the fixes, in space.
        let (ex, ey, ez) = (point.x - p1.x, point.y - p1.y, point.z - p1.z)
        let length2 = ex * ex + ey * ey + ez * ez
        func segmentDistance(_ q: GeocentricPoint) -> Double {
            let (qx, qy, qz) = (q.x - p1.x, q.y - p1.y, q.z - p1.z)
            let t = min(1, max(0, (qx * ex + qy * ey + qz * ez) / length2))
            let (dx, dy, dz) = (qx - t * ex, qy - t * ey, qz - t * ez)
            return (dx * dx + dy * dy + dz * dz).squareRoot()
        }
        let sag = d * d / 6e6 + 0.01
        let samples = Int(min(64, max(8, d / 5)))
        var passes: [InferredPass] = []
        for (i, slot) in slots.enumerated() where i == 0 || slots[i - 1] != slot {
            let record = regions.records[Int(slot)]
            guard record.flags.contains(.live), regions.applies(record, slot: slot, to: fix.subject) else { continue }
            guard record.flags.contains(.notify(.enter)) || record.flags.contains(.notify(.exit)) else { continue }
            if record.flags.contains(.hasDetails), let expires = regions.expires(slot: slot), expires <= fix.time {
                continue
            }
            // Known to be outside before this fix (no pair is outside), and not changed by it.
            if let pair = track.pairs[slot], pair.record.state != .outside { continue }
            guard record.seq <= track.baselineSeq else { continue }
            // Deep enough at all? The region lies within its cap (a circle is one), and no point of the segment
            // is deeper in the cap than its radius less the centre's distance from the segment (the chord
            // between the fixes runs below the surface by at most `sag`).
            guard record.radius - (segmentDistance(record.center) - sag) >= narrowest + c.minMargin else { continue }

            let polygon = regions.polygon(record, slot: slot)
            let r = polygon == nil ? record.radius : 0
            let centre = record.center
            let limit = semiMinor + c.minMargin + max(m1, m2, across?.margin ?? 0) + 1
            // Depth inside the region of a point (negative outside); `cautious` takes the smaller bound.
            func depth(_ p: GeocentricPoint, cautious: Bool) -> Double {
                if let polygon { return -polygon.signedDistance(to: p, limit: limit) }
                let bounds = Geodesic.distanceBounds(chord: p.chord(to: centre))
                return r - (cautious ? bounds.upper : (bounds.lower + bounds.upper) / 2)
            }
            // This fix conclusively outside, so that the subject surely came out again; the one before not
            // conclusively inside (the pair is outside: it was, at the last fix that said so), though it may be
            // in the band: a subject whose fix on the boundary was the last before a burst of lies, or before a
            // gap, and which was deep inside between, went in after the pair was last known outside.
            guard depth(p1, cautious: false) < m1, depth(point, cautious: false) <= -m2 else { continue }
            // Across a fix: one in this region's band (neither conclusively inside nor outside), not yet passed.
            if let across {
                let there = depth(across.point, cautious: false)
                guard there < across.margin, there > -across.margin, !passed.contains(slot) else { continue }
            }

            var certain = false
            var first: Int?
            var last: Int?
            for k in 1..<samples {
                let f = Double(k) / Double(samples)
                let x = GeocentricPoint(at(f))
                let inside = depth(x, cautious: true)
                let straight = depth(x, cautious: false)
                if straight > 0 {
                    if first == nil { first = k }
                    last = k
                }
                // The perpendicular line here separates the two true positions, and the ellipse's width on it
                // lies inside the region.
                let u = (f - 0.5) * d
                let width = min(swerve, semiMinor * max(0, 1 - (u * u) / (semiMajor * semiMajor)).squareRoot())
                if f * d > a1, (1 - f) * d > a2, inside >= width + c.minMargin { certain = true }
            }
            guard certain, let first, let last else { continue }
            // Where the straight segment crosses the boundary, by bisection between samples.
            func crossing(outside: Double, inside: Double) -> Double {
                var (o, n) = (outside, inside)
                for _ in 0..<16 {
                    let m = (o + n) / 2
                    if depth(GeocentricPoint(at(m)), cautious: false) > 0 { n = m } else { o = m }
                }
                return (o + n) / 2
            }
            let fIn = crossing(outside: Double(first - 1) / Double(samples), inside: Double(first) / Double(samples))
            let fOut = crossing(outside: Double(last + 1) / Double(samples), inside: Double(last) / Double(samples))
            // Whole milliseconds (what event JSON carries, so an event's identity survives a round trip), after
            // the previous fix and never later than the fix that revealed the pass.
            let t1 = previousTime.timeIntervalSince1970
            let t2 = fix.time.timeIntervalSince1970
            func millis(_ t: Double) -> Double { (t * 1000).rounded() / 1000 }
            let enter = min(max(millis(t1 + fIn * dt), t1 + 0.001), t2 - 0.001)
            let exit = min(max(millis(t1 + fOut * dt), enter + 0.001), t2)
            passes.append(
                InferredPass(
                    slot: slot, record: record, enter: Date(timeIntervalSince1970: enter),
                    exit: Date(timeIntervalSince1970: exit)))
        }
        guard !passes.isEmpty else { return }

        var events: [RegionEvent] = []
        for pass in passes {
            let slot = pass.slot
            let record = pass.record
            // The event carries the fix that revealed the pass (outside the region) and its distance.
            var event = makeEvent(
                .enter, slot: slot, record: record, fix: fix, bounds: (0, .infinity), state: .inside,
                previous: .outside, inferred: true, now: now)
            if record.flags.contains(.notify(.enter)) {
                event.time = pass.enter
                events.append(event)
            }
            if record.flags.contains(.notify(.exit)) {
                event.id = ids.next(now: now)
                event.type = .exit
                event.state = .outside
                event.previous = .inside
                event.time = pass.exit
                events.append(event)
            }
        }
        passed.append(contentsOf: passes.map(\.slot))
        events.sort(by: Self.passOrder)
        out.events.append(contentsOf: events)
    }

    /// The order of inferred passes' events: of time; at the same millisecond, an enter before an exit, then by
    /// region.
    static func passOrder(_ a: RegionEvent, _ b: RegionEvent) -> Bool {
        if a.time != b.time { return a.time < b.time }
        if a.type != b.type { return a.type == .enter }
        return a.region < b.region
    }
}
