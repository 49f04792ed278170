import Foundation

extension RegionPolygon {
    /// The positions in a compact binary form, for the store: a version byte (1), then little-endian UInt32
    /// counts (parts; each part's rings; each ring's positions) and each position's latitude and longitude
    /// as little-endian IEEE doubles, so that a polygon reads back exactly as written (16 bytes a position).
    public var encoded: [UInt8] {
        var bytes: [UInt8] = [1]
        func put(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
        func put(_ v: Double) { withUnsafeBytes(of: v.bitPattern.littleEndian) { bytes.append(contentsOf: $0) } }
        put(UInt32(parts.count))
        for rings in parts {
            put(UInt32(rings.count))
            for ring in rings { put(UInt32(ring.count)) }
        }
        for rings in parts {
            for ring in rings {
                for c in ring {
                    put(c.latitude)
                    put(c.longitude)
                }
            }
        }
        return bytes
    }

    /// The positions of `encoded`, or nil when the bytes are not such an encoding.
    public static func decodeParts(_ bytes: [UInt8]) -> [[[Coordinate]]]? {
        var offset = 1
        guard bytes.first == 1 else { return nil }
        func u32() -> UInt32? {
            guard offset + 4 <= bytes.count else { return nil }
            var v: UInt32 = 0
            for i in 0..<4 { v |= UInt32(bytes[offset + i]) << (8 * i) }
            offset += 4
            return v
        }
        func f64() -> Double? {
            guard offset + 8 <= bytes.count else { return nil }
            var v: UInt64 = 0
            for i in 0..<8 { v |= UInt64(bytes[offset + i]) << (8 * i) }
            offset += 8
            return Double(bitPattern: v)
        }
        guard let partCount = u32(), partCount <= bytes.count else { return nil }
        var shape: [[Int]] = []
        for _ in 0..<partCount {
            guard let ringCount = u32(), ringCount <= bytes.count else { return nil }
            var rings: [Int] = []
            for _ in 0..<ringCount {
                guard let n = u32(), n <= bytes.count else { return nil }
                rings.append(Int(n))
            }
            shape.append(rings)
        }
        var parts: [[[Coordinate]]] = []
        for rings in shape {
            var part: [[Coordinate]] = []
            for n in rings {
                var ring: [Coordinate] = []
                ring.reserveCapacity(n)
                for _ in 0..<n {
                    guard let lat = f64(), let lon = f64() else { return nil }
                    ring.append(Coordinate(latitude: lat, longitude: lon))
                }
                part.append(ring)
            }
            parts.append(part)
        }
        return offset == bytes.count ? parts : nil
    }
}
