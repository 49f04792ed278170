import Foundation
import GeofenceCore
import Testing

/// One polygon of `Resources/polygon-vectors.txt` with GeographicLib's answers for points near it.
private struct PolygonCase {
    var name: String
    var parts: [[[Coordinate]]] = []
    var points: [(Coordinate, Double)] = []
}

private let polygonCases: [PolygonCase] = {
    guard
        let url = Bundle.module.url(forResource: "polygon-vectors", withExtension: "txt", subdirectory: "Resources"),
        let text = try? String(contentsOf: url, encoding: .utf8)
    else { return [] }
    var cases: [PolygonCase] = []
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
        let words = line.split(separator: " ")
        switch words.first {
        case "polygon":
            cases.append(PolygonCase(name: String(words[1]), parts: [[]]))
        case "part":
            cases[cases.count - 1].parts.append([])
        case "ring":
            let numbers = words.dropFirst().compactMap { Double($0) }
            let ring = stride(from: 0, to: numbers.count, by: 2).map {
                Coordinate(latitude: numbers[$0], longitude: numbers[$0 + 1])
            }
            let last = cases[cases.count - 1].parts.count - 1
            cases[cases.count - 1].parts[last].append(ring)
        case "P":
            let c = Coordinate(latitude: Double(words[1])!, longitude: Double(words[2])!)
            cases[cases.count - 1].points.append((c, Double(words[3])!))
        default: break
        }
    }
    return cases
}()

private func ring(_ text: String) -> [Coordinate] {
    text.split(separator: " ").map {
        let v = $0.split(separator: ",").map { Double($0)! }
        return Coordinate(latitude: v[0], longitude: v[1])
    }
}

