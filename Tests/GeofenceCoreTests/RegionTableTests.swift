import Foundation
import GeofenceTestSupport
import Testing

@testable import GeofenceCore

/// The region table's compact layout: the 16-byte cold record gives the centre back bit for bit, and the
/// id and sequence-number lookups agree with a dictionary through insertions, removals and slot reuse.
@Suite struct RegionTableTests {
    private func region(_ id: String, _ latitude: Double, _ longitude: Double) -> CompactRegion {
        CompactRegion(
            id: id, center: Coordinate(latitude: latitude, longitude: longitude), radius: 100, notify: [.enter],
            createdBy: 7, createdAt: Date(timeIntervalSinceReferenceDate: 12.5))!
    }

    @Test("records are 48 bytes and cold records 16")
    func layout() {
        #expect(MemoryLayout<RegionTable.Record>.stride == 48)
        #expect(MemoryLayout<RegionTable.Cold>.stride == 16)
    }

    @Test("the centre comes back bit for bit: random points, the poles, the antimeridian, tiny angles")
    func centresExact() {
        var rng = SeededGenerator(seed: 29)
        var points: [(Double, Double)] = []
        for _ in 0..<200_000 {
            points.append((Double.random(in: -90...90, using: &rng), Double.random(in: -180...180, using: &rng)))
        }
        // Near the poles and the antimeridian, and small angles of every size.
        for _ in 0..<20_000 {
            let near = Double.random(in: 0..<1e-3, using: &rng)
            let lon = Double.random(in: -180...180, using: &rng)
            points.append((90 - near, lon))
            points.append((-90 + near, lon))
            points.append((Double.random(in: -90...90, using: &rng), 180 - near))
            points.append((Double.random(in: -90...90, using: &rng), -180 + near))
            let tiny = Double(sign: .plus, exponent: Int.random(in: -1074...0, using: &rng), significand: 1.5)
            points.append((tiny, -tiny))
            points.append((-tiny, Double.random(in: -180...180, using: &rng)))
        }
        let edges: [Double] = [0, -0.0, 45, -45, 1e-300, -1e-300, .leastNonzeroMagnitude, 89.999_999_999]
        for a in edges {
            for b in [0, -0.0, 90, -90, 180, -180, 179.999_999_999, -179.999_999_999, 1e-300, 37.5] {
                points.append((a, b))
            }
        }
        for lon in [0, -0.0, 37.5, 180, -180, 1e-300] {
            points.append((90, lon))
            points.append((-90, lon))
        }
        var table = RegionTable()
        for (i, (lat, lon)) in points.enumerated() {
            _ = table.insert(region("r\(i)", lat, lon), seq: Int64(i))
        }
        var wrong = 0
        for (i, (lat, lon)) in points.enumerated() {
            let c = table.center(slot: Int32(i))
            if c.latitude.bitPattern != lat.bitPattern || c.longitude.bitPattern != lon.bitPattern { wrong += 1 }
        }
        #expect(wrong == 0)
        // The corrections do the work: only the rare point keeps its coordinates whole (a pole's
        // longitude, a subnormal angle); random points none.
        #expect(table.exactCoordinateCount < 20_000 * 2 + 200)
        var random = RegionTable()
        for (i, (lat, lon)) in points.prefix(200_000).enumerated() {
            _ = random.insert(region("r\(i)", lat, lon), seq: Int64(i))
        }
        #expect(random.exactCoordinateCount == 0)
    }

