import Foundation

/// A polygon region's shape: one or more parts, each an outer ring with optional holes (GeoJSON `Polygon`
/// and `MultiPolygon`), whose edges are geodesics on WGS84. Validated on construction (Docs/regions-format.md).
///
/// What the monitor asks of it is `signedDistance(to:limit:)`: the geodesic distance from a point to the
/// nearest edge, negative inside, so that the hysteresis rule of circles (`d ≤ r − m` inside, `d ≥ r + m`
/// outside) applies with `r = 0`.
///
/// How. Each edge is replaced by the curve the ellipsoid cuts from the plane through its two ends that holds
/// the surface normal over its middle: that curve is within 0.7 mm of the geodesic for an edge of 100 km (the
/// longest accepted; the gap grows as the cube of the length: 0.7 µm at 10 km), so the distance to it is the
/// distance to the edge. The nearest point of that curve is found by Gauss–Newton on its chord (no
/// trigonometry), and the chord turned into the geodesic with `Geodesic.distanceBounds` (exact inverse
/// beyond 20 km). Every edge first gets a cheap lower bound (the chord to its straight segment less its
/// sag), so a point far from an edge never refines it. Which side a point is on comes from the nearest edge's
/// plane when the point is within 10 m of the boundary, and otherwise from a crossing count in the gnomonic
/// projection about the polygon's centre, whose straight lines are the planes through the earth's centre:
/// those are within 0.7 m of the edges, so far from the boundary the count is right.
public struct RegionPolygon: Sendable, Equatable, CustomStringConvertible {
    /// Positions as given: parts, then rings (the first the outer one, then holes), each closed (its last
    /// position equals its first).
    public let parts: [[[Coordinate]]]
    /// The centre of the bounding cap: every point of the polygon is within `capRadius` of it (geodesic).
    public let center: Coordinate
    /// The bounding cap's radius, metres: an upper bound of the distance from `center` to the farthest vertex,
    /// plus 1 m. A polygon region's `radius` is this.
    public let capRadius: Double
    /// The area in square metres (on the authalic sphere: within about 0.1 % of the ellipsoid's).
    public let area: Double
    /// Positions, not counting each ring's closing one.
    public let vertexCount: Int

    /// One edge, in plain doubles (88 bytes; three `SIMD3<Double>` would be padded to 112).
    struct Edge: Sendable {
        private var ax, ay, az: Double
        private var abx, aby, abz: Double
        private var nx, ny, nz: Double
        var inverseLengthSquared: Double
        /// How far the edge's curve may stray from its chord (metres).
        var sag: Double

        init(a: SIMD3<Double>, ab: SIMD3<Double>, n: SIMD3<Double>, inverseLengthSquared: Double, sag: Double) {
            (ax, ay, az) = (a.x, a.y, a.z)
            (abx, aby, abz) = (ab.x, ab.y, ab.z)
            (nx, ny, nz) = (n.x, n.y, n.z)
            self.inverseLengthSquared = inverseLengthSquared
            self.sag = sag
        }

        @inline(__always) var a: SIMD3<Double> { SIMD3(ax, ay, az) }
        @inline(__always) var ab: SIMD3<Double> { SIMD3(abx, aby, abz) }
        /// Unit normal of the edge's plane, pointing to the polygon's inside.
        @inline(__always) var n: SIMD3<Double> { SIMD3(nx, ny, nz) }
    }

    let edges: [Edge]
    /// Gnomonic positions of every ring's vertices (closing one included), rings back to back.
    let plane: [SIMD2<Double>]
    /// Start of each ring in `plane` (and its end: the next start), with a last entry for the end.
    let ringStarts: [Int]
    let axis: SIMD3<Double>
    let east: SIMD3<Double>
    let north: SIMD3<Double>

    /// Within this distance of the boundary, the nearest edge says which side a point is on.
    static let sideByEdge = 10.0

    public var description: String { "polygon of \(vertexCount) vertices" }

    public static func == (lhs: RegionPolygon, rhs: RegionPolygon) -> Bool { lhs.parts == rhs.parts }

