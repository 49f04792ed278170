import Foundation
import GeofenceCore

/// How regions look in `list`, `show` and `export`.
enum RegionOutput {
    static func geoJSONFeature(_ r: JSONValue) -> JSONObject {
        RegionGeoJSON.feature(r.objectValue ?? JSONObject())
    }

    /// The SIZE column of `list`: a circle's radius, a polygon's vertices and area.
    static func size(_ r: JSONValue) -> String {
        polygonSummary(r) ?? metres(r["radius"]?.doubleValue ?? .nan)
    }

    /// `polygon of 24 vertices, 1.23 km²` for a polygon region (nil for a circle).
    static func polygonSummary(_ r: JSONValue) -> String? {
        guard let vertices = r["vertices"]?.intValue ?? polygonVertices(r) else { return nil }
        var text = "polygon of \(vertices) vertices"
        if let area = r["area"]?.doubleValue { text += ", " + self.area(area) }
        return text
    }

    private static func polygonVertices(_ r: JSONValue) -> Int? {
        guard let polygon = r["polygon"], !polygon.isNull else { return nil }
        return (try? RegionGeoJSON.polygon(from: polygon))?.vertexCount
    }

    /// Square metres under a hectare, else km².
    static func area(_ m2: Double) -> String {
        m2 < 10_000 ? "\(Int64(m2.rounded())) m²" : String(format: "%.3f km²", m2 / 1e6)
    }

    /// `monitoring`, `pending: limit`, `failed: location-unavailable`, ...
    static func status(_ r: JSONValue) -> String {
        let kind = r["status"]?.stringValue ?? "?"
        return r["reason"]?.stringValue.map { "\(kind): \($0)" } ?? kind
    }

    static func degrees(_ v: Double) -> String {
        var text = String(format: "%.6f", v)
        while text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
        return text
    }

    static func coordinate(_ c: Coordinate) -> String { "\(degrees(c.latitude)), \(degrees(c.longitude))" }

    static func metres(_ v: Double) -> String {
        v == v.rounded() && abs(v) < 1e15 ? "\(Int64(v)) m" : String(format: "%.2f m", v)
    }
}

/// A plain text table with aligned columns.
struct TextTable {
    private var rows: [[String]]

    init(_ header: [String]) { rows = [header] }

    mutating func add(_ row: [String]) {
        // One line per row, whatever the data holds, and nothing that steers a terminal (`PrintableText`).
        rows.append(row.map { PrintableText.escaped($0) })
    }

    func render() -> String {
        let columns = rows[0].count
        var widths = [Int](repeating: 0, count: columns)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        var out = ""
        for row in rows {
            var line = ""
            for (i, cell) in row.enumerated() {
                line += i == columns - 1 ? cell : cell.padding(toLength: widths[i] + 2, withPad: " ", startingAt: 0)
            }
            while line.hasSuffix(" ") { line.removeLast() }
            out += line + "\n"
        }
        return out
    }
}

/// A progress bar on stderr, drawn only when stderr is a terminal.
final class ProgressBar: @unchecked Sendable {
    // @unchecked: updated from the store's write closure on the calling thread only.
    private let console: Console
    private let total: Int
    private let label: String
    private var lastDrawn = -1

    init(console: Console, total: Int, label: String) {
        self.console = console
        self.total = total
        self.label = label
    }

    func update(_ done: Int) {
        guard console.stderrIsTerminal, total > 0 else { return }
        let percent = min(100, done * 100 / total)
        guard percent != lastDrawn else { return }
        lastDrawn = percent
        let width = 30
        let filled = percent * width / 100
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        console.progress("\(label) [\(bar)] \(percent)% (\(done)/\(total))")
    }

    func finish() {
        guard console.stderrIsTerminal, lastDrawn >= 0 else { return }
        console.writeError("\n")
    }
}
