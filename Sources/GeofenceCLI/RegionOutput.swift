import Foundation
import GeofenceCore

/// How regions look in `list`, `show` and `export`.
enum RegionOutput {
    static func geoJSONFeature(_ r: JSONValue) -> JSONObject {
        var properties = r.objectValue ?? JSONObject()
        properties["lat"] = nil
        properties["lon"] = nil
        return [
            "type": "Feature",
            "id": r["id"] ?? .null,
            "geometry": [
                "type": "Point",
                "coordinates": [r["lon"] ?? .null, r["lat"] ?? .null],
            ],
            "properties": .object(properties),
        ]
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
        // One line per row, whatever the data holds.
        rows.append(row.map { $0.replacingOccurrences(of: "\n", with: "\\n") })
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
        console.writeError("\r\(label) [\(bar)] \(percent)% (\(done)/\(total))")
    }

    func finish() {
        guard console.stderrIsTerminal, lastDrawn >= 0 else { return }
        console.writeError("\n")
    }
}