    /// Bytes held by the precomputed shape (edges, projection, positions).
    public var memoryFootprint: Int {
        edges.capacity * MemoryLayout<Edge>.stride + plane.capacity * MemoryLayout<SIMD2<Double>>.stride
            + ringStarts.capacity * 8 + parts.reduce(0) { $0 + $1.reduce(0) { $0 + $1.capacity * 16 + 32 } }
    }

    // MARK: Building

    /// Validates and prepares a polygon. Errors name the ring and position (`polygon`, `parts[1].rings[0]`).
    public init(parts: [[[Coordinate]]], limits: RegionLimits = .default) throws(RegionValidationError) {
        func fail(_ field: String, _ message: String) -> RegionValidationError {
            RegionValidationError(field: field, message: message)
        }
        func ringName(_ p: Int, _ r: Int) -> String {
            let ring = r == 0 ? "outer ring" : "hole \(r)"
            return parts.count == 1 ? "polygon \(ring)" : "polygon part \(p) \(ring)"
        }
        guard !parts.isEmpty else { throw fail("polygon", "has no rings") }
        if parts.count > limits.maxPolygonParts {
            throw fail("polygon", "has \(parts.count) parts: at most \(limits.maxPolygonParts) are allowed")
        }
        var count = 0
        for (p, rings) in parts.enumerated() {
            guard !rings.isEmpty else { throw fail("polygon", "part \(p) has no rings") }
            for (r, ring) in rings.enumerated() {
                let name = ringName(p, r)
                if ring.count < 4 {
                    throw fail(
                        "polygon",
                        "\(name) has \(ring.count) position(s): a ring needs at least 4 (3 corners and the first again)"
                    )
                }
                for (i, c) in ring.enumerated() where !c.isValid {
                    throw fail(
                        "polygon",
                        "\(name) position \(i) (\(c.latitude), \(c.longitude)) is out of range: latitude -90 to 90, longitude -180 to 180"
                    )
                }
                guard ring.first == ring.last else {
                    throw fail("polygon", "\(name) is not closed: its last position must repeat its first")
                }
                for i in 1..<ring.count where Self.samePlace(ring[i - 1], ring[i]) {
                    throw fail("polygon", "\(name) repeats position \(i - 1) at \(i): an edge needs two different ends")
                }
                count += ring.count - 1
            }
        }
        if count > limits.maxPolygonVertices {
            throw fail("polygon", "has \(count) vertices: at most \(limits.maxPolygonVertices) are allowed")
        }

        // The bounding cap: about the mean of the vertices' directions.
        var sum = SIMD3<Double>(0, 0, 0)
        for rings in parts { for c in rings[0].dropLast() { sum += Self.unit(Self.ecef(c)) } }
        guard Self.length(sum) > 1e-9 else { throw fail("polygon", "is larger than a hemisphere: not supported") }
        let axis = Self.unit(sum)
        let centre = Self.surface(direction: axis)
        let centrePoint = Self.ecef(centre)
        var reach = 0.0
        for rings in parts {
            for ring in rings {
                for c in ring.dropLast() {
                    reach = max(reach, Self.distanceUpperBound(centrePoint, Self.ecef(c), centre, c))
                }
            }
        }
        if !(reach <= limits.maxPolygonReach) {
            throw fail(
                "polygon",
                "reaches \(Int(reach / 1000)) km from its centre: at most \(Int(limits.maxPolygonReach / 1000)) km is supported (so no polygon larger than a hemisphere)"
            )
        }
        let east: SIMD3<Double> =
            abs(axis.z) < 0.9
            ? Self.unit(Self.cross(SIMD3(0, 0, 1), axis)) : Self.unit(Self.cross(SIMD3(1, 0, 0), axis))
        let north = Self.cross(axis, east)
        func project(_ p: SIMD3<Double>) -> SIMD2<Double> {
            let d = Self.dot(p, axis)
            return SIMD2(Self.dot(p, east) / d, Self.dot(p, north) / d)
        }

        var plane: [SIMD2<Double>] = []
        plane.reserveCapacity(count + parts.reduce(0) { $0 + $1.count })
        var ringStarts: [Int] = []
        var ringOwner: [(part: Int, ring: Int)] = []
        var edges: [Edge] = []
        edges.reserveCapacity(count)
        var area = 0.0
        // A ring of no area is refused after the crossings are looked for: a bow tie's lobes cancel.
        var flat: String?
        for (p, rings) in parts.enumerated() {
            for (r, ring) in rings.enumerated() {
                let name = ringName(p, r)
                let points = ring.map(Self.ecef)
                ringStarts.append(plane.count)
                ringOwner.append((p, r))
                for x in points {
                    // Within the cap, every vertex is in front of the projection's plane.
                    plane.append(project(x))
                }
                // Signed area by the triangles (axis, A, B) on the authalic sphere: positive counterclockwise.
                var excess = 0.0
                for i in 1..<ring.count {
                    let a = Self.authalicUnit(ring[i - 1])
                    let b = Self.authalicUnit(ring[i])
                    let num = Self.dot(axis, Self.cross(a, b))
                    let den = 1 + Self.dot(axis, a) + Self.dot(a, b) + Self.dot(b, axis)
                    excess += 2 * atan2(num, den)
                }
                let ringArea = excess * WGS84.authalicRadius * WGS84.authalicRadius
                if abs(ringArea) < 1e-6 && flat == nil { flat = name }
                area += r == 0 ? abs(ringArea) : -abs(ringArea)
                // The inside of the polygon is left of a counterclockwise outer ring and right of a
                // counterclockwise hole, whichever way the ring was written (RFC 7946 §3.1.6: winding is a
                // recommendation, not a rule to refuse by).
                let towardsInside: Double = (ringArea > 0) == (r == 0) ? 1 : -1
                for i in 1..<points.count {
                    let a = points[i - 1]
                    let b = points[i]
                    let ab = b - a
                    let chord = Self.length(ab)
                    let s = Self.distanceUpperBound(a, b, ring[i - 1], ring[i])
                    if !(s <= limits.maxPolygonEdge) {
                        throw fail(
                            "polygon",
                            "\(name) edge \(i - 1) is \(Int(s / 1000)) km long: at most \(Int(limits.maxPolygonEdge / 1000)) km is supported, add vertices between"
                        )
                    }
                    let mid = Self.normal(at: (a + b) * 0.5)
                    let n = Self.unit(Self.cross(mid, ab)) * towardsInside
                    let sag = chord * chord / (8 * WGS84.minimumRadiusOfCurvature) * 1.01 + 1e-6
                    edges.append(Edge(a: a, ab: ab, n: n, inverseLengthSquared: 1 / (chord * chord), sag: sag))
                }
            }
        }
        ringStarts.append(plane.count)

        // Crossings, in the projection: within a ring (self-intersection), between a hole and its outer ring,
        // between parts.
        if let (i, j) = Self.firstCrossing(plane: plane, ringStarts: ringStarts) {
            let (ri, ei) = Self.locate(i, ringStarts)
            let (rj, ej) = Self.locate(j, ringStarts)
            let a = ringOwner[ri]
            let b = ringOwner[rj]
            if ri == rj {
                throw fail("polygon", "\(ringName(a.part, a.ring)) intersects itself: edge \(ei) crosses edge \(ej)")
            } else if a.part == b.part {
                throw fail(
                    "polygon",
                    "\(ringName(a.part, a.ring)) edge \(ei) crosses \(ringName(b.part, b.ring)) edge \(ej)")
            } else {
                throw fail("polygon", "parts \(a.part) and \(b.part) overlap: their edges \(ei) and \(ej) cross")
            }
        }
        if let flat { throw fail("polygon", "\(flat) encloses no area") }
        // With no crossings, rings are nested or apart: holes must be inside their outer ring and apart from
        // each other, and no part may be inside another (inside one of its holes is apart).
        var ring = 0
        var firstRing: [Int] = []
        for rings in parts {
            firstRing.append(ring)
            ring += rings.count
        }
        for (p, rings) in parts.enumerated() {
            let outer = firstRing[p]
            for r in 1..<max(1, rings.count) {
                let probe = plane[ringStarts[outer + r]]
                if !Self.crosses(probe, plane: plane, from: ringStarts[outer], to: ringStarts[outer + 1]) {
                    throw fail("polygon", "\(ringName(p, r)) is not inside its outer ring")
                }
                for h in 1..<rings.count where h != r {
                    if Self.crosses(probe, plane: plane, from: ringStarts[outer + h], to: ringStarts[outer + h + 1]) {
                        throw fail("polygon", "\(ringName(p, r)) is inside hole \(h)")
                    }
                }
            }
            for q in parts.indices where q != p {
                let probe = plane[ringStarts[outer]]
                let start = firstRing[q]
                var inside = false
                for h in 0..<parts[q].count
                where Self.crosses(probe, plane: plane, from: ringStarts[start + h], to: ringStarts[start + h + 1]) {
                    inside.toggle()
                }
                if inside { throw fail("polygon", "parts \(p) and \(q) overlap: part \(p) is inside part \(q)") }
            }
        }

        self.parts = parts
        self.center = centre
        self.capRadius = reach + 1
        self.area = area
        self.vertexCount = count
        self.edges = edges
        self.plane = plane
        self.ringStarts = ringStarts
        self.axis = axis
        self.east = east
        self.north = north
    }

