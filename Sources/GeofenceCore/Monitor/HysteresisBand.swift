/// The hysteresis rule of Docs/events.md, in one place: the margin a fix of some accuracy gets, what a fix
/// says about one region, and the tests the monitor's fast paths use to skip a region without reading it.
///
/// Every path that decides a pair goes through this type: the plain step, the spatial index's settled test,
/// the vicinity shortcut and the neighbourhood reuse (which answers with the same candidates, then the same
/// step). A randomized test runs the fast paths against the plain rule (`RegionMonitor` with
/// `CandidateSearch.linearScan`, which reads every region and skips nothing).
package struct HysteresisBand: Sendable, Equatable {
    /// The band never gets narrower than this on either side of the boundary (metres).
    package var minMargin: Double
    /// The band's half-width is `max(minMargin, accuracyFactor · accuracy)`.
    package var accuracyFactor: Double

    package init(minMargin: Double = 5, accuracyFactor: Double = 1) {
        self.minMargin = minMargin
        self.accuracyFactor = accuracyFactor
    }

    /// The band's half-width for a fix of this horizontal accuracy (metres).
    @inlinable
    package func margin(accuracy: Double) -> Double { max(minMargin, accuracyFactor * accuracy) }

    /// What a fix says about a region of radius `radius`, given guaranteed bounds on its distance to the
    /// centre: `inside` when `d ≤ r − m`, `outside` when `d ≥ r + m`, nil in between. `exact` is called
    /// only when the bounds straddle an edge of the band (a sliver of micrometres to millimetres).
    @inlinable
    package func classify(
        bounds: (lower: Double, upper: Double), radius r: Double, margin m: Double, exact: () -> Double
    ) -> RegionState? {
        if bounds.upper <= r - m { return .inside }
        if bounds.lower >= r + m { return .outside }
        if bounds.lower > r - m && bounds.upper < r + m { return nil }
        let d = exact()
        return d <= r - m ? .inside : (d >= r + m ? .outside : nil)
    }

    /// The fix is conclusively outside: what `classify` says, read from the lower bound alone.
    @inlinable
    package static func isOutside(distanceLowerBound lower: Double, radius r: Double, margin m: Double) -> Bool {
        lower >= r + m
    }

    /// No fix of this margin can ever be conclusively inside a region of this radius: it is reported
    /// `accuracyLimited` while such fixes are all there is.
    @inlinable
    package static func isAccuracyLimited(radius r: Double, margin m: Double) -> Bool { r <= m }

    /// The spatial index's settled test, from what the index knows without reading the region's record:
    /// bounds on the chord to the centre and on the radius. True only when `classify` would say `outside`
    /// and `isAccuracyLimited` would say false, for every radius and chord within the bounds.
    ///
    /// `Geodesic.distanceBounds(chord:)` puts the geodesic at least a micrometre below the chord, so a chord
    /// 10 µm past the band's outer edge is conclusively outside.
    @inlinable
    package static func settlesOutside(
        chordLowerBound: Double, radiusLowerBound: Double, radiusUpperBound: Double, margin m: Double
    ) -> Bool {
        chordLowerBound >= radiusUpperBound + m + 1e-5 && !isAccuracyLimited(radius: radiusLowerBound, margin: m)
    }

    /// A pair never evaluated before whose fix is this far beyond the band becomes `outside` without a
    /// `determined` event (the vicinity shortcut: a million regions must not each report one).
    @inlinable
    package static func isBeyondVicinity(
        distanceLowerBound lower: Double, radius r: Double, margin m: Double, vicinity: Double
    ) -> Bool {
        lower >= r + m + vicinity
    }
}
