/// Finds, among up to millions of circular regions, the few whose centre may be near a point, without
/// looking at the others: the candidate finder of `RegionMonitor` (the design and its measurements are
/// in Docs/spatial-index.md).
///
/// Regions are grouped by radius class into levels. On each level, space is cut into large cubes
/// ("blocks", 64 km or more) in earth-centred, earth-fixed (ECEF) coordinates, found through a small hash
/// table that stays in the processor's cache. A block stores its regions' centres as 16-bit coordinates
/// on its own grid, sorted by a coarser 2D grid over the block face most parallel to the earth's surface
/// (the surface is a sheet: a 3D grid would be mostly empty), with a dense directory of where each grid
/// cell starts. A query for a point `P` and an extra distance `E` takes, on each non-empty level, the box
/// around `P` of half-side (largest radius of the level + `E`), finds the one or few blocks it meets, and
/// reads one contiguous run of entries per grid row it covers.
///
/// Why this cannot miss a region, anywhere on earth: the chord (the straight line through the earth)
/// never exceeds the geodesic, so a centre within `r + E` metres (geodesic) of `P` lies in the ball of
/// radius `r + E` around `P`, hence in the box; dropping one coordinate (projecting onto a block face)
/// keeps it in the box's projection; and every step from coordinates to blocks, grid cells and runs is a
/// monotone function. Nothing depends on latitude or longitude: there is no antimeridian, no pole, and
/// no cell that shrinks towards one.
///
/// Why it is fast: memory latency, not arithmetic, is what a query costs at a million regions (a cache
/// miss that waits for the one before it takes about 300 ns on the machine of Docs/benchmarks.md; misses
/// issued together overlap). A query reads the block table (cached), then the directory places of all its
/// rows, then all its runs, each batch issued together; an entry is 12 bytes, so the ~80 entries a query
/// typically tests fill ~15 cache lines; and the test itself is integer arithmetic with one branch.
///
/// Memory: 12 bytes an entry (16-bit centre on the block's grid, 16-bit radius, slot), about 1 byte of
/// directory, and a little room to grow: about 14 bytes a region. Quantizing a centre to its block's
/// 16-bit grid moves it by at most one grid step per axis, which queries absorb with a slack of 1.75
/// steps (√3 would do).
///
/// The contract is `LinearRegionIndex`'s: `candidates(near:extra:into:)` returns every slot whose
/// centre may lie within `radius + extra` metres (geodesic) of the point; it may return a few more,
/// never fewer.
package struct SpatialRegionIndex: Sendable {
    /// How regions are spread over levels and how big the blocks are.
    package struct Layout: Sendable, Equatable {
        /// Largest radius of the first level (metres); each further level holds radii `ratio` times
        /// larger, and the last one every radius beyond.
        package var smallestLevelRadius: Double
        /// Growth of the radius class from one level to the next.
        package var ratio: Double
        /// The `extra` distance queries usually ask for (the monitor's vicinity plus a typical margin):
        /// blocks are at least 16 times (level radius + expectedExtra) wide, so most queries meet one
        /// block. Any other `extra` still gives correct results.
        package var expectedExtra: Double
        /// Entries per grid cell a block aims for when it sorts itself.
        package var entriesPerCell: Double

        package init(
            smallestLevelRadius: Double = 2000, ratio: Double = 4, expectedExtra: Double = 1050,
            entriesPerCell: Double = 4
        ) {
            self.smallestLevelRadius = smallestLevelRadius
            self.ratio = ratio
            self.expectedExtra = expectedExtra
            self.entriesPerCell = entriesPerCell
        }
    }

    /// One region, in its block's grid: coordinates along the block's axes u, v (the 2D grid's) and w
    /// (the dropped one), in grid steps from the block's corner, and the radius in the level's radius
    /// units, rounded up.
    struct Entry: Sendable {
        var u: UInt16
        var v: UInt16
        var w: UInt16
        var radius: UInt16
        /// The slot, with the caller's mark in bit 30; -1 once removed (the entry stays in its block's
        /// sorted part until the block sorts again).
        var slot: Int32

        /// Bit 30 of `slot`.
        static let markBit: Int32 = 1 << 30
        var realSlot: Int32 { slot & ~Self.markBit }
        var marked: Bool { slot & Self.markBit != 0 }

        static let unused = Entry(u: 0, v: 0, w: 0, radius: 0, slot: -1)
    }

    /// One block: a range of the entry pool holding its entries sorted by grid cell, then a short
    /// unsorted tail of recent insertions, then free room.
    struct Block: Sendable {
        var key: UInt64
        /// The ECEF axes of the 2D grid (u, v) and the one dropped (w).
        var axes: (u: Int8, v: Int8, w: Int8)
        /// The block's corner along u, v and w, metres.
        var origin: (u: Double, v: Double, w: Double)
        /// Grid cells per side.
        var side: Int
        var start: Int
        var capacity: Int
        var count: Int
        var sorted: Int
        /// Removed entries left in the sorted part.
        var removed: Int
        /// Where each grid cell starts, counted from `start`: cell (u, v) at
        /// `directory[directoryStart + v * side + u]`, and the end of row u at `v = side` (`side + 1`
        /// columns of `side` values, in room for `directoryCapacity`). Stored by column although the
        /// entries are sorted by row: a query's rows then find their bounds in two short stretches of
        /// the directory (one cache line each, usually) instead of one stretch per row.
        var directoryStart: Int
        var directoryCapacity: Int

        var live: Int { count - removed }
        var pending: Int { count - sorted }
    }

    struct Level: Sendable {
        /// Largest radius the level accepts (infinity for the last).
        var radiusLimit: Double
        var blockSize: Double
        var inverseBlockSize: Double
        /// One grid step (metres), and steps per metre.
        var step: Double
        var inverseStep: Double
        /// One radius unit (metres).
        var radiusUnit: Double
        /// Covers quantization (√3 grid steps), the micrometre `LinearRegionIndex` adds, and rounding.
        var slack: Double
        /// Largest radius stored (metres, as quantized), lowered only when the level empties.
        var maxRadius: Double = 0
        var count = 0
    }

    /// No centre on the ellipsoid is farther than this from the earth's centre along any axis.
    static let axisBound = 6_378_200.0
    /// A radius this large covers every point of the earth (the longest chord is under 12 757 km).
    static let coverAll = 13_000_000.0
    static let emptyKey = UInt64.max
    /// Block coordinates are packed in 20 bits each.
    static let axisBias = 1 << 19
    /// A block sorts its tail in when it grows past this many (at the next `flush()`), or past the size
    /// of the sorted part at once (during a load).
    static let pendingLimit = 32
    /// Grid cells per block side, at most (a 16 KiB directory).
    static let maximumSide = 64
    /// Rows (runs) and blocks (probes) gathered before their entries are read (see `query`): small enough
    /// for both buffers to stay under the 1 KiB that `withUnsafeTemporaryAllocation` puts on the stack
    /// (above that it calls malloc, which cost a query a fifth of its time), large enough for a usual
    /// query to run as one batch.
    static let batchRuns = 40
    static let batchProbes = 8

    package let layout: Layout
    var levels: [Level]
    /// Non-empty levels, in order, so a query does not visit the others.
    var activeLevels: [Int] = []
    var blocks: [Block] = []
    /// Open addressing with linear probing over `blocks`: (key, index), at most half full.
    var table: [(key: UInt64, block: Int32)] = []
    var tableShift: UInt64 = 64
    var entries: [Entry] = []
    var directory: [UInt32] = []
    /// Pool places owned by no block (left behind when a block moved or re-gridded).
    var entryGarbage = 0
    var directoryGarbage = 0
    /// Blocks whose unsorted tail is longer than `pendingLimit`, to sort at the next `flush()`.
    var dirty: [Int32] = []
    package private(set) var count = 0

    package init(layout: Layout = Layout()) {
        self.layout = layout
        var levels: [Level] = []
        var limit = max(1, layout.smallestLevelRadius)
        // At most 15 levels fit the key's 4 bits; radii beyond `coverAll` all behave alike.
        while levels.count < 14 && limit < Self.coverAll {
            levels.append(Self.level(radiusLimit: limit, layout: layout))
            limit *= max(1.5, layout.ratio)
        }
        levels.append(Self.level(radiusLimit: .infinity, layout: layout))
        self.levels = levels
    }

    private static func level(radiusLimit: Double, layout: Layout) -> Level {
        let reach = min(radiusLimit, coverAll)
        let size = min(2 * axisBound, max(64_000, 16 * (reach + max(0, layout.expectedExtra))))
        let step = size / 65_536
        // Headroom below 65 535 so that rounding up never overflows the unit count.
        let unit = reach / 65_000
        return Level(
            radiusLimit: radiusLimit, blockSize: size, inverseBlockSize: 1 / size, step: step, inverseStep: 1 / step,
            radiusUnit: unit, slack: step * 1.75 + 0.001)
    }

    /// Bytes held by the index (array capacities).
    package var memoryFootprint: Int {
        blocks.capacity * MemoryLayout<Block>.stride + table.capacity * MemoryLayout<(UInt64, Int32)>.stride
            + entries.capacity * MemoryLayout<Entry>.stride + directory.capacity * 4
            + levels.capacity * MemoryLayout<Level>.stride + dirty.capacity * 4
    }

    /// Makes room for `count` regions in all, with the room blocks need to grow while they are loaded.
    package mutating func reserveCapacity(_ count: Int) {
        entries.reserveCapacity(count + count / 2)
    }

    /// True when some block has a long unsorted tail; `flush()` sorts it in.
    package var needsFlush: Bool { !dirty.isEmpty }

    // MARK: Changes

    /// Adds a region. `slot` (below 2³⁰) must not be in the index already. `marked` is a bit the caller
    /// keeps with the region and gets back from `nearby` (the monitor marks the regions a fix must look at
    /// even far outside them), so that it costs no lookup elsewhere.
    package mutating func insert(slot: Int32, center: GeocentricPoint, radius: Double, marked: Bool = false) {
        precondition(
            center.x.isFinite && center.y.isFinite && center.z.isFinite && radius.isFinite && radius >= 0,
            "a region's centre and radius are finite (Region validates them)")
        precondition(slot >= 0 && slot < Entry.markBit, "slots are below 2³⁰")
        let l = levelIndex(radius: radius)
        let key = blockKey(level: l, center)
        let b = findBlock(key) ?? addBlock(key: key, level: l)
        var entry = quantize(center, radius: radius, slot: slot, block: blocks[b], level: levels[l])
        if marked { entry.slot |= Entry.markBit }
        if blocks[b].count == blocks[b].capacity { relocate(b, capacity: blocks[b].count + blocks[b].count / 4 + 8) }
        entries[blocks[b].start + blocks[b].count] = entry
        blocks[b].count += 1
        let pending = blocks[b].pending
        if pending > max(Self.pendingLimit, blocks[b].sorted) {
            // Many insertions at once (a load): sorting each time the block doubles keeps the total work
            // linear, and `flush()` (before the next query) sorts what is left.
            sortBlock(b)
        } else if pending == Self.pendingLimit + 1 {
            dirty.append(Int32(b))
        }
        if levels[l].count == 0 {
            activeLevels.append(l)
            activeLevels.sort()
        }
        levels[l].count += 1
        levels[l].maxRadius = max(levels[l].maxRadius, Double(entry.radius) * levels[l].radiusUnit)
        count += 1
    }

    /// Takes a region out. `center` and `radius` must be those it was inserted with; an unknown slot is
    /// ignored.
    package mutating func remove(slot: Int32, center: GeocentricPoint, radius: Double) {
        guard center.x.isFinite && center.y.isFinite && center.z.isFinite && radius.isFinite && radius >= 0 else {
            return
        }
        let l = levelIndex(radius: radius)
        guard let b = findBlock(blockKey(level: l, center)) else { return }
        let entry = quantize(center, radius: radius, slot: slot, block: blocks[b], level: levels[l])
        guard let i = position(of: entry, inBlock: b) else { return }
        let block = blocks[b]
        if i >= block.start + block.sorted {
            entries[i] = entries[block.start + block.count - 1]
            blocks[b].count -= 1
        } else {
            // Keeps the sort; the hole goes when the block next sorts itself.
            entries[i].slot = -1
            blocks[b].removed += 1
        }
        count -= 1
        levels[l].count -= 1
        if levels[l].count == 0 {
            levels[l].maxRadius = 0
            activeLevels.removeAll { $0 == l }
        }
        if blocks[b].live == 0 {
            removeBlock(b)
        } else if blocks[b].removed > max(Self.pendingLimit, blocks[b].sorted / 8) {
            sortBlock(b)
        }
    }

    /// Sets or clears the mark of a region (see `insert`). `center` and `radius` must be those it was
    /// inserted with; an unknown slot is ignored.
    package mutating func setMark(_ marked: Bool, slot: Int32, center: GeocentricPoint, radius: Double) {
        guard center.x.isFinite && center.y.isFinite && center.z.isFinite && radius.isFinite && radius >= 0 else {
            return
        }
        let l = levelIndex(radius: radius)
        guard let b = findBlock(blockKey(level: l, center)) else { return }
        let entry = quantize(center, radius: radius, slot: slot, block: blocks[b], level: levels[l])
        guard let i = position(of: entry, inBlock: b) else { return }
        entries[i].slot = marked ? slot | Entry.markBit : slot
    }

    /// Sorts in the unsorted tails longer than `pendingLimit` (a few microseconds each): the monitor calls
    /// it before a fix when `needsFlush`, so queries never read a long tail.
    package mutating func flush() {
        let list = dirty
        dirty.removeAll()
        for b in list where Int(b) < blocks.count && blocks[Int(b)].pending > Self.pendingLimit {
            sortBlock(Int(b))
        }
    }

    /// Sorts every block completely and rewrites the pools without unused room: after loading many
    /// regions, or to measure memory.
    package mutating func compact() {
        dirty.removeAll()
        for b in blocks.indices where blocks[b].pending > 0 || blocks[b].removed > 0 { sortBlock(b) }
        repack(headroom: 16)
        repackDirectory()
    }

    // MARK: Queries

    /// Appends every slot whose region's centre may lie within `radius + extra` metres (geodesic) of
    /// `point`: a superset of what `LinearRegionIndex` returns for the same arguments, in no
    /// particular order.
    package func candidates(near point: GeocentricPoint, extra: Double, into result: inout [Int32]) {
        var sink = SlotSink(slots: result)
        result = []
        query(near: point, extra: extra, into: &sink)
        result = sink.slots
    }

    /// `candidates(near:extra:into:)` among regions of radius `minimumRadius` or more (a few may be smaller):
    /// the levels of smaller regions are not read. What a pass between two fixes asks for (a cap over the
    /// segment, and only regions deep enough to hold every path), so that most regions cost it nothing.
    package func candidates(
        near point: GeocentricPoint, extra: Double, minimumRadius: Double, into result: inout [Int32]
    ) {
        var sink = SlotSink(slots: result)
        result = []
        query(near: point, extra: extra, minimumRadius: minimumRadius, into: &sink)
        result = sink.slots
    }

    /// The same regions as `candidates(near:extra:into:)`, each with bounds on its centre's chord
    /// distance from `point` and on its radius, so that a caller can settle most of them without
    /// looking anything else up.
    package func nearby(_ point: GeocentricPoint, extra: Double, into result: inout [NearbyRegion]) {
        var sink = NearbySink(regions: result)
        result = []
        query(near: point, extra: extra, into: &sink)
        result = sink.regions
    }

    private func query<Sink: QuerySink>(
        near point: GeocentricPoint, extra: Double, minimumRadius: Double = 0, into result: inout Sink
    ) {
        guard count > 0, point.x.isFinite, point.y.isFinite, point.z.isFinite, !extra.isNaN else { return }
        let p = Vector(point.x, point.y, point.z)
        // The query in three passes over a batch of grid rows (from all levels and blocks): the rows'
        // directory places and runs lie far apart in memory, each a likely cache miss, and issuing each
        // pass's loads together lets the processor wait for them together instead of one after another.
        withUnsafeTemporaryAllocation(of: Run.self, capacity: Self.batchRuns) { runs in
            withUnsafeTemporaryAllocation(of: Probe.self, capacity: Self.batchProbes) { probes in
                var batch = Batch(runs: runs, probes: probes)
                for l in activeLevels {
                    let level = levels[l]
                    // No region of the level is as large as asked (its largest, with the rounding's slack).
                    if level.maxRadius + level.slack + 0.01 < minimumRadius { continue }
                    let pad = extra + level.slack
                    // The box holds every centre a query can match (see `quantize` for the slack).
                    let rho = level.maxRadius + pad + level.slack + 0.01
                    guard rho > 0 else { continue }
                    let low = Vector(
                        max(-Self.axisBound, p.x - rho), max(-Self.axisBound, p.y - rho),
                        max(-Self.axisBound, p.z - rho))
                    let high = Vector(
                        min(Self.axisBound, p.x + rho), min(Self.axisBound, p.y + rho),
                        min(Self.axisBound, p.z + rho))
                    let inverse = level.inverseBlockSize
                    let x0 = Self.floorIndex(low.x * inverse)
                    let x1 = Self.floorIndex(high.x * inverse)
                    let y0 = Self.floorIndex(low.y * inverse)
                    let y1 = Self.floorIndex(high.y * inverse)
                    let z0 = Self.floorIndex(low.z * inverse)
                    let z1 = Self.floorIndex(high.z * inverse)
                    if (x1 &- x0 &+ 1) &* (y1 &- y0 &+ 1) &* (z1 &- z0 &+ 1) > blocks.count {
                        // A box wider than all the level's blocks together (a huge `extra`): read them all.
                        var b = 0
                        while b < blocks.count {
                            if Int(blocks[b].key >> 60) == l {
                                plan(block: b, level: level, p: p, rho: rho, pad: pad, into: &batch, result: &result)
                            }
                            b &+= 1
                        }
                        continue
                    }
                    var bx = x0
                    while bx <= x1 {
                        var by = y0
                        while by <= y1 {
                            var bz = z0
                            while bz <= z1 {
                                if let b = findBlock(Self.pack(level: l, bx, by, bz)) {
                                    plan(
                                        block: b, level: level, p: p, rho: rho, pad: pad, into: &batch, result: &result)
                                }
                                bz &+= 1
                            }
                            by &+= 1
                        }
                        bx &+= 1
                    }
                }
                finish(&batch, into: &result)
            }
        }
    }

    /// How one block is to be tested: the query point on the block's grid, the reach scale, and where
    /// the block's entries start (its directory counts from there).
    struct Probe {
        /// The query point on the block's grid, in grid steps from its corner.
        var u: Double
        var v: Double
        var w: Double
        /// The same, rounded to whole steps, for the integer test.
        var iu: Int32
        var iv: Int32
        var iw: Int32
        /// Whether the integer test applies (the extra distance is not negative or huge).
        var integer: Bool
        /// Grid steps per radius unit, and the query's extra distance plus slack, in grid steps; and the
        /// same in 16.16 fixed point, rounded up, with one more step for the rounding of the point.
        var radiusScale: Double
        var pad: Double
        var radiusScale16: Int64
        var pad16: Int64
        var start: Int
        /// The level's grid step, slack and radius unit, in metres.
        var step: Double
        var slack: Double
        var radiusUnit: Double

        init(
            u: Double, v: Double, w: Double, radiusScale: Double, pad: Double, start: Int, step: Double,
            slack: Double, radiusUnit: Double
        ) {
            self.u = u
            self.v = v
            self.w = w
            self.radiusScale = radiusScale
            self.pad = pad
            self.start = start
            self.step = step
            self.slack = slack
            self.radiusUnit = radiusUnit
            // A point more than 2³⁰ steps from the block is farther than any block is wide: then (or for a
            // negative or enormous extra distance) the exact `Double` test runs instead.
            let limit = Double(1 << 30)
            integer = pad >= 0 && pad < limit && abs(u) < limit && abs(v) < limit && abs(w) < limit
            // ⌊x + ½⌋: within half a step of x (plus rounding far below a step), like `rounded()`, which is a
            // call into libm on baseline x86-64 (no SSE4.1), three a probe.
            iu = integer ? Int32(truncatingIfNeeded: SpatialRegionIndex.floorIndex(u + 0.5)) : 0
            iv = integer ? Int32(truncatingIfNeeded: SpatialRegionIndex.floorIndex(v + 0.5)) : 0
            iw = integer ? Int32(truncatingIfNeeded: SpatialRegionIndex.floorIndex(w + 0.5)) : 0
            radiusScale16 = Int64((radiusScale * 65_536).rounded(.up))
            pad16 = integer ? Int64(((pad + 1) * 65_536).rounded(.up)) : 0
        }
    }

    /// A run of entries to test, for a probe. Until the first pass of `finish`, a run with a probe
    /// `>= 0` holds directory places; one with a negative probe (`~probe`) already holds entry places.
    struct Run {
        var from: Int
        var to: Int
        var probe: Int
    }

    /// Runs and probes gathered for the passes of `finish`, in stack buffers.
    struct Batch {
        var runs: UnsafeMutableBufferPointer<Run>
        var probes: UnsafeMutableBufferPointer<Probe>
        var runCount = 0
        var probeCount = 0

        init(runs: UnsafeMutableBufferPointer<Run>, probes: UnsafeMutableBufferPointer<Probe>) {
            self.runs = runs
            self.probes = probes
        }

        /// Adds a probe (there is room) and returns its index.
        mutating func add(_ probe: Probe) -> Int {
            probes[probeCount] = probe
            probeCount &+= 1
            return probeCount &- 1
        }
    }

    /// Adds block `b`'s grid rows that meet the box (and its unsorted tail) to the batch, running the
    /// batch whenever it is full.
    private func plan<Sink: QuerySink>(
        block b: Int, level: Level, p: Vector, rho: Double, pad: Double, into batch: inout Batch,
        result: inout Sink
    ) {
        let block = blocks[b]
        let inverseStep = level.inverseStep
        let probe = Probe(
            u: (p[Int(block.axes.u)] - block.origin.u) * inverseStep,
            v: (p[Int(block.axes.v)] - block.origin.v) * inverseStep,
            w: (p[Int(block.axes.w)] - block.origin.w) * inverseStep, radiusScale: level.radiusUnit * inverseStep,
            pad: pad * inverseStep, start: block.start, step: level.step, slack: level.slack,
            radiusUnit: level.radiusUnit)
        if batch.probeCount == batch.probes.count { finish(&batch, into: &result) }
        var current = batch.add(probe)
        let reach = rho * inverseStep + 0.001
        let u0 = Self.gridCell(probe.u - reach, side: block.side)
        let u1 = Self.gridCell(probe.u + reach, side: block.side)
        let v0 = Self.gridCell(probe.v - reach, side: block.side)
        let v1 = Self.gridCell(probe.v + reach, side: block.side)
        // Row u holds the entries whose u lies in [u·65 536 / side, (u + 1)·65 536 / side) (see `gridCell`).
        let rowWidth = 65_536 / Double(block.side)
        var u = u0
        while u <= u1 || (u == u1 &+ 1 && block.pending > 0) {
            if u <= u1 {
                // Only the disc of radius `reach` around the point matters, not the whole square: an entry of
                // row u that the test keeps lies within `reach` of the point in the (u, v) plane (dropping w
                // only shortens a distance), and at least `du` from it along u, so within ±√(reach² − du²) of
                // it along v. At a million regions that leaves out a fifth of the square's entries.
                let rowLow = Double(u) * rowWidth
                let du = max(0, rowLow - probe.u, probe.u - (rowLow + rowWidth))
                let spare = reach * reach - du * du
                if spare < 0 {
                    u &+= 1
                    continue
                }
                // The point's own row (du 0) is the square's.
                let half = spare.squareRoot()
                let rowV0 = du == 0 ? v0 : max(v0, Self.gridCell(probe.v - half, side: block.side))
                let rowV1 = du == 0 ? v1 : min(v1, Self.gridCell(probe.v + half, side: block.side))
                if batch.runCount == batch.runs.count {
                    finish(&batch, into: &result)
                    current = batch.add(probe)
                }
                // One row of the box is a single run, since cells are sorted row by row; its bounds are
                // in columns v0 and v1 + 1 of the directory.
                let column = block.directoryStart &+ u
                batch.runs[batch.runCount] = Run(
                    from: column &+ rowV0 &* block.side, to: column &+ (rowV1 &+ 1) &* block.side, probe: current)
            } else {
                if batch.runCount == batch.runs.count {
                    finish(&batch, into: &result)
                    current = batch.add(probe)
                }
                // The unsorted tail, already as entry places.
                batch.runs[batch.runCount] = Run(
                    from: block.start &+ block.sorted, to: block.start &+ block.count, probe: ~current)
            }
            batch.runCount &+= 1
            u &+= 1
        }
    }

    /// The passes over a batch: directory places to entry places; touch every cache line of every run;
    /// test the entries.
    private func finish<Sink: QuerySink>(_ batch: inout Batch, into result: inout Sink) {
        let runs = batch.runs
        let probes = batch.probes
        let count = batch.runCount
        batch.runCount = 0
        batch.probeCount = 0
        guard count > 0 else { return }
        directory.withUnsafeBufferPointer { directory in
            var r = 0
            while r < count {
                let probe = runs[r].probe
                if probe >= 0 {
                    let start = probes[probe].start
                    runs[r].from = start &+ Int(directory[runs[r].from])
                    runs[r].to = start &+ Int(directory[runs[r].to])
                } else {
                    runs[r].probe = ~probe
                }
                r &+= 1
            }
        }
        entries.withUnsafeBufferPointer { entries in
            var touched: UInt16 = 0
            var r = 0
            while r < count {
                // An entry is 12 bytes, a cache line 64.
                var i = runs[r].from
                while i < runs[r].to {
                    touched &+= entries[i].u
                    i &+= 5
                }
                r &+= 1
            }
            r = 0
            while r < count {
                let probe = probes[runs[r].probe]
                var i = runs[r].from
                let end = runs[r].to
                if probe.integer {
                    // In whole grid steps: the point rounded (at most √3/2 step off), the reach rounded up
                    // with a step to spare, so it keeps everything the exact test below would. Integer
                    // arithmetic and one branch per entry: most of a query's time, once its data is cached.
                    let pu = Int64(probe.iu)
                    let pv = Int64(probe.iv)
                    let pw = Int64(probe.iw)
                    while i < end {
                        let e = entries[i]
                        let du = Int64(e.u) &- pu
                        let dv = Int64(e.v) &- pv
                        let dw = Int64(e.w) &- pw
                        let reach = ((Int64(e.radius) &* probe.radiusScale16 &+ probe.pad16) >> 16) &+ 1
                        // A removed entry (left in its block's sorted part) has slot -1.
                        if du &* du &+ dv &* dv &+ dw &* dw < reach &* reach && e.slot >= 0 {
                            result.add(e, probe: probe)
                        }
                        i &+= 1
                    }
                } else {
                    while i < end {
                        let e = entries[i]
                        let du = Double(e.u) - probe.u
                        let dv = Double(e.v) - probe.v
                        let dw = Double(e.w) - probe.w
                        let reach = Double(e.radius) * probe.radiusScale + probe.pad
                        if reach > 0 && du * du + dv * dv + dw * dw < reach * reach && e.slot >= 0 {
                            result.add(e, probe: probe)
                        }
                        i &+= 1
                    }
                }
                r &+= 1
            }
            // Uses the touching loads, so they are not optimized away (`touch` does nothing).
            if touched == 0x5A5A { result.touch() }
        }
    }

    // MARK: Blocks

    func levelIndex(radius: Double) -> Int {
        var l = 0
        while radius > levels[l].radiusLimit { l += 1 }
        return l
    }

    /// ⌊value⌋, for |value| < 2⁶³: `Int(value)` truncates towards zero, one less for a negative non-integer.
    /// Inline, where `rounded(.down)` is a call into libm on baseline x86-64 (no SSE4.1).
    @inline(__always)
    static func floorIndex(_ value: Double) -> Int {
        let t = Int(value)
        return Double(t) > value ? t &- 1 : t
    }

    /// The grid cell (0..<side) of a position in grid steps, clamped into the block: the same monotone
    /// function for entries (whose steps are 0...65 535) and query bounds.
    @inline(__always)
    private static func gridCell(_ steps: Double, side: Int) -> Int {
        let q = steps <= 0 ? 0 : (steps >= 65_535 ? 65_535 : Int(steps))
        return (q &* side) >> 16
    }

    /// An entry's grid cell, row-major: the same cells `gridCell` gives a query.
    private static func cell(of e: Entry, side: Int) -> Int {
        ((Int(e.u) &* side) >> 16) &* side &+ ((Int(e.v) &* side) >> 16)
    }

    private func blockKey(level l: Int, _ c: GeocentricPoint) -> UInt64 {
        let inverse = levels[l].inverseBlockSize
        return Self.pack(
            level: l, Self.floorIndex(c.x * inverse), Self.floorIndex(c.y * inverse), Self.floorIndex(c.z * inverse))
    }

    /// The block key: level, then the three block coordinates biased to be non-negative.
    ///
    /// Written with wrapping arithmetic on purpose: the same expression with `+` and `UInt64(_:)` was
    /// miscompiled by Swift 6.3.1 at `-O` inside nested `for … in` loops over ranges (every other key lost
    /// its high bits; Docs/spatial-index.md). Block coordinates are far inside ±2¹⁹, so nothing wraps.
    @inline(__always)
    static func pack(level: Int, _ ix: Int, _ iy: Int, _ iz: Int) -> UInt64 {
        let l = UInt64(truncatingIfNeeded: level) << 60
        let x = UInt64(truncatingIfNeeded: ix &+ axisBias) << 40
        let y = UInt64(truncatingIfNeeded: iy &+ axisBias) << 20
        let z = UInt64(truncatingIfNeeded: iz &+ axisBias)
        return l | x | y | z
    }

    private static func unpack(_ key: UInt64) -> (level: Int, x: Int, y: Int, z: Int) {
        let mask: UInt64 = (1 << 20) - 1
        return (
            Int(key >> 60), Int((key >> 40) & mask) - axisBias, Int((key >> 20) & mask) - axisBias,
            Int(key & mask) - axisBias
        )
    }

    /// A centre on its block's grid, and a radius in the level's units, rounded up.
    ///
    /// A centre inside its block is 0 to 65 536 steps from the corner along each axis (give or take
    /// rounding); rounding to the nearest step and clamping to 65 535 moves it by at most one step per
    /// axis, √3 steps in all, which the level's slack (1.75 steps) covers.
    private func quantize(_ c: GeocentricPoint, radius: Double, slot: Int32, block: Block, level: Level) -> Entry {
        let p = Vector(c.x, c.y, c.z)
        func steps(_ value: Double) -> UInt16 {
            let t = (value * level.inverseStep).rounded()
            return t <= 0 ? 0 : (t >= 65_535 ? 65_535 : UInt16(t))
        }
        var units = (min(radius, Self.coverAll) / level.radiusUnit).rounded(.up)
        if units * level.radiusUnit < min(radius, Self.coverAll) { units += 1 }
        return Entry(
            u: steps(p[Int(block.axes.u)] - block.origin.u), v: steps(p[Int(block.axes.v)] - block.origin.v),
            w: steps(p[Int(block.axes.w)] - block.origin.w), radius: UInt16(min(65_535, units)), slot: slot)
    }

    @inline(__always)
    private func findBlock(_ key: UInt64) -> Int? {
        guard !table.isEmpty else { return nil }
        return table.withUnsafeBufferPointer { t in
            let mask = t.count - 1
            // The top bits of a Fibonacci product depend on every bit of the key.
            var i = Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> tableShift)
            while true {
                let k = t[i].key
                if k == key { return Int(t[i].block) }
                if k == Self.emptyKey { return nil }
                i = (i &+ 1) & mask
            }
        }
    }

    private mutating func addBlock(key: UInt64, level l: Int) -> Int {
        let (_, bx, by, bz) = Self.unpack(key)
        let size = levels[l].blockSize
        let corner = Vector(Double(bx) * size, Double(by) * size, Double(bz) * size)
        // The block's centre points roughly along the local vertical; its largest component is the axis
        // to drop, so the grid lies on the face closest to the surface's tangent plane.
        let cx = abs(corner.x + size / 2)
        let cy = abs(corner.y + size / 2)
        let cz = abs(corner.z + size / 2)
        let w: Int8 = cx >= cy && cx >= cz ? 0 : (cy >= cz ? 1 : 2)
        let u: Int8 = w == 0 ? 1 : 0
        let v: Int8 = w == 2 ? 1 : 2
        let capacity = 8
        let start = entries.count
        entries.append(contentsOf: repeatElement(Entry.unused, count: capacity))
        let directoryStart = directory.count
        directory.append(contentsOf: [0, 0])
        blocks.append(
            Block(
                key: key, axes: (u, v, w), origin: (corner[Int(u)], corner[Int(v)], corner[Int(w)]), side: 1,
                start: start, capacity: capacity, count: 0, sorted: 0, removed: 0, directoryStart: directoryStart,
                directoryCapacity: 2))
        if blocks.count * 2 <= table.count {
            insertIntoTable(blocks.count - 1)
        } else {
            rebuildTable()
        }
        return blocks.count - 1
    }

    private mutating func removeBlock(_ b: Int) {
        entryGarbage += blocks[b].capacity
        directoryGarbage += blocks[b].directoryCapacity
        blocks.swapAt(b, blocks.count - 1)
        blocks.removeLast()
        dirty = blocks.indices.filter { blocks[$0].pending > Self.pendingLimit }.map { Int32($0) }
        rebuildTable()
    }

    private mutating func rebuildTable() {
        var size = 16
        while size < blocks.count * 2 { size *= 2 }
        table = Array(repeating: (Self.emptyKey, -1), count: size)
        tableShift = UInt64(64 - size.trailingZeroBitCount)
        for b in blocks.indices { insertIntoTable(b) }
    }

    private mutating func insertIntoTable(_ b: Int) {
        let key = blocks[b].key
        let mask = table.count - 1
        var i = Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> tableShift)
        while table[i].key != Self.emptyKey { i = (i + 1) & mask }
        table[i] = (key, Int32(b))
    }

    /// The pool place of `entry` (as `quantize` made it) in block `b`.
    private func position(of entry: Entry, inBlock b: Int) -> Int? {
        let block = blocks[b]
        let cell = Self.cell(of: entry, side: block.side)
        let u = cell / block.side
        let v = cell % block.side
        var i = block.start + Int(directory[block.directoryStart + v * block.side + u])
        var end = block.start + Int(directory[block.directoryStart + (v + 1) * block.side + u])
        while i < end {
            if entries[i].slot >= 0 && entries[i].realSlot == entry.slot { return i }
            i += 1
        }
        i = block.start + block.sorted
        end = block.start + block.count
        while i < end {
            if entries[i].slot >= 0 && entries[i].realSlot == entry.slot { return i }
            i += 1
        }
        return nil
    }

    /// Sorts all of block `b`'s live entries by grid cell (a counting sort), choosing the grid so that a
    /// cell holds about `layout.entriesPerCell` entries.
    private mutating func sortBlock(_ b: Int) {
        let block = blocks[b]
        let live = block.live
        let side = max(1, min(Self.maximumSide, Int((Double(live) / max(0.1, layout.entriesPerCell)).squareRoot())))
        var counts = [Int](repeating: 0, count: side * side + 1)
        var cells: [Int] = []
        cells.reserveCapacity(block.count)
        for i in block.start..<block.start + block.count {
            guard entries[i].slot >= 0 else {
                cells.append(-1)
                continue
            }
            let c = Self.cell(of: entries[i], side: side)
            cells.append(c)
            counts[c + 1] += 1
        }
        for c in 0..<side * side { counts[c + 1] += counts[c] }
        var sortedEntries = [Entry](repeating: Entry.unused, count: live)
        var next = counts
        for (k, i) in (block.start..<block.start + block.count).enumerated() where cells[k] >= 0 {
            let c = cells[k]
            sortedEntries[next[c]] = entries[i]
            next[c] += 1
        }
        for k in 0..<live { entries[block.start + k] = sortedEntries[k] }
        // By column (see `Block.directory`): cell (u, v) starts at counts[u * side + v], and row u ends where
        // row u + 1 starts.
        let size = (side + 1) * side
        if size > block.directoryCapacity {
            // Room for a grid a few cells wider, so a growing block does not move its directory each time.
            let capacity = (side + 4) * (side + 3)
            directoryGarbage += block.directoryCapacity
            blocks[b].directoryStart = directory.count
            blocks[b].directoryCapacity = capacity
            directory.append(contentsOf: repeatElement(0, count: capacity))
        }
        let base = blocks[b].directoryStart
        for u in 0..<side {
            for v in 0...side { directory[base + v * side + u] = UInt32(counts[u * side + v]) }
        }
        blocks[b].side = side
        blocks[b].count = live
        blocks[b].sorted = live
        blocks[b].removed = 0
        if directoryGarbage > 4096 && directoryGarbage > directory.count / 2 { repackDirectory() }
    }

    /// Moves block `b` to the end of the pool with room for `capacity` entries.
    private mutating func relocate(_ b: Int, capacity: Int) {
        let block = blocks[b]
        let start = entries.count
        // Grown first and copied within: appending a slice of the array itself would copy all of it.
        entries.append(contentsOf: repeatElement(Entry.unused, count: capacity))
        for k in 0..<block.count { entries[start + k] = entries[block.start + k] }
        entryGarbage += block.capacity
        blocks[b].start = start
        blocks[b].capacity = capacity
        if entryGarbage > 4096 && entryGarbage > entries.count / 2 { repack(headroom: 8) }
    }

    /// Rewrites the entry pool block after block, without garbage, leaving each block room for `headroom`
    /// entries or a sixteenth of its own, whichever is more.
    private mutating func repack(headroom: Int) {
        var newEntries: [Entry] = []
        var total = 0
        for block in blocks { total += block.count + max(headroom, block.count / 16) }
        newEntries.reserveCapacity(total)
        for b in blocks.indices {
            let block = blocks[b]
            let capacity = block.count + max(headroom, block.count / 16)
            blocks[b].start = newEntries.count
            blocks[b].capacity = capacity
            newEntries.append(contentsOf: entries[block.start..<block.start + block.count])
            newEntries.append(contentsOf: repeatElement(Entry.unused, count: capacity - block.count))
        }
        entries = newEntries
        entryGarbage = 0
    }

    /// Rewrites the directory pool without garbage, each block's directory exactly its size.
    private mutating func repackDirectory() {
        var newDirectory: [UInt32] = []
        newDirectory.reserveCapacity(directory.count - directoryGarbage)
        for b in blocks.indices {
            let block = blocks[b]
            let size = (block.side + 1) * block.side
            blocks[b].directoryStart = newDirectory.count
            blocks[b].directoryCapacity = size
            newDirectory.append(contentsOf: directory[block.directoryStart..<block.directoryStart + size])
        }
        directory = newDirectory
        directoryGarbage = 0
    }
}