    /// A polygon with one part and no holes, from its corners (the closing position is added when missing).
    public init(ring: [Coordinate], limits: RegionLimits = .default) throws(RegionValidationError) {
        var ring = ring
        if let first = ring.first, ring.count >= 3, ring.last != first { ring.append(first) }
        try self.init(parts: [[ring]], limits: limits)
    }

    // MARK: The decision

    /// The geodesic distance from `point` to the nearest edge, negative when the point is inside, exact to
    /// a millimetre when its magnitude is under `limit`; at or beyond `limit` the magnitude may be just
    /// `limit` (a lower bound), and the sign is still right.
    public func signedDistance(to point: Coordinate, limit: Double = .infinity) -> Double {
        signedDistance(to: GeocentricPoint(point), limit: limit)
    }

    /// The same, for a point already converted.
    package func signedDistance(to point: GeocentricPoint, limit: Double = .infinity) -> Double {
        let p = SIMD3(point.x, point.y, point.z)
        let wanted = max(limit, Self.sideByEdge)
        // Edges are compared by chord (no geodesic in the loop); the nearest one's chord becomes a geodesic
        // at the end. An edge is refined only when the chord to its straight segment, less its sag (a lower
        // bound), is under both what is wanted and the nearest chord so far; most edges cost a dozen
        // multiplications. With no limit (an event's distance), a first pass finds an upper bound, so that a
        // point far from the polygon does not refine every edge on the way down.
        var cut = wanted
        if wanted > 1000 {
            edges.withUnsafeBufferPointer { edges in
                for e in edges { cut = min(cut, Self.segmentChord(p, e) + e.sag) }
            }
        }
        var bestChord = Double.infinity
        var nearest = (edge: -1, side: 0.0, end: 0, foot: SIMD3<Double>(0, 0, 0))
        edges.withUnsafeBufferPointer { edges in
            for i in edges.indices {
                let e = edges[i]
                guard Self.segmentChord(p, e) - e.sag < min(cut, bestChord) else { continue }
                let (chord, s, end, foot) = Self.refine(p, e)
                if chord < bestChord {
                    bestChord = chord
                    nearest = (i, s, end, foot)
                }
            }
        }
        var best = Double.infinity
        if bestChord < 20_000 {
            let b = Geodesic.distanceBounds(chord: bestChord)
            best = (b.lower + b.upper) / 2
        } else if bestChord.isFinite {
            best = Geodesic.distance(Self.surfaceCoordinate(p), Self.surfaceCoordinate(nearest.foot))
        }
        let inside: Bool
        if best <= Self.sideByEdge {
            var side = nearest.side
            if nearest.end != 0 {
                // Nearest to a vertex: one edge's line can cut through the vertex's own region (at a sharp
                // reflex corner), the sum of both edges' sides cannot (their normals' sum points out of the
                // corner's inside).
                let other = edges[neighbour(ofEdge: nearest.edge, end: nearest.end)]
                side += Self.dot(other.n, p - other.a)
            }
            inside = side > 0
        } else {
            inside = contains(p)
        }
        let magnitude = best < wanted ? best : wanted
        return inside ? -magnitude : magnitude
    }

