import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// A concave polygon of `corners` corners about (lat, lon), `size` metres across, its positions awkward
/// doubles (so that any rounding on the way would show).
private func star(lat: Double, lon: Double, corners: Int, size: Double, seed: Int) -> [[Double]] {
    var ring: [[Double]] = []
    for k in 0..<corners {
        let bearing = 2 * Double.pi * Double(corners - k) / Double(corners)
        let reach = size * (0.5 + 0.5 * Double((k * 7 + seed) % 5) / 4) / 111_000
        ring.append([lon + reach * sin(bearing) / cos(lat * .pi / 180), lat + reach * cos(bearing)])
    }
    ring.append(ring[0])
    return ring
}

private func feature(_ i: Int, ring: [[Double]]) -> String {
    let coordinates = ring.map { "[\($0[0]),\($0[1])]" }.joined(separator: ",")
    return
        #"{"type":"Feature","properties":{"id":"p\#(i)","notify":["enter","exit","dwell"],"dwell":"5m","hooks":{"enter":"echo in"}},"geometry":{"type":"Polygon","coordinates":[[\#(coordinates)]]}}"#
}

private func collection(_ features: [String]) -> String {
    #"{"type":"FeatureCollection","features":[\#(features.joined(separator: ","))]}"#
}

@Suite("polygon regions on the command line")
struct PolygonCLITests {
    private let rings = (0..<1000).map { (i: Int) -> [[Double]] in
        let lat: Double = 40 + Double(i % 40) * 0.05 + 1e-9 / 3
        let lon: Double = -3 + Double(i / 40) * 0.05 + 1e-9 / 7
        let size: Double = 50 + Double(i % 50) * 60
        return star(lat: lat, lon: lon, corners: 20 + i % 181, size: size, seed: i)
    }