/// A region near a query point, with what the index knows of it.
package struct NearbyRegion: Sendable, Equatable {
    package var slot: Int32
    /// The caller's mark (see `SpatialRegionIndex.insert`).
    package var marked: Bool
    /// Bounds on the chord (straight-line) distance from the query point to the region's centre, metres.
    package var chordLowerBound: Double
    package var chordUpperBound: Double
    /// Bounds on the region's radius, metres (the upper one is infinite for a radius too large to
    /// store exactly: beyond 13 000 km, or beyond its level's class).
    package var radiusLowerBound: Double
    package var radiusUpperBound: Double
}

/// Where a query puts what it finds.
protocol QuerySink {
    mutating func add(_ entry: SpatialRegionIndex.Entry, probe: SpatialRegionIndex.Probe)
    /// Does nothing, observably; called with an unlikely value so that loads it depends on are kept.
    mutating func touch()
}

/// Collects slots.
struct SlotSink: QuerySink {
    var slots: [Int32]

    @inline(__always)
    mutating func add(_ entry: SpatialRegionIndex.Entry, probe: SpatialRegionIndex.Probe) {
        slots.append(entry.realSlot)
    }

    mutating func touch() { slots.reserveCapacity(slots.count) }
}

/// Collects slots with distance and radius bounds.
struct NearbySink: QuerySink {
    var regions: [NearbyRegion]