    /// Whether the point is inside, by crossings in the gnomonic projection: right for points farther than
    /// a metre from the boundary.
    func contains(_ p: SIMD3<Double>) -> Bool {
        let d = Self.dot(p, axis)
        guard d > 0 else { return false }
        let q = SIMD2(Self.dot(p, east) / d, Self.dot(p, north) / d)
        var inside = false
        for r in 0..<(ringStarts.count - 1)
        where Self.crosses(q, plane: plane, from: ringStarts[r], to: ringStarts[r + 1]) {
            inside.toggle()
        }
        return inside
    }

    // MARK: Edges

    /// The chord from `p` to the straight segment of the edge.
    @inline(__always)
    static func segmentChord(_ p: SIMD3<Double>, _ e: Edge) -> Double {
        let d = p - e.a
        let t = min(1, max(0, dot(d, e.ab) * e.inverseLengthSquared))
        let q = d - e.ab * t
        return dot(q, q).squareRoot()
    }

    /// The geodesic distance from `p` to the edge's curve, and which side of its plane `p` is on (positive:
    /// the polygon's inside).
    /// The edge that shares an end with `edge`: the one before it (`end` −1) or after it (+1) in its ring.
    func neighbour(ofEdge edge: Int, end: Int) -> Int {
        // Ring r's edges are its positions less one each: ring r starts at edge ringStarts[r] − r.
        var r = 0
        while ringStarts[r + 1] - (r + 1) <= edge { r += 1 }
        let first = ringStarts[r] - r
        let last = ringStarts[r + 1] - r - 2
        if end > 0 { return edge == last ? first : edge + 1 }
        return edge == first ? last : edge - 1
    }