    @Test("a region comes back equal, including its id, creator and creation time, and long ids")
    func regionsRoundTrip() throws {
        var table = RegionTable()
        let long = String(repeating: "x", count: 70_000)
        var unlimited = RegionLimits()
        unlimited.maxIDBytes = .max
        let regions = [
            try Region(id: "a", center: Coordinate(latitude: 48.85, longitude: 2.35), radius: 50),
            try Region(
                id: long, center: Coordinate(latitude: 90, longitude: 12), radius: 5,
                limits: unlimited),
            try Region(id: "c", name: "named", center: Coordinate(latitude: -33.9, longitude: 151.2), radius: 500),
        ]
        for (i, r) in regions.enumerated() { _ = table.insert(r, seq: Int64(i + 1)) }
        for (i, r) in regions.enumerated() {
            #expect(table.region(slot: Int32(i)) == r)
            #expect(table.slot(id: r.id) == Int32(i))
            #expect(table.slot(seq: Int64(i + 1)) == Int32(i))
        }
        let compact = region("d", -12.25, 179.5)
        let slot = table.insert(compact, seq: 9)
        let back = table.region(slot: slot)
        #expect(back.id == "d" && back.center == compact.center && back.createdBy == 7)
        #expect(back.createdAt == compact.createdAt && back.notify == [.enter])
        table.remove(slot: 1)
        #expect(table.slot(id: long) == nil)
        #expect(table.slot(seq: 2) == nil)
        #expect(table.region(slot: 0) == regions[0] && table.region(slot: 2) == regions[2])
    }

    @Test("ids and sequence numbers agree with dictionaries through removals, reuse and disorder")
    func lookupsRandomized() {
        var rng = SeededGenerator(seed: 4)
        var table = RegionTable()
        var byID: [String: Int32] = [:]
        var bySeq: [Int64: Int32] = [:]
        var seqOfID: [String: Int64] = [:]
        var nextSeq: Int64 = 1
        var nextName = 0
        for step in 0..<40_000 {
            let roll = Int.random(in: 0..<10, using: &rng)
            if roll < 6 || byID.isEmpty {
                let id = "id-\(nextName)-\(String(repeating: "z", count: nextName % 23))"
                nextName += 1
                // Mostly growing sequence numbers; now and then an older one (a region put back).
                var seq = nextSeq
                if roll == 0 && nextSeq > 10 {
                    seq = Int64.random(in: 1..<nextSeq, using: &rng)
                    if bySeq[seq] != nil { continue }
                } else {
                    nextSeq += 1 + Int64.random(in: 0..<3, using: &rng)
                }
                let slot = table.insert(
                    region(id, Double.random(in: -90...90, using: &rng), Double.random(in: -180...180, using: &rng)),
                    seq: seq)
                byID[id] = slot
                bySeq[seq] = slot
                seqOfID[id] = seq
            } else {
                // Remove the newest now and then (the index's tail), otherwise any.
                let id =
                    roll == 9
                    ? byID.max { seqOfID[$0.key]! < seqOfID[$1.key]! }!.key : byID.keys.randomElement(using: &rng)!
                let slot = byID.removeValue(forKey: id)!
                bySeq[seqOfID.removeValue(forKey: id)!] = nil
                table.remove(slot: slot)
            }
            if step % 997 == 0 || step == 39_999 {
                #expect(table.count == byID.count)
                for (id, slot) in byID where table.slot(id: id) != slot { Issue.record("id \(id)") }
                for (seq, slot) in bySeq where table.slot(seq: seq) != slot { Issue.record("seq \(seq)") }
                for seq in Int64(0)...nextSeq + 1 where bySeq[seq] == nil && table.slot(seq: seq) != nil {
                    Issue.record("removed seq \(seq) still found")
                }
                for (id, slot) in byID where table.id(slot: slot) != id { Issue.record("slot \(slot)") }
                #expect(table.slot(id: "absent") == nil)
            }
        }
    }

    @Test("a repeated sequence number belongs to the newest region")
    func repeatedSeq() {
        var table = RegionTable()
        let a = table.insert(region("a", 1, 1), seq: 5)
        let b = table.insert(region("b", 2, 2), seq: 5)
        #expect(table.slot(seq: 5) == b)
        table.remove(slot: a)
        #expect(table.slot(seq: 5) == b)
        table.remove(slot: b)
        #expect(table.slot(seq: 5) == nil)
    }
}
