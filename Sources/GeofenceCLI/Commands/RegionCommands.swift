import Foundation
import GeofenceCore
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
        let lat = try a.required("--lat", as: CoordinateParser.latitude)
        let lon = try a.required("--lon", as: CoordinateParser.longitude)
        let radius = try a.required("--radius", as: NumberParser.finite)
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
        if let expires, expires <= c.now {
            throw c.usage("invalid value for --expires: \(TimestampParser.format(expires)) is in the past")
        }

        func makeRegion(id: String) throws -> Region {
            do {
                return try Region(
                    id: id, name: a.value("--name"), center: Coordinate(latitude: lat, longitude: lon), radius: radius,
                    notify: notify, dwell: dwell, expires: expires, hooks: hooks,
                    subjects: subjects.isEmpty ? nil : subjects, createdBy: getuid(), createdAt: c.now)
            } catch {
                let option =
                    optionForField[error.field] ?? (error.field.hasPrefix("subjects") ? "--subject" : error.field)
                throw c.usage("invalid value for \(option): \(error.message)")
            }
        }

        let store = try c.openStore()
        let stored: StoredRegion
        if let id = a.value("--id") {
            stored = try store.addRegion(makeRegion(id: id), replace: a.flag("--replace"), now: c.now)
        } else {
            // A generated id: retry on the (astronomically unlikely) collision rather than fail.
            var attempt = 0
            while true {
                do {
                    stored = try store.addRegion(makeRegion(id: generatedID()), now: c.now)
                    break
                } catch StoreError.duplicateRegions where attempt < 5 {
                    attempt += 1
                }
            }
        }
        if c.json {
            c.console.print(JSONValue.object(RegionOutput.json(stored)).serialized())
        } else {
            let r = stored.region
            c.console.print(
                "Added region \(quoted(r.id)): \(RegionOutput.coordinate(r.center)), radius \(RegionOutput.metres(r.radius)),"
                    + " notify \(r.notify.sorted().map(\.rawValue).joined(separator: ","))"
                    + (r.dwell.map { ", dwell \(DurationParser.format($0))" } ?? "")
                    + (r.expires.map { ", expires \(TimestampParser.format($0))" } ?? ""))
        }
    }

    static func generatedID() -> String {
        let alphabet = Array("abcdefghijkmnpqrstuvwxyz23456789")
        var rng = SystemRandomNumberGenerator()
        return "region-" + String((0..<8).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] })
    }

    static func remove(_ c: CommandContext) throws {
        let ids = c.arguments.values("id")
        let store = try c.openStore()
        let removed = try store.removeRegions(ids: ids)
        if c.json {
            c.console.print(JSONValue.object(["removed": .array(removed.map { .string($0) })]).serialized())
        } else {
            for id in removed { c.console.print("Removed region \(quoted(id))") }
        }
    }

    static func list(_ c: CommandContext) throws {
        let regions = try c.openStore().regions()
        if c.json {
            c.console.print(JSONValue.array(regions.map { .object(RegionOutput.json($0)) }).serialized())
            return
        }
        guard !regions.isEmpty else {
            c.console.message("No regions. Add one with: geofence add --lat LAT --lon LON --radius METRES")
            return
        }
        var table = TextTable(["ID", "NAME", "LAT", "LON", "RADIUS", "NOTIFY", "STATUS"])
        for s in regions {
            table.add([
                s.region.id, s.region.name ?? "", RegionOutput.degrees(s.region.center.latitude),
                RegionOutput.degrees(s.region.center.longitude), RegionOutput.metres(s.region.radius),
                s.region.notify.sorted().map(\.rawValue).joined(separator: ","), RegionOutput.status(s),
            ])
        }
        c.console.write(table.render())
    }

    static func show(_ c: CommandContext) throws {
        let id = try c.arguments.required("id")
        let store = try c.openStore()
        guard let stored = try store.region(id: id) else { throw StoreError.regionNotFound(id) }
        let states = try store.states(regionSeq: stored.seq)
        if c.json {
            var o = RegionOutput.json(stored)
            o["states"] = .array(
                states.map { s in
                    var state: JSONObject = ["subject": .string(s.subject), "state": .string(s.record.state.rawValue)]
                    if let since = s.record.since { state["since"] = .string(TimestampParser.format(since)) }
                    return .object(state)
                })
            c.console.print(JSONValue.object(o).serialized())
            return
        }
        let r = stored.region
        var lines: [(String, String)] = [
            ("id", r.id), ("name", r.name ?? "-"), ("centre", RegionOutput.coordinate(r.center)),
            ("radius", RegionOutput.metres(r.radius)),
            ("notify", r.notify.sorted().map(\.rawValue).joined(separator: ",")),
            ("dwell", r.dwell.map(DurationParser.format) ?? "-"),
            ("expires", r.expires.map(TimestampParser.format) ?? "never"),
            ("subjects", r.subjects?.joined(separator: ", ") ?? "all"),
            ("status", RegionOutput.status(stored)),
            ("attempts", String(stored.attempts)),
            ("next retry", stored.nextRetry.map(TimestampParser.format) ?? "-"),
            ("created", TimestampParser.format(stored.createdAt) + (r.createdBy.map { " by uid \($0)" } ?? "")),
        ]
        for kind in NotifyKind.allCases { if let hook = r.hooks[kind] { lines.append(("on \(kind.rawValue)", hook)) } }
        let width = lines.map(\.0.count).max() ?? 0
        for (key, value) in lines {
            c.console.print(key.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + value)
        }
        c.console.print("")
        if states.isEmpty {
            c.console.print("No subject has been evaluated against this region yet.")
        } else {
            var table = TextTable(["SUBJECT", "STATE", "SINCE"])
            for s in states {
                table.add([s.subject, s.record.state.rawValue, s.record.since.map(TimestampParser.format) ?? "-"])
            }
            c.console.write(table.render())
        }
    }

    static func importRegions(_ c: CommandContext) throws {
        let file = try c.arguments.required("file")
        let bytes = try readInput(file)
        let regions: [Region]
        switch RegionJSON.decodeFile(bytes, now: c.now, createdBy: getuid()) {
        case .success(let decoded): regions = decoded
        case .failure(let error):
            let name = file == "-" ? "standard input" : file
            if error.problems.count == 1 {
                throw DataError("nothing imported from \(name): \(error.problems[0])")
            }
            throw DataError(
                "nothing imported from \(name): \(error.problems.count) problems\n"
                    + error.problems.prefix(50).map { "  \($0)" }.joined(separator: "\n")
                    + (error.problems.count > 50 ? "\n  ... and \(error.problems.count - 50) more" : ""))
        }
        if c.arguments.flag("--dry-run") {
            report(c, "\(regions.count) regions checked, all good; nothing stored (--dry-run)", count: regions.count)
            return
        }
        let store = try c.openStore()
        let progress = ProgressBar(console: c.console, total: regions.count, label: "importing")
        let started = Date()
        try store.importRegions(regions, replace: c.arguments.flag("--replace"), now: c.now) { done in
            progress.update(done)
        }
        progress.finish()
        let seconds = Date().timeIntervalSince(started)
        report(
            c, "Imported \(regions.count) regions in \(String(format: "%.1f", seconds)) s", count: regions.count)
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
        let regions = try c.openStore().regions()
        let document: JSONValue
        switch format {
        case "json":
            document = .object(["regions": .array(regions.map { .object(RegionJSON.encode($0.region)) })])
        case "geojson":
            document = .object([
                "type": "FeatureCollection",
                "features": .array(regions.map { .object(RegionOutput.geoJSONFeature($0)) }),
            ])
        default:
            throw c.usage("invalid value for --format: \"\(format)\" is not one of json, geojson")
        }
        let text = document.serialized(pretty: true) + "\n"
        if let output = c.arguments.value("--output"), output != "-" {
            do {
                try Data(text.utf8).write(to: URL(fileURLWithPath: output), options: .atomic)
            } catch {
                throw CommandFailure("cannot write \(output): \(error.localizedDescription)", exitCode: .cantCreate)
            }
            if !c.json { c.console.message("Exported \(regions.count) regions to \(output)") }
        } else {
            c.console.write(text)
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