    /// The chord from `p` to the nearest point of the edge's curve (the geodesic is a function of it, to a
    /// fraction of a millimetre under 20 km), which side of the edge's plane `p` is on (positive: the
    /// polygon's inside), whether that point is the edge's start (−1), end (+1) or between (0), and the point.
    static func refine(_ p: SIMD3<Double>, _ e: Edge) -> (chord: Double, side: Double, end: Int, foot: SIMD3<Double>) {
        let length = 1 / e.inverseLengthSquared.squareRoot()
        let u = e.ab / length
        var w = cross(e.n, u)
        if dot(w, e.a) < 0 { w = -w }
        let alpha = dot(w, w * scale)
        func curve(_ t: Double) -> SIMD3<Double> {
            let q = e.a + u * t
            let dq = q * scale
            let rest = 1 - dot(q, dq)
            let beta = dot(w, dq)
            let h = rest / (beta + (beta * beta + alpha * rest).squareRoot())
            return q + w * h
        }
        var t = min(length, max(0, dot(p - e.a, u)))
        var x = curve(t)
        for _ in 0..<8 {
            let dx = x * scale
            let slope = -dot(dx, u) / dot(dx, w)
            let tangent = u + w * slope
            let next = min(length, max(0, t + dot(p - x, tangent) / dot(tangent, tangent)))
            let moved = abs(next - t)
            t = next
            x = curve(t)
            if moved < 1e-7 { break }
        }
        return (Self.length(p - x), dot(e.n, p - e.a), t <= 0 ? -1 : (t >= length ? 1 : 0), x)
    }

    // MARK: Projection

    /// Whether a ray from `q` towards +x crosses the ring's edges an odd number of times.
    static func crosses(_ q: SIMD2<Double>, plane: [SIMD2<Double>], from start: Int, to end: Int) -> Bool {
        var inside = false
        plane.withUnsafeBufferPointer { v in
            var j = start
            for i in (start + 1)..<end {
                let a = v[j]
                let b = v[i]
                if (a.y > q.y) != (b.y > q.y) {
                    let x = a.x + (q.y - a.y) * (b.x - a.x) / (b.y - a.y)
                    if q.x < x { inside.toggle() }
                }
                j = i
            }
        }
        return inside
    }

