import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

/// What the region commands share: reading input, quoting, describing a region, request ids, streaming.
enum RegionCommands {
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

    /// `--request-id` as given (nil when it was not), checked, else a new one: the id under which the engine
    /// records the change.
    static func requestID(_ given: String?, _ c: CommandContext) throws -> String {
        guard let given else {
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
