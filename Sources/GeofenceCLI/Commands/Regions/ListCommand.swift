import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence list`: the requested regions and their status.
struct ListCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "list",
        abstract: "List the requested regions and their monitoring status.",
        discussion: """
            Status is one of monitoring, pending (with a reason), failed (with a reason), suspended, \
            accuracyLimited or expired. A region whose monitoring fails is never dropped: it stays here.
            """,
        examples: [
            Example("A table:", "geofence list"),
            Example("For scripts:", "geofence list --json"),
        ])

    init(parsing a: ParsedArguments, context c: CommandContext) throws {}

    func run(_ c: CommandContext) throws {
        if let path = try c.engineSocket() { return try Self.listStreamed(c, path: path) }
        let regions = try c.call(.list).arrayValue ?? []
        if c.json {
            c.console.print(JSONValue.array(regions).serialized())
            return
        }
        guard !regions.isEmpty else {
            c.console.message("No regions. Add one with: geofence add --lat LAT --lon LON --radius METRES")
            return
        }
        var table = TextTable(["ID", "NAME", "LAT", "LON", "SIZE", "NOTIFY", "STATUS"])
        for r in regions { table.add(RegionCommands.listRow(r)) }
        c.console.write(table.render())
    }

    /// `list` through the engine, streamed: JSON as it comes; a table whose columns are as wide as the
    /// widest cell so far (set by the first thousand rows, widened by later ones).
    static func listStreamed(_ c: CommandContext, path: String) throws {
        let out = RegionCommands.ChunkedOutput(c.console)
        if c.json {
            var first = true
            out.write("[")
            _ = try RegionCommands.streamRegions(c, path: path, .list) { line in
                out.write((first ? "" : ",") + String(decoding: line, as: UTF8.self))
                first = false
            }
            out.write("]\n")
            out.flush()
            return
        }
        let header = ["ID", "NAME", "LAT", "LON", "SIZE", "NOTIFY", "STATUS"]
        var widths = header.map(\.count)
        var rows: [[String]] = []
        var printedHeader = false
        func emit() {
            for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
            for row in (printedHeader ? [] : [header]) + rows {
                var line = ""
                for (i, cell) in row.enumerated() {
                    line +=
                        i == row.count - 1 ? cell : cell.padding(toLength: widths[i] + 2, withPad: " ", startingAt: 0)
                }
                while line.hasSuffix(" ") { line.removeLast() }
                out.write(line + "\n")
            }
            printedHeader = true
            rows.removeAll(keepingCapacity: true)
        }
        let count = try RegionCommands.streamRegions(c, path: path, .list) { line in
            guard let r = try? JSON.parse(line) else { return }
            rows.append(RegionCommands.listRow(r).map { $0.replacingOccurrences(of: "\n", with: "\\n") })
            if rows.count == 1000 { emit() }
        }
        if count == 0 {
            c.console.message("No regions. Add one with: geofence add --lat LAT --lon LON --radius METRES")
            return
        }
        emit()
        out.flush()
    }
}

/// `geofence show`: one region, its status and every subject's state in it.
struct ShowCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "show",
        abstract: "Show one region, its status and every subject's state in it.",
        arguments: [.required("id", help: "The region's id.")],
        examples: [Example("", "geofence show depot")])

    let id: String

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        id = try a.required("id")
    }

    func run(_ c: CommandContext) throws {
        let r = try c.call(.show, ["id": .string(id)])
        if c.json {
            c.console.print(r.serialized())
            return
        }
        var lines: [(String, String)] = [
            ("id", r["id"]?.stringValue ?? ""), ("name", r["name"]?.stringValue ?? "-"),
            (
                "centre",
                "\(RegionOutput.degrees(r["lat"]?.doubleValue ?? .nan)), \(RegionOutput.degrees(r["lon"]?.doubleValue ?? .nan))"
            ),
            RegionOutput.polygonSummary(r).map { ("shape", $0) } ?? (
                "radius", RegionOutput.metres(r["radius"]?.doubleValue ?? .nan)
            ),
            ("notify", (r["notify"]?.arrayValue?.compactMap(\.stringValue) ?? []).joined(separator: ",")),
            ("dwell", r["dwell"]?.stringValue ?? "-"), ("expires", r["expires"]?.stringValue ?? "never"),
            ("subjects", r["subjects"]?.arrayValue?.compactMap(\.stringValue).joined(separator: ", ") ?? "all"),
            ("status", RegionOutput.status(r)), ("attempts", String(r["attempts"]?.intValue ?? 0)),
            ("next retry", r["nextRetry"]?.stringValue ?? "-"),
            (
                "created",
                (r["createdAt"]?.stringValue ?? "?") + (r["createdBy"]?.intValue.map { " by uid \($0)" } ?? "")
            ),
        ]
        for kind in NotifyKind.allCases {
            if let hook = r["hooks"]?[kind.rawValue]?.stringValue { lines.append(("on \(kind.rawValue)", hook)) }
        }
        let width = lines.map(\.0.count).max() ?? 0
        for (key, value) in lines {
            // One line per field: a name or a hook stored with a line break (before names refused them) shows it.
            c.console.print(
                key.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + PrintableText.escaped(value))
        }
        c.console.print("")
        let states = r["states"]?.arrayValue ?? []
        if states.isEmpty {
            c.console.print("No subject has been evaluated against this region yet.")
        } else {
            var table = TextTable(["SUBJECT", "STATE", "SINCE"])
            for s in states {
                table.add([
                    s["subject"]?.stringValue ?? "", s["state"]?.stringValue ?? "", s["since"]?.stringValue ?? "-",
                ])
            }
            c.console.write(table.render())
        }
    }
}