    /// The first pair of edges (as positions in `plane` of their first ends) that cross or touch, if any:
    /// a sweep over the edges sorted by their least x.
    static func firstCrossing(plane: [SIMD2<Double>], ringStarts: [Int]) -> (Int, Int)? {
        var order: [Int] = []
        var isEdge = [Bool](repeating: true, count: plane.count)
        for r in 1..<ringStarts.count { isEdge[ringStarts[r] - 1] = false }
        for i in plane.indices where isEdge[i] { order.append(i) }
        order.sort { min(plane[$0].x, plane[$0 + 1].x) < min(plane[$1].x, plane[$1 + 1].x) }
        // Each position's ring, so that telling neighbours apart costs nothing however many rings there are.
        var ringOf = [Int](repeating: 0, count: plane.count)
        for r in 0..<(ringStarts.count - 1) {
            for k in ringStarts[r]..<ringStarts[r + 1] { ringOf[k] = r }
        }
        func adjacent(_ i: Int, _ j: Int) -> Bool {
            let r = ringOf[i]
            guard ringOf[j] == r else { return false }
            if abs(i - j) == 1 { return true }
            // First and last edges of one ring share its closing position.
            let first = ringStarts[r]
            let last = ringStarts[r + 1] - 2
            return (i == first && j == last) || (j == first && i == last)
        }
        for (k, i) in order.enumerated() {
            let a = plane[i]
            let b = plane[i + 1]
            let maxX = max(a.x, b.x)
            for j in order[(k + 1)...] {
                let c = plane[j]
                let d = plane[j + 1]
                if min(c.x, d.x) > maxX { break }
                if max(min(a.y, b.y), min(c.y, d.y)) > min(max(a.y, b.y), max(c.y, d.y)) { continue }
                if adjacent(i, j) {
                    // Adjacent edges meet at their shared end; they cross only if one folds back on the other.
                    if folds(a, b, c, d) { return (min(i, j), max(i, j)) }
                    continue
                }
                if segmentsMeet(a, b, c, d) { return (min(i, j), max(i, j)) }
            }
        }
        return nil
    }

    private static func orient(_ a: SIMD2<Double>, _ b: SIMD2<Double>, _ c: SIMD2<Double>) -> Double {
        (b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x)
    }

    /// Whether two segments share a point (crossing, or one end on the other segment).
    static func segmentsMeet(_ a: SIMD2<Double>, _ b: SIMD2<Double>, _ c: SIMD2<Double>, _ d: SIMD2<Double>) -> Bool {
        let o1 = orient(a, b, c)
        let o2 = orient(a, b, d)
        let o3 = orient(c, d, a)
        let o4 = orient(c, d, b)
        if ((o1 > 0 && o2 < 0) || (o1 < 0 && o2 > 0)) && ((o3 > 0 && o4 < 0) || (o3 < 0 && o4 > 0)) { return true }
        func on(_ p: SIMD2<Double>, _ q: SIMD2<Double>, _ r: SIMD2<Double>) -> Bool {
            min(p.x, q.x) <= r.x && r.x <= max(p.x, q.x) && min(p.y, q.y) <= r.y && r.y <= max(p.y, q.y)
        }
        return (o1 == 0 && on(a, b, c)) || (o2 == 0 && on(a, b, d)) || (o3 == 0 && on(c, d, a))
            || (o4 == 0 && on(c, d, b))
    }

    /// Two edges sharing an end that lie along each other (a spike): collinear and pointing the same way
    /// from the shared end.
    static func folds(_ a: SIMD2<Double>, _ b: SIMD2<Double>, _ c: SIMD2<Double>, _ d: SIMD2<Double>) -> Bool {
        let (shared, p, q): (SIMD2<Double>, SIMD2<Double>, SIMD2<Double>)
        if b == c {
            (shared, p, q) = (b, a, d)
        } else if a == d {
            (shared, p, q) = (a, b, c)
        } else {
            return segmentsMeet(a, b, c, d)
        }
        let u = p - shared
        let v = q - shared
        let cross = u.x * v.y - u.y * v.x
        let along = u.x * v.x + u.y * v.y
        return abs(cross) <= 1e-15 * (u.x * u.x + u.y * u.y + v.x * v.x + v.y * v.y) && along > 0
    }

