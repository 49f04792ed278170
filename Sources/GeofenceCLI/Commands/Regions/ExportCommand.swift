import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence export`: the regions as a regions file or as GeoJSON.
struct ExportCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "export",
        abstract: "Write the regions as a regions file or as GeoJSON.",
        discussion: """
            json writes the import format (export, edit, import --replace). geojson writes a \
            FeatureCollection: a polygon as itself, a circle as a polygon of 64 vertices with the circle \
            (lat, lon, radius) in its properties, which also carry notify, dwell, hooks and status; it \
            imports back as the same regions.
            """,
        options: [
            .value("--format", valueName: "json|geojson", help: "Output format.", default: "json"),
            .value("--output", short: "-o", valueName: "file", help: "Write to this file instead of stdout."),
        ],
        examples: [
            Example("Back up the regions:", "geofence export > regions.json"),
            Example("Look at them on a map:", "geofence export --format geojson -o regions.geojson"),
        ])

    let geoJSON: Bool
    /// The file to write; nil for standard output (`-` or no `--output`).
    let output: String?

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        let format = a.value("--format") ?? "json"
        guard format == "json" || format == "geojson" else {
            throw c.usage("invalid value for --format: \"\(format)\" is not one of json, geojson")
        }
        geoJSON = format == "geojson"
        output = a.value("--output").flatMap { $0 == "-" ? nil : $0 }
    }

    func run(_ c: CommandContext) throws {
        if let path = try c.engineSocket() { return try exportStreamed(c, path: path) }
        let document: JSONValue
        if geoJSON {
            let regions = try c.call(.list).arrayValue ?? []
            document = .object([
                "type": "FeatureCollection",
                "features": .array(regions.map { .object(RegionOutput.geoJSONFeature($0)) }),
            ])
        } else {
            document = try c.call(.export)
        }
        let count = (document["regions"] ?? document["features"])?.arrayValue?.count ?? 0
        let text = document.serialized(pretty: true) + "\n"
        if let output {
            do {
                try Data(text.utf8).write(to: URL(fileURLWithPath: output), options: .atomic)
            } catch {
                throw CommandFailure("cannot write \(output): \(error.localizedDescription)", exitCode: .cantCreate)
            }
            if !c.json { c.console.message("Exported \(count) regions to \(output)") }
        } else {
            c.console.write(text)
        }
    }

    /// `export` through the engine, streamed: the same text as `document.serialized(pretty: true)` would
    /// be, written region by region (to the output file's temporary twin, renamed into place at the end).
    func exportStreamed(_ c: CommandContext, path: String) throws {
        var file: FileHandle?
        var temporary: String?
        if let output {
            let twin = output + ".geofence-\(getpid())"
            guard FileManager.default.createFile(atPath: twin, contents: nil),
                let handle = FileHandle(forWritingAtPath: twin)
            else {
                throw CommandFailure("cannot write \(output): it cannot be created", exitCode: .cantCreate)
            }
            file = handle
            temporary = twin
        }
        defer {
            try? file?.close()
            if let temporary { unlink(temporary) }
        }
        var pending = ""
        func write(_ text: String, force: Bool = false) throws {
            pending += text
            guard force || pending.utf8.count >= 65_536 else { return }
            if let file {
                do {
                    try file.write(contentsOf: Data(pending.utf8))
                } catch {
                    throw CommandFailure(
                        "cannot write \(output ?? "-"): \(error.localizedDescription)", exitCode: .ioError)
                }
            } else {
                c.console.write(pending)
            }
            pending = ""
        }
        try write(geoJSON ? "{\n  \"type\": \"FeatureCollection\",\n  \"features\": [" : "{\n  \"regions\": [")
        var count = 0
        count = try RegionCommands.streamRegions(c, path: path, geoJSON ? .list : .export) { line in
            guard var item = try? JSON.parse(line) else { return }
            if geoJSON { item = .object(RegionOutput.geoJSONFeature(item)) }
            try write(
                (count == 0 ? "\n    " : ",\n    ")
                    + item.serialized(pretty: true).replacingOccurrences(of: "\n", with: "\n    "))
            count += 1
        }
        try write(count == 0 ? "]\n}\n" : "\n  ]\n}\n", force: true)
        if let output, let temporary {
            try? file?.synchronize()
            guard rename(temporary, output) == 0 else {
                throw CommandFailure(
                    "cannot write \(output): \(String(cString: strerror(errno)))", exitCode: .cantCreate)
            }
            if !c.json { c.console.message("Exported \(count) regions to \(output)") }
        }
    }
}