    @inline(__always)
    mutating func add(_ entry: SpatialRegionIndex.Entry, probe: SpatialRegionIndex.Probe) {
        // From the exact query point; the stored centre is within `slack` of the true one (see `quantize`).
        let du = Double(entry.u) - probe.u
        let dv = Double(entry.v) - probe.v
        let dw = Double(entry.w) - probe.w
        let distance = (du * du + dv * dv + dw * dw).squareRoot() * probe.step
        let units = Double(entry.radius)
        regions.append(
            NearbyRegion(
                slot: entry.realSlot, marked: entry.marked, chordLowerBound: max(0, distance - probe.slack),
                chordUpperBound: distance + probe.slack,
                // `quantize` rounds up, at most one unit more for safety; the largest value means clamped.
                radiusLowerBound: max(0, (units - 2) * probe.radiusUnit),
                radiusUpperBound: entry.radius == .max ? .infinity : units * probe.radiusUnit))
    }

    mutating func touch() { regions.reserveCapacity(regions.count) }
}

/// Three ECEF coordinates, addressable by axis.
struct Vector: Sendable {
    var x: Double
    var y: Double
    var z: Double

    init(_ x: Double, _ y: Double, _ z: Double) {
        self.x = x
        self.y = y
        self.z = z
    }

    /// The coordinate along axis 0 (x), 1 (y) or 2 (z).
    @inline(__always)
    subscript(axis: Int) -> Double {
        axis == 0 ? x : (axis == 1 ? y : z)
    }
}