    private static func locate(_ position: Int, _ ringStarts: [Int]) -> (ring: Int, edge: Int) {
        var r = 0
        while ringStarts[r + 1] <= position { r += 1 }
        return (r, position - ringStarts[r])
    }

    // MARK: Vectors

    /// (1/a², 1/a², 1/b²): the ellipsoid is the points x with x·(x·scale) = 1.
    static let scale = SIMD3<Double>(
        1 / (WGS84.equatorialRadius * WGS84.equatorialRadius), 1 / (WGS84.equatorialRadius * WGS84.equatorialRadius),
        1 / (WGS84.polarRadius * WGS84.polarRadius))

    static func ecef(_ c: Coordinate) -> SIMD3<Double> {
        let g = GeocentricPoint(c)
        return SIMD3(g.x, g.y, g.z)
    }

    @inline(__always) static func dot(_ a: SIMD3<Double>, _ b: SIMD3<Double>) -> Double {
        a.x * b.x + a.y * b.y + a.z * b.z
    }

    @inline(__always) static func cross(_ a: SIMD3<Double>, _ b: SIMD3<Double>) -> SIMD3<Double> {
        SIMD3(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x)
    }

    @inline(__always) static func length(_ a: SIMD3<Double>) -> Double { dot(a, a).squareRoot() }

    static func unit(_ a: SIMD3<Double>) -> SIMD3<Double> { a / length(a) }

    /// The ellipsoid's outward normal at (or above/below) `p`.
    static func normal(at p: SIMD3<Double>) -> SIMD3<Double> { unit(p * scale) }

    /// The surface point in direction `d` from the earth's centre, as a coordinate.
    static func surface(direction d: SIMD3<Double>) -> Coordinate {
        let t = 1 / dot(d, d * scale).squareRoot()
        return surfaceCoordinate(d * t)
    }

    /// Geodetic coordinates of a point on the surface: there tan φ = z / ((1 − e²) p) exactly.
    static func surfaceCoordinate(_ x: SIMD3<Double>) -> Coordinate {
        let p = (x.x * x.x + x.y * x.y).squareRoot()
        let lat = atan2(x.z, (1 - WGS84.eccentricitySquared) * p) * 180 / .pi
        let lon = p == 0 ? 0 : atan2(x.y, x.x) * 180 / .pi
        return Coordinate(latitude: lat, longitude: lon)
    }

    /// A unit vector at the position's authalic latitude (equal-area sphere).
    static func authalicUnit(_ c: Coordinate) -> SIMD3<Double> {
        let e = WGS84.eccentricitySquared.squareRoot()
        func q(_ s: Double) -> Double {
            (1 - e * e) * (s / (1 - e * e * s * s) - 1 / (2 * e) * log((1 - e * s) / (1 + e * s)))
        }
        let (s, _) = Degrees.sinCos(c.latitude)
        let beta = asin(max(-1, min(1, q(s) / q(1))))
        let (sl, cl) = Degrees.sinCos(c.longitude)
        return SIMD3(cos(beta) * cl, cos(beta) * sl, sin(beta))
    }

    /// At least the geodesic distance, within a millimetre up to 30 km: from the chord (no trigonometry),
    /// exact beyond 900 km, where the chord's bounds give out.
    static func distanceUpperBound(_ a: SIMD3<Double>, _ b: SIMD3<Double>, _ ca: Coordinate, _ cb: Coordinate)
        -> Double
    {
        let chord = length(b - a)
        return chord < 900_000 ? Geodesic.distanceBounds(chord: chord).upper : Geodesic.distance(ca, cb)
    }

    static func samePlace(_ a: Coordinate, _ b: Coordinate) -> Bool {
        if a == b { return true }
        // The same pole under two longitudes.
        return abs(a.latitude) == 90 && a.latitude == b.latitude
    }
}

extension WGS84 {
    /// Radius of the sphere with the ellipsoid's area, metres.
    static let authalicRadius = 6_371_007.180_918_5
}