    @Test("one bad feature among 1000 good ones: nothing imported, and the line names it by index and fault")
    func oneBadFeature() throws {
        try withCLI { cli in
            var features = rings.enumerated().map { feature($0.offset, ring: $0.element) }
            // A bow tie: its edges cross.
            let bad =
                #"{"type":"Feature","properties":{"id":"bowtie"},"geometry":{"type":"Polygon","coordinates":[[[0,0],[0.01,0.01],[0.01,0],[0,0.01],[0,0]]]}}"#
            features.insert(bad, at: 517)
            let result = try cli.run(["import", "-"], stdin: collection(features))
            #expect(result.status == 65)
            #expect(
                result.stderr.contains(#"features[517].polygon (id "bowtie"): polygon outer ring intersects itself"#),
                "\(result.stderr)")
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count == 1)
            #expect(try cli.ids().isEmpty)
        }
    }

    @Test("import a FeatureCollection, export, import again: every polygon exactly as given")
    func roundTrip() throws {
        try withCLI { cli in
            let features = rings.enumerated().map { feature($0.offset, ring: $0.element) }
            let imported = try cli.run(["import", "-"], stdin: collection(features))
            #expect(imported.status == 0, "\(imported.stderr)")
            let exported = try cli.run("export")
            #expect(exported.status == 0)
            let document: JSONValue = try JSON.parse(exported.stdout)
            let regions = document["regions"]?.arrayValue ?? []
            #expect(regions.count == 1000)
            for (i, region) in regions.enumerated() {
                let positions = region["polygon"]?["coordinates"]?.arrayValue?.first?.arrayValue?.map {
                    $0.arrayValue?.compactMap(\.doubleValue) ?? []
                }
                #expect(positions == rings[i], "p\(i)")
                #expect(region["dwell"]?.stringValue == "5m" && region["hooks"]?["enter"]?.stringValue == "echo in")
            }
            // Through the regions file and through GeoJSON, into fresh stores: the same export.
            for format in ["json", "geojson"] {
                try withCLI { other in
                    let text = try cli.run("export", "--format", format).stdout
                    let again = try other.run(["import", "-"], stdin: text)
                    #expect(again.status == 0, "\(format): \(again.stderr)")
                    #expect(try other.run("export").stdout == exported.stdout, "\(format)")
                }
            }
            // list and show give the vertex count and the area.
            let listed = try cli.regions()
            #expect(listed[0]["vertices"]?.intValue == 20)
            #expect((listed[0]["area"]?.doubleValue ?? 0) > 500)
            let table = try cli.run("list").stdout
            #expect(table.contains("polygon of 20 vertices"))
            #expect(try cli.run("show", "p1").stdout.contains("polygon of 21 vertices"))
        }
    }

    @Test("through a running engine: add --polygon, a GeoJSON import, list and both exports keep every polygon")
    func throughTheEngine() async throws {
        try await withCLI { source in
            let features = rings.prefix(50).enumerated().map { feature($0.offset, ring: $0.element) }
            #expect(try source.run(["import", "-"], stdin: collection(features)).status == 0)
            let expected = try source.run("export").stdout

            try await withCLI { cli in
                try await withEngine(cli, ["--gpsd", "127.0.0.1:9"], timeout: 20) { daemon in
                    let imported = try cli.run(["import", "-"], stdin: collection(features))
                    #expect(imported.status == 0, "\(imported.stderr)")
                    #expect(try cli.run("export").stdout == expected)
                    let geojson = try cli.run("export", "--format", "geojson").stdout
                    try await withCLI { other in
                        #expect(try other.run(["import", "-"], stdin: geojson).status == 0)
                        #expect(try other.run("export").stdout == expected)
                        let added = try cli.run(
                            "add", "--id", "gate", "--polygon",
                            "51.5010,-0.1250 51.5010,-0.1240 51.5003,-0.1240 51.5003,-0.1250")
                        #expect(added.status == 0, "\(added.stderr)")
                        let gate = try #require(try cli.regions().first { $0["id"]?.stringValue == "gate" })
                        #expect(gate["vertices"]?.intValue == 4 && gate["area"]?.doubleValue == 5408)
                        _ = await daemon.stop()
                    }
                }
            }
        }
    }

    @Test("a recorded drive through a stored polygon: its crossings, with the signed distance to the boundary")
    func replayThroughPolygon() throws {
        try withCLI { cli in
            let yard = "51.5010,-0.1250 51.5010,-0.1240 51.5003,-0.1240 51.5003,-0.1250"
            #expect(try cli.run("add", "--id", "yard", "--polygon", yard).status == 0)
            // West to east through the yard's middle at about 2 m/s, a fix a second.
            let lines = (0..<120).map { i in
                let lon = -0.1265 + Double(i) * 0.00003
                let time = String(format: "2026-11-30T14:%02d:%02d.000Z", i / 60, i % 60)
                return
                    #"{"class":"TPV","device":"/dev/x","mode":3,"time":"\#(time)","lat":51.50065,"lon":\#(lon),"eph":4}"#
            }
            let replay = try cli.run(["replay", "-"], stdin: lines.joined(separator: "\n") + "\n")
            #expect(replay.status == 0, "\(replay.stderr)")
            let events = try replay.stdout.split(separator: "\n").map { try JSON.parse(String($0)) }
            #expect(events.map { $0["type"]?.stringValue } == ["determined", "enter", "exit"])
            #expect(events.allSatisfy { $0["radius"]?.doubleValue == 0 })
            let distances = events.compactMap { $0["distance"]?.doubleValue }
            // 104 m west of the west edge; then at least the 5 m margin inside, and outside.
            #expect(distances.count == 3 && abs(distances[0] - 104.2) < 0.2)
            #expect(distances[1] <= -5 && distances[1] > -8 && distances[2] >= 5 && distances[2] < 8)
        }
    }

    @Test("add --polygon takes a GeoJSON Feature file or corners, and refuses a bad one in one line")
    func add() throws {
        try withCLI { cli in
            let file = cli.dir.file("yard.geojson")
            try feature(0, ring: rings[0]).write(toFile: file, atomically: true, encoding: .utf8)
            let fromFile = try cli.run("add", "--id", "yard", "--polygon", file)
            #expect(fromFile.status == 0, "\(fromFile.stderr)")
            #expect(fromFile.stdout.contains("polygon of 20 vertices"))
            let corners = try cli.run(
                "add", "--id", "gate", "--polygon", "51.5010,-0.1250 51.5010,-0.1240 51.5003,-0.1240 51.5003,-0.1250")
            #expect(corners.status == 0, "\(corners.stderr)")
            #expect(corners.stdout.contains("polygon of 4 vertices, 5408 m²"))
            let bowtie = try cli.run(
                "add", "--id", "bad", "--polygon", "51.5010,-0.1250 51.5003,-0.1240 51.5010,-0.1240 51.5003,-0.1250")
            #expect(bowtie.status == 64)
            #expect(bowtie.stderr.hasPrefix("Error: invalid value for --polygon: polygon outer ring intersects itself"))
            let both = try cli.run("add", "--id", "bad", "--polygon", file, "--radius", "5")
            #expect(both.status == 64)
            #expect(try cli.ids() == ["yard", "gate"])
        }
    }
}
