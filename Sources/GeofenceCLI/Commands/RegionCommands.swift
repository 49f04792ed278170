import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

/// `add`, `remove`, `list`, `show`, `import`, `export`: the requested regions.
enum RegionCommands {
    /// The option each region field comes from, so a validation error names what the user typed.
    private static let optionForField: [String: String] = [
        "id": "--id", "name": "--name", "lat": "--lat", "lon": "--lon", "radius": "--radius", "notify": "--notify",
        "dwell": "--dwell", "expires": "--expires", "hooks.enter": "--on-enter", "hooks.exit": "--on-exit",
        "hooks.dwell": "--on-dwell",
    ]

    static func add(_ c: CommandContext) throws {
        let a = c.arguments
        var polygon: RegionPolygon?
        let lat: Double
        let lon: Double
        let radius: Double
        if let text = a.value("--polygon") {
            if let circle = ["--lat", "--lon", "--radius"].first(where: { a.value($0) != nil }) {
                throw c.usage("\(circle) is for a circle: a polygon (--polygon) has no centre or radius to give")
            }
            polygon = try parsePolygon(text, c)
            (lat, lon, radius) = (0, 0, 1)
        } else {
            guard a.value("--lat") != nil || a.value("--lon") != nil || a.value("--radius") != nil else {
                throw c.usage("give a circle (--lat, --lon and --radius) or a polygon (--polygon)")
            }
            for (option, name) in [("--lat", "degrees"), ("--lon", "degrees"), ("--radius", "metres")]
            where a.value(option) == nil {
                throw c.usage("missing required option \(option) <\(name)> (a circle needs --lat, --lon and --radius)")
            }
            lat = try a.required("--lat", as: CoordinateParser.latitude)
            lon = try a.required("--lon", as: CoordinateParser.longitude)
            radius = try a.required("--radius", as: NumberParser.finite)
        }
        var notify: Set<NotifyKind>?
        if let text = a.value("--notify") {
            var kinds = Set<NotifyKind>()
            for part in text.split(separator: ",", omittingEmptySubsequences: false) {
                let word = part.trimmingCharacters(in: .whitespaces)
                guard let kind = NotifyKind(rawValue: word) else {
                    throw c.usage("invalid value for --notify: \"\(word)\" is not one of enter, exit, dwell")
                }
                kinds.insert(kind)
            }
            notify = kinds
        }
        let dwell = try a.duration("--dwell")
        let expires = try a.expiry("--expires", now: c.now)
        var hooks: [NotifyKind: String] = [:]
        for (kind, option) in [(NotifyKind.enter, "--on-enter"), (.exit, "--on-exit"), (.dwell, "--on-dwell")] {
            if let command = a.value(option) { hooks[kind] = command }
        }
        let subjects = a.values("--subject")

        func makeRegion(id: String) throws -> Region {
            do {
                return try Region(
                    id: id, name: a.value("--name"), center: Coordinate(latitude: lat, longitude: lon), radius: radius,
                    notify: notify, dwell: dwell, expires: expires, hooks: hooks,
                    subjects: subjects.isEmpty ? nil : subjects, createdBy: getuid(), createdAt: c.now,
                    polygon: polygon)
            } catch {
                let option =
                    optionForField[error.field] ?? (error.field.hasPrefix("subjects") ? "--subject" : error.field)
                throw c.usage("invalid value for \(option): \(error.message)")
            }
        }

        let requestID = try self.requestID(c)
        func request(id: String) throws -> ControlRequest {
            let definition = RegionJSON.encode(try makeRegion(id: id))
            return ControlRequest(
                method: .add,
                params: [
                    "region": .object(definition), "replace": .bool(a.flag("--replace")),
                    "requestId": .string(requestID),
                ])
        }
        var result: JSONValue
        if let id = a.value("--id") {
            result = try c.interruptible(requestID: requestID, check: "geofence show \(id)") {
                try c.call([request(id: id)])[0]
            }
        } else {
            // A generated id: retry on the (astronomically unlikely) collision rather than fail.
            var attempt = 0
            while true {
                let id = generatedID()
                do {
                    result = try c.interruptible(requestID: requestID, check: "geofence show \(id)") {
                        try c.call([request(id: id)])[0]
                    }
                    break
                } catch let failure as CommandFailure where failure.exitCode == .dataError && attempt < 5 {
                    attempt += 1
                }
            }
        }
        if c.json {
            c.console.print(result.serialized())
        } else {
            c.console.print("Added region " + describe(result))
        }
        if let expires, expires <= c.now {
            c.console.message(pastExpiryWarning([result["id"]?.stringValue ?? "?"], at: expires))
        }
    }

