/// The simplest candidate finder: test every region. The reference the spatial index is checked against.
package struct LinearRegionIndex: Sendable {
    private var centers: [GeocentricPoint] = []
    private var radii: [Double] = []
    private var live: [Bool] = []

    package init() {}

    /// Bytes held by its arrays (capacities).
    package var memoryFootprint: Int {
        centers.capacity * MemoryLayout<GeocentricPoint>.stride + radii.capacity * MemoryLayout<Double>.stride
            + live.capacity
    }

    package mutating func insert(slot: Int32, center: Coordinate, radius: Double) {
        let i = Int(slot)
        while centers.count <= i {
            centers.append(GeocentricPoint(Coordinate(latitude: 0, longitude: 0)))
            radii.append(0)
            live.append(false)
        }
        centers[i] = GeocentricPoint(center)
        radii[i] = radius
        live[i] = true
    }

    package mutating func remove(slot: Int32) {
        live[Int(slot)] = false
    }

    /// Appends every region whose centre may lie within `radius + extra` metres (geodesic) of `point`.
    package func candidates(near point: GeocentricPoint, extra: Double, into result: inout [Int32]) {
        for i in centers.indices where live[i] {
            // The chord never exceeds the geodesic (the micrometre covers rounding in the chord), so this
            // keeps every region that could qualify.
            if point.chord(to: centers[i]) < radii[i] + extra + 1e-6 { result.append(Int32(i)) }
        }
    }
}