@Suite struct RegionPolygonTests {
    @Test func referenceVectorsAgreeWithGeographicLib() {
        #expect(polygonCases.count == 69)
        var points = 0
        var worst = 0.0
        var wrongSide: [String] = []
        var far: [String] = []
        var names: Set<String> = []
        for c in polygonCases {
            let polygon: RegionPolygon
            do { polygon = try RegionPolygon(parts: c.parts) } catch {
                Issue.record("\(c.name): \(error)")
                continue
            }
            names.insert(c.name)
            for (point, reference) in c.points {
                points += 1
                let d = polygon.signedDistance(to: point)
                // Containment: always right outside a 1 mm band.
                if abs(reference) > 0.001 && (d < 0) != (reference < 0) {
                    wrongSide.append("\(c.name) (\(point.latitude), \(point.longitude)): \(d) vs \(reference)")
                }
                let error = abs(abs(d) - abs(reference))
                worst = max(worst, error)
                if error > 0.01 {
                    far.append("\(c.name) (\(point.latitude), \(point.longitude)): \(d) vs \(reference)")
                }
                // A limit gives the same sign, and the exact value below it.
                let limited = polygon.signedDistance(to: point, limit: 25)
                if abs(reference) > 0.001 {
                    #expect((limited < 0) == (reference < 0), "\(c.name) \(point): \(limited) \(d) vs \(reference)")
                }
                if abs(reference) < 20 { #expect(abs(abs(limited) - abs(reference)) <= 0.01) }
                if abs(reference) > 30 { #expect(abs(limited) >= 25) }
            }
        }
        #expect(points >= 10_000)
        print("polygon vectors: \(points) points, worst distance error \(worst) m")
        #expect(wrongSide.isEmpty, "\(wrongSide.count) on the wrong side: \(wrongSide.prefix(5))")
        #expect(far.isEmpty, "\(far.count) more than 1 cm off (worst \(worst) m): \(far.prefix(5))")
        for name in ["antimeridian", "north-pole", "south-pole", "thin-20cm", "multi", "large-0"] {
            #expect(names.contains(name))
        }
    }

    @Test func boundingCapHoldsEveryVertex() throws {
        for c in polygonCases {
            let polygon = try RegionPolygon(parts: c.parts)
            for ring in c.parts.joined() {
                for v in ring { #expect(Geodesic.distance(polygon.center, v) <= polygon.capRadius) }
            }
        }
    }

    @Test func windingDoesNotChooseTheInside() throws {
        let square = ring("0,0 0,0.01 0.01,0.01 0.01,0 0,0")
        let a = try RegionPolygon(parts: [[square]])
        let b = try RegionPolygon(parts: [[square.reversed()]])
        let centre = Coordinate(latitude: 0.005, longitude: 0.005)
        #expect(a.signedDistance(to: centre) < -500)
        #expect(abs(a.signedDistance(to: centre) - b.signedDistance(to: centre)) < 1e-6)
        // About 1.11 km by 1.11 km.
        #expect(abs(a.area - 1_231_000) < 5000)
        #expect(a.vertexCount == 4)
    }

    @Test func refusesBadRings() {
        func problem(_ parts: [[[Coordinate]]]) -> String? {
            do {
                _ = try RegionPolygon(parts: parts)
                return nil
            } catch { return error.message }
        }
        #expect(problem([[ring("0,0 0,1 0,0")]])?.contains("at least 4") == true)
        #expect(problem([[ring("0,0 0,0.01 0.01,0.01 0.01,0")]])?.contains("not closed") == true)
        #expect(problem([[ring("0,0 0,0.01 0.01,0 0.01,0.01 0,0")]])?.contains("intersects itself") == true)
        #expect(problem([[ring("0,0 0,0.01 0,0.01 0.01,0.01 0,0")]])?.contains("repeats position") == true)
        #expect(problem([[ring("0,0 0,2 2,2 0,0")]])?.contains("km long") == true)
        // A hole outside its ring, and a hole crossing it.
        let outer = ring("0,0 0,0.1 0.1,0.1 0.1,0 0,0")
        #expect(
            problem([[outer, ring("0.2,0.2 0.2,0.3 0.3,0.3 0.2,0.2")]])?.contains("not inside its outer ring") == true)
        #expect(problem([[outer, ring("0.05,0.05 0.05,0.2 0.2,0.2 0.05,0.05")]])?.contains("crosses") == true)
        // Parts that overlap: one inside the other, and two crossing.
        #expect(problem([[outer], [ring("0.02,0.02 0.02,0.03 0.03,0.03 0.02,0.02")]])?.contains("overlap") == true)
        #expect(problem([[outer], [ring("0.05,0.05 0.05,0.2 0.2,0.2 0.05,0.05")]])?.contains("overlap") == true)
        // Apart, and one part inside the other's hole: both fine.
        let hole = ring("0.02,0.02 0.02,0.08 0.08,0.08 0.08,0.02 0.02,0.02")
        #expect(problem([[outer], [ring("0.2,0.2 0.2,0.3 0.3,0.3 0.2,0.2")]]) == nil)
        #expect(problem([[outer, hole], [ring("0.04,0.04 0.04,0.05 0.05,0.05 0.04,0.04")]]) == nil)
        // Too many vertices.
        var limits = RegionLimits()
        limits.maxPolygonVertices = 3
        #expect(throws: RegionValidationError.self) { try RegionPolygon(parts: [[outer]], limits: limits) }
    }

    @Test func refusesPolygonsLargerThanSupported() {
        func around(latitude: Double) -> [Coordinate] {
            var ring = (0..<450).map { Coordinate(latitude: latitude, longitude: -180 + Double($0) * 0.8) }
            ring.append(ring[0])
            return ring
        }
        func problem(_ ring: [Coordinate]) -> String? {
            do {
                _ = try RegionPolygon(parts: [[ring]])
                return nil
            } catch { return error.message }
        }
        // The equator splits the earth in halves: no side is the smaller.
        #expect(problem(around(latitude: 0)) == "is larger than a hemisphere: not supported")
        // Latitude 30 holds a cap 6 600 km across its middle: beyond the 2 000 km supported.
        #expect(problem(around(latitude: 30))?.hasPrefix("reaches 66") == true)
        // Latitude 75: a polygon around the pole, 1 670 km from its centre, is fine.
        #expect(problem(around(latitude: 75)) == nil)
    }

    @Test func holesAreOutside() throws {
        let outer = ring("0,0 0,0.1 0.1,0.1 0.1,0 0,0")
        let hole = ring("0.02,0.02 0.02,0.08 0.08,0.08 0.08,0.02 0.02,0.02")
        let polygon = try RegionPolygon(parts: [[outer, hole]])
        #expect(polygon.signedDistance(to: Coordinate(latitude: 0.05, longitude: 0.05)) > 3000)
        #expect(polygon.signedDistance(to: Coordinate(latitude: 0.01, longitude: 0.05)) < -1000)
        #expect(polygon.area < 0.9 * 11_100 * 11_100 && polygon.area > 0.6 * 11_100 * 11_100)
    }

    @Test func featureCollectionsDecodeToRegions() throws {
        let file = #"""
            {"type": "FeatureCollection", "features": [
              {"type": "Feature", "id": "yard", "properties": {"notify": ["enter"]},
               "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [0.01, 0], [0.01, 0.01], [0, 0.01], [0, 0]]]}},
              {"type": "Feature", "properties": {"id": "c", "circle": {"lat": 1, "lon": 2, "radius": 50}},
               "geometry": {"type": "Polygon", "coordinates": [[[2, 1], [2.001, 1], [2, 1.001], [2, 1]]]}},
              {"type": "Feature", "properties": {"id": "p", "radius": 75}, "geometry": {"type": "Point", "coordinates": [3, 4]}}
            ]}
            """#
        let regions = try RegionJSON.decodeFile(Array(file.utf8), now: Date()).get()
        #expect(regions.map(\.id) == ["yard", "c", "p"])
        #expect(regions[0].polygon?.vertexCount == 4 && regions[0].notify == [.enter])
        #expect(regions[1].polygon == nil && regions[1].radius == 50 && regions[1].center.latitude == 1)
        #expect(regions[2].polygon == nil && regions[2].radius == 75 && regions[2].center.longitude == 3)
        let bad =
            #"{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"id": "x", "stroke": "red"}, "geometry": {"type": "LineString", "coordinates": []}}]}"#
        guard case .failure(let error) = RegionJSON.decodeFile(Array(bad.utf8), now: Date()) else {
            Issue.record("a bad feature was taken")
            return
        }
        #expect(error.problems == [#"features[0].stroke (id "x"): is not a known field"#])
    }
}