    /// `--polygon`: a GeoJSON file (or `-`), else corners as `lat,lon lat,lon ...`.
    static func parsePolygon(_ text: String, _ c: CommandContext) throws -> RegionPolygon {
        let isPositions = text.contains(",") && !FileManager.default.fileExists(atPath: text)
        do {
            if isPositions { return try RegionGeoJSON.polygon(fromPositions: text) }
            let bytes = try readInput(text)
            let value: JSONValue
            do { value = try JSON.parse(bytes) } catch {
                throw DataError(
                    "cannot read a polygon from \(text == "-" ? "standard input" : text): not valid JSON: \(error)")
            }
            return try RegionGeoJSON.polygon(from: value)
        } catch let error as RegionValidationError {
            throw c.usage("invalid value for --polygon: \(error.message)")
        }
    }

    /// The one rule for an expiry in the past, `add` and `import` alike: the region is stored and expires at
    /// once (so a backup taken before some of its regions expired is restored whole), and, since on the
    /// command line it is most often a mistake, a warning says so.
    static func pastExpiryWarning(_ ids: [String], at expires: Date? = nil) -> String {
        let shown = ids.prefix(5).map { quoted($0) }.joined(separator: ", ") + (ids.count > 5 ? ", ..." : "")
        if ids.count == 1, let expires {
            return "warning: region \(shown) expires at \(TimestampParser.format(expires)), in the past: "
                + "it expires at once (geofence add --replace with a later --expires to keep it)"
        }
        return "warning: \(ids.count) region(s) have an expiry in the past and expire at once: \(shown)"
    }

    /// `"depot": 51.5007, -0.1246, radius 200 m, notify enter,exit, dwell 5m`
    static func describe(_ r: JSONValue) -> String {
        let lat = r["lat"]?.doubleValue ?? .nan
        let lon = r["lon"]?.doubleValue ?? .nan
        var text =
            "\(quoted(r["id"]?.stringValue ?? "?")): \(RegionOutput.degrees(lat)), \(RegionOutput.degrees(lon)), "
        if let shape = RegionOutput.polygonSummary(r) {
            text += shape
        } else {
            text += "radius \(RegionOutput.metres(r["radius"]?.doubleValue ?? .nan))"
        }
        let notify = r["notify"]?.arrayValue?.compactMap(\.stringValue) ?? []
        text += ", notify \(notify.joined(separator: ","))"
        if let dwell = r["dwell"]?.stringValue { text += ", dwell \(dwell)" }
        if let expires = r["expires"]?.stringValue { text += ", expires \(expires)" }
        return text
    }

