import Foundation

extension RegionMonitor {
    /// The distance a subject's neighbourhood is taken with beyond what its fix asks for (metres): a
    /// vehicle at 30 m/s uses one for 8 fixes or more, a parked one until a region changes.
    static let neighbourhoodReach = 250.0
    /// Regions a neighbourhood holds at most (56 bytes each, searched in order), and the fixes a subject
    /// whose neighbourhood would hold more waits before it tries again.
    static let neighbourhoodLimit = 64
    static let crowdedPause: UInt8 = 32

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
    struct Neighbourhood: Sendable {
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
    mutating func findCandidates(
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
                if allKnown && !region.marked
                    && HysteresisBand.settlesOutside(
                        chordLowerBound: region.chordLowerBound, radiusLowerBound: region.radiusLowerBound,
                        radiusUpperBound: region.radiusUpperBound, margin: margin)
                    && (pairs.isEmpty || pairs[region.slot] == nil)
                {
                    continue
                }
                slots.append(region.slot)
                unsettled += 1
            }
            guard unsettled > 0 else { return }
            // The candidates' cold records (an event's id), loaded with their records below rather than after.
            let warm = regions.touchCold(slots[(slots.count - unsettled)...])
            if warm == 0x5A5A_5A5A { slots.reserveCapacity(slots.count) }
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
}