    /// `--request-id`, checked, else a new one: the id under which the engine records the change.
    static func requestID(_ c: CommandContext) throws -> String {
        guard let given = c.arguments.value("--request-id") else {
            return "req-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        }
        guard !given.isEmpty, given.utf8.count <= 128, !given.unicodeScalars.contains(where: { $0.value < 32 })
        else {
            throw c.usage("invalid value for --request-id: must be 1 to 128 bytes, no control characters")
        }
        return given
    }

    static func generatedID() -> String {
        let alphabet = Array("abcdefghijkmnpqrstuvwxyz23456789")
        var rng = SystemRandomNumberGenerator()
        return "region-" + String((0..<8).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] })
    }

    static func remove(_ c: CommandContext) throws {
        let ids = c.arguments.values("id")
        let requestID = try self.requestID(c)
        let result = try c.interruptible(requestID: requestID, check: "geofence list") {
            try c.call(.remove, ["ids": .array(ids.map { .string($0) }), "requestId": .string(requestID)])
        }
        if c.json {
            c.console.print(result.serialized())
        } else {
            for id in result["removed"]?.arrayValue?.compactMap(\.stringValue) ?? [] {
                c.console.print("Removed region \(quoted(id))")
            }
        }
    }

    /// One region's row in `list`'s table (ID, NAME, LAT, LON, SIZE, NOTIFY, STATUS), read or streamed.
    static func listRow(_ r: JSONValue) -> [String] {
        [
            r["id"]?.stringValue ?? "", r["name"]?.stringValue ?? "",
            RegionOutput.degrees(r["lat"]?.doubleValue ?? .nan),
            RegionOutput.degrees(r["lon"]?.doubleValue ?? .nan),
            RegionOutput.size(r),
            (r["notify"]?.arrayValue?.compactMap(\.stringValue) ?? []).joined(separator: ","),
            RegionOutput.status(r),
        ]
    }

    static func list(_ c: CommandContext) throws {
        if let path = try c.engineSocket() { return try listStreamed(c, path: path) }
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
        for r in regions { table.add(listRow(r)) }
        c.console.write(table.render())
    }

    /// Output written in pieces of about 64 KiB, so a million regions cost neither a million writes nor
    /// their whole text in memory.
    final class ChunkedOutput {
        private let console: Console
        private var pending = ""

        init(_ console: Console) { self.console = console }

        func write(_ text: String) {
            pending += text
            if pending.utf8.count >= 65_536 { flush() }
        }

        func flush() {
            if !pending.isEmpty { console.write(pending) }
            pending = ""
        }
    }

    /// Regions through the engine, as they come (`list`/`export` with `stream`): each region goes to `item`,
    /// then the engine's closing answer says how many (or why it stopped).
    static func streamRegions(
        _ c: CommandContext, path: String, _ method: ControlMethod, _ item: (ArraySlice<UInt8>) throws -> Void
    ) throws -> Int {
        let response: ControlResponse
        do {
            response = try ControlClient(path: path).streamed(
                ControlRequest(method: method, params: ["stream": true]), item)
        } catch let error as ControlError {
            throw CommandFailure(error.message, exitCode: ExitCode(rawValue: error.exitStatus) ?? .unavailable)
        }
        switch response.result {
        case .success(let value): return value["count"]?.intValue ?? 0
        case .failure(let error):
            throw CommandFailure(error.message, exitCode: ExitCode(rawValue: error.exitStatus) ?? .failure)
        }
    }

    /// `list` through the engine, streamed: JSON as it comes; a table whose columns are as wide as the
    /// widest cell so far (set by the first thousand rows, widened by later ones).
    static func listStreamed(_ c: CommandContext, path: String) throws {
        let out = ChunkedOutput(c.console)
        if c.json {
            var first = true
            out.write("[")
            _ = try streamRegions(c, path: path, .list) { line in
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
        let count = try streamRegions(c, path: path, .list) { line in
            guard let r = try? JSON.parse(line) else { return }
            rows.append(listRow(r).map { $0.replacingOccurrences(of: "\n", with: "\\n") })
            if rows.count == 1000 { emit() }
        }
        if count == 0 {
            c.console.message("No regions. Add one with: geofence add --lat LAT --lon LON --radius METRES")
            return
        }
        emit()
        out.flush()
    }

    static func show(_ c: CommandContext) throws {
        let id = try c.arguments.required("id")
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

    static func importRegions(_ c: CommandContext) throws {
        let file = try c.arguments.required("file")
        let bytes = try readInput(file)
        let name = file == "-" ? "standard input" : file
        if c.console.stderrIsTerminal && bytes.count > 1 << 20 {
            c.console.writeError("checking \(name) (\(bytes.count >> 20) MiB)...\n")
        }
        // Checked here first (one clear report of every bad entry, before anything is sent), and again by
        // whoever stores them.
        let regions: [Region]
        switch RegionJSON.decodeFile(bytes, now: c.now, createdBy: getuid()) {
        case .success(let decoded): regions = decoded
        case .failure(let error):
            if error.problems.count == 1 {
                throw DataError("nothing imported from \(name): \(error.problems[0])")
            }
            throw DataError(
                "nothing imported from \(name): \(error.problems.count) problems\n"
                    + error.problems.prefix(50).map { "  \($0)" }.joined(separator: "\n")
                    + (error.problems.count > 50 ? "\n  ... and \(error.problems.count - 50) more" : ""))
        }
        let dryRun = c.arguments.flag("--dry-run")
        let replace = c.arguments.flag("--replace")
        let expired = regions.filter { $0.expires.map { $0 <= c.now } ?? false }.map(\.id)

        let started = Date()
        if dryRun {
            report(c, "\(regions.count) regions checked, all good; nothing stored (--dry-run)", count: regions.count)
            if !expired.isEmpty { c.console.message(pastExpiryWarning(expired)) }
            return
        }
        if let path = try c.engineSocket() {
            // Through the engine, in parts under the 1 MiB request limit: the engine checks and stores each
            // part while the next is made, and commits them all with the last.
            let progress = ProgressBar(console: c.console, total: regions.count, label: "sending")
            let total = regions.count
            let requestID = try self.requestID(c)
            let parts = ImportParts(
                file: bytes, regions: regions, replace: replace, requestID: requestID, limit: 768 * 1024
            ) { sent in
                progress.update(sent)
                guard sent == total, c.console.stderrIsTerminal else { return }
                progress.finish()
                c.console.writeError("the engine is storing them...\n")
            }
            let responses: [ControlResponse] = try c.interruptible(requestID: requestID, check: "geofence list") {
                do throws(ControlError) {
                    return try ControlClient(path: path).call(lines: parts)
                } catch let error where error.message == ControlClient.closedEarly {
                    // An import is committed only with its last part, which the engine never had.
                    throw CommandFailure(
                        "the engine closed the connection during the import, before its last part: nothing was "
                            + "imported. Run it again; under the same request id (\(requestID)) it is made once "
                            + "whatever happened: \(c.retryCommand(requestID: requestID))", exitCode: .unavailable)
                } catch {
                    throw CommandFailure(
                        error.message, exitCode: ExitCode(rawValue: error.exitStatus) ?? .unavailable)
                }
            }
            // The last answer is the import's (the earlier ones only say a part was staged).
            if let failed = responses.last(where: { if case .failure = $0.result { true } else { false } }),
                case .failure(let error) = failed.result
            {
                throw CommandFailure(error.message, exitCode: ExitCode(rawValue: error.exitStatus) ?? .failure)
            }
        } else {
            // No engine: straight into the store, in one transaction, with a progress bar.
            let progress = ProgressBar(console: c.console, total: regions.count, label: "importing")
            try c.openStore().regions.addAll(regions, replace: replace, now: c.now) { progress.update($0) }
            progress.finish()
        }
        let seconds = Date().timeIntervalSince(started)
        report(c, "Imported \(regions.count) regions in \(String(format: "%.1f", seconds)) s", count: regions.count)
        if !expired.isEmpty { c.console.message(pastExpiryWarning(expired)) }
    }

    private static func report(_ c: CommandContext, _ text: String, count: Int) {
        if c.json {
            c.console.print(
                JSONValue.object([
                    "imported": .number(Double(c.arguments.flag("--dry-run") ? 0 : count)),
                    "checked": .number(Double(count)),
                ]).serialized())
        } else {
            c.console.print(text)
        }
    }

    static func export(_ c: CommandContext) throws {
        let format = c.arguments.value("--format") ?? "json"
        if format == "json" || format == "geojson", let path = try c.engineSocket() {
            return try exportStreamed(c, path: path, geoJSON: format == "geojson")
        }
        let document: JSONValue
        switch format {
        case "json":
            document = try c.call(.export)
        case "geojson":
            let regions = try c.call(.list).arrayValue ?? []
            document = .object([
                "type": "FeatureCollection",
                "features": .array(regions.map { .object(RegionOutput.geoJSONFeature($0)) }),
            ])
        default:
            throw c.usage("invalid value for --format: \"\(format)\" is not one of json, geojson")
        }
        let count = (document["regions"] ?? document["features"])?.arrayValue?.count ?? 0
        let text = document.serialized(pretty: true) + "\n"
        if let output = c.arguments.value("--output"), output != "-" {
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
    static func exportStreamed(_ c: CommandContext, path: String, geoJSON: Bool) throws {
        let output = c.arguments.value("--output").flatMap { $0 == "-" ? nil : $0 }
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
        count = try streamRegions(c, path: path, geoJSON ? .list : .export) { line in
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

    /// Reads a whole file, or standard input for "-".
    static func readInput(_ path: String) throws -> [UInt8] {
        if path == "-" {
            return [UInt8](FileHandle.standardInput.readDataToEndOfFile())
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "it cannot be read" : "no such file"
            throw CommandFailure("cannot read \(path): \(reason)", exitCode: .noInput)
        }
        return [UInt8](data)
    }

    static func quoted(_ s: String) -> String {
        JSONValue.string(s).serialized()
    }
}

/// The request lines of an import sent to the engine: the entries packed into parts of at most `limit`
/// bytes, the last marked `final`, every one with the import's `replace`. The entries are cut from the file
/// as it was written when it can tell where each lies (`RegionJSON.entryRanges`): the file was checked
/// whole already, and serializing a million regions again cost the CLI more than checking them. Else
/// each region is serialized from its decoded form.
package struct ImportParts: Sequence, IteratorProtocol {
    private enum Entries {
        case cut([UInt8], [Range<Int>])
        case encoded([Region])
    }

    private let entries: Entries
    private let count: Int
    let replace: Bool
    let requestID: String?
    let limit: Int
    let progress: (Int) -> Void
    private var position = 0
    private var done = false

    package init(
        file: [UInt8], regions: [Region], replace: Bool, requestID: String? = nil, limit: Int,
        progress: @escaping (Int) -> Void
    ) {
        if let ranges = RegionJSON.entryRanges(in: file), ranges.count == regions.count {
            entries = .cut(file, ranges)
        } else {
            entries = .encoded(regions)
        }
        count = regions.count
        self.replace = replace
        self.requestID = requestID
        self.limit = limit
        self.progress = progress
    }

    package mutating func next() -> String? {
        guard !done else { return nil }
        var line = Array(#"{"method":"\#(ControlMethod.importRegions.rawValue)","params":{"replace":\#(replace),"#.utf8)
        if let requestID {
            line += #""requestId":"#.utf8
            line += JSONValue.string(requestID).serialized().utf8
            line.append(UInt8(ascii: ","))
        }
        line += #""regions":["#.utf8
        let header = line.count
        line.reserveCapacity(header + limit + 32)
        while position < count {
            let before = line.count
            if before > header { line.append(UInt8(ascii: ",")) }
            switch entries {
            case .cut(let file, let ranges):
                // A line break between tokens is whitespace to JSON but ends a request line; a checked file
                // has none inside its strings.
                line += file[ranges[position]].lazy.map { $0 == 10 ? 32 : $0 }
            case .encoded(let regions):
                line += JSONValue.object(RegionJSON.encode(regions[position])).serialized().utf8
            }
            if line.count - header > limit, before > header {
                line.removeSubrange(before...)
                break
            }
            position += 1
        }
        let final = position >= count
        done = final
        progress(position)
        line += #"],"final":\#(final)}}"#.utf8
        return String(decoding: line, as: UTF8.self)
    }
}
