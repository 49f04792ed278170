import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence add`: one region, a circle or a polygon.
struct AddCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "add",
        abstract: "Add a region to monitor: a circle (--lat, --lon, --radius) or a polygon (--polygon).",
        discussion: """
            The region is stored at once and survives restarts; a running engine picks it up within a \
            second. Coordinates are WGS84 degrees; the radius is in metres, measured along the ellipsoid. \
            A polygon's edges are geodesics; a fix is inside when it is farther inside its boundary than \
            its margin, as for a circle (see Docs/regions-format.md for holes, parts and limits). \
            An id must be unique: adding one that exists is an error unless --replace is given (which \
            also resets every vehicle's state for that region). \
            With --nats, the region goes to a cluster's bucket instead, checked and refused as the \
            local store would (Docs/cluster.md); every engine of the cluster applies it within a second.
            """,
        options: [
            .value("--lat", valueName: "degrees", help: "Latitude of a circle's centre, -90 to 90."),
            .value("--lon", valueName: "degrees", help: "Longitude of a circle's centre, -180 to 180."),
            .value("--radius", valueName: "metres", help: "A circle's radius in metres, more than 0."),
            .value(
                "--polygon", valueName: "file|positions",
                help: """
                    A polygon instead of a circle: a GeoJSON file (a Feature, a Polygon or a MultiPolygon; - \
                    for standard input), or its corners as 'lat,lon lat,lon ...' (closed for you).
                    """),
            .value(
                "--id", valueName: "id",
                help: """
                    Unique id, 1 to 128 bytes, no control, bidi control or invisible characters; compared in \
                    Unicode NFC (café is café however typed). Generated when not given.
                    """),
            .value("--name", valueName: "text", help: "A name for people."),
            .value(
                "--notify", valueName: "events",
                help: "Comma-separated events to notify: enter, exit, dwell.",
                defaultDescription: "enter,exit, plus dwell when --dwell is given"),
            .value(
                "--dwell", valueName: "duration", help: "Fire `dwell` after this long inside (e.g. 5m, 90s, 1h30m)."),
            .value(
                "--expires", valueName: "duration|timestamp",
                help: """
                    Stop monitoring after this long (e.g. 30d) or at this time (e.g. 2027-01-01T00:00:00Z). A \
                    time in the past is taken, as import takes it: the region expires at once, with a warning.
                    """),
            .repeating(
                "--subject", valueName: "name",
                help: "Only monitor this subject (a gpsd device or vehicle). Repeat for several; default all."),
            .value("--on-enter", valueName: "command", help: "Shell command run on enter (see Docs/hooks.md)."),
            .value("--on-exit", valueName: "command", help: "Shell command run on exit."),
            .value("--on-dwell", valueName: "command", help: "Shell command run on dwell."),
            .flag("--replace", help: "Replace a region with the same id instead of failing."),
            CommandTree.requestID,
        ] + ClusterTarget.options,
        examples: [
            Example(
                "A depot with enter and exit events:",
                "geofence add --id depot --lat 51.5007 --lon -0.1246 --radius 200"),
            Example(
                "A customer site that reports a 10-minute stay, for 30 days:",
                "geofence add --id customer-42 --lat 48.8584 --lon 2.2945 --radius 150 --dwell 10m --expires 30d"),
            Example(
                "A yard as a polygon of its corners:",
                "geofence add --id yard --polygon '51.5010,-0.1250 51.5010,-0.1240 51.5003,-0.1240 51.5003,-0.1250'"),
            Example("A district from a GeoJSON file:", "geofence add --id district-7 --polygon district-7.geojson"),
        ])

    /// The option each region field comes from, so a validation error names what the user typed.
    private static let optionForField: [String: String] = [
        "id": "--id", "name": "--name", "lat": "--lat", "lon": "--lon", "radius": "--radius", "notify": "--notify",
        "dwell": "--dwell", "expires": "--expires", "hooks.enter": "--on-enter", "hooks.exit": "--on-exit",
        "hooks.dwell": "--on-dwell",
    ]

    /// The id given with `--id`; nil to generate one.
    let id: String?
    let replace: Bool
    let requestID: String
    /// `--nats`: the cluster's bucket instead of the local store.
    let cluster: ClusterTarget?
    /// Every field of the region but its id, checked.
    private let fields: Fields

    private struct Fields {
        var name: String?
        var polygon: RegionPolygon?
        var lat: Double
        var lon: Double
        var radius: Double
        var notify: Set<NotifyKind>?
        var dwell: Double?
        var expires: Date?
        var hooks: [NotifyKind: String]
        var subjects: [String]
        var now: Date
    }

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        var polygon: RegionPolygon?
        let lat: Double
        let lon: Double
        let radius: Double
        if let text = a.value("--polygon") {
            if let circle = ["--lat", "--lon", "--radius"].first(where: { a.value($0) != nil }) {
                throw c.usage("\(circle) is for a circle: a polygon (--polygon) has no centre or radius to give")
            }
            polygon = try Self.parsePolygon(text, c)
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
        fields = Fields(
            name: a.value("--name"), polygon: polygon, lat: lat, lon: lon, radius: radius, notify: notify,
            dwell: dwell, expires: expires, hooks: hooks, subjects: a.values("--subject"), now: c.now)
        requestID = try RegionCommands.requestID(a.value("--request-id"), c)
        id = a.value("--id")
        replace = a.flag("--replace")
        cluster = try ClusterTarget(parsing: a, context: c)
        // The region is checked here, under its id or a stand-in (a generated id is always valid).
        _ = try makeRegion(id: id ?? RegionCommands.generatedID(), c)
    }

    private func makeRegion(id: String, _ c: CommandContext) throws -> Region {
        let f = fields
        do {
            return try Region(
                id: id, name: f.name, center: Coordinate(latitude: f.lat, longitude: f.lon), radius: f.radius,
                notify: f.notify, dwell: f.dwell, expires: f.expires, hooks: f.hooks,
                subjects: f.subjects.isEmpty ? nil : f.subjects, createdBy: getuid(), createdAt: f.now,
                polygon: f.polygon)
        } catch {
            let option =
                Self.optionForField[error.field] ?? (error.field.hasPrefix("subjects") ? "--subject" : error.field)
            throw c.usage("invalid value for \(option): \(error.message)")
        }
    }

    func run(_ c: CommandContext) throws {
        if let cluster { return try runOnCluster(cluster, c) }
        func request(id: String) throws -> ControlRequest {
            let definition = RegionJSON.encode(try makeRegion(id: id, c))
            return ControlRequest(
                method: .add,
                params: [
                    "region": .object(definition), "replace": .bool(replace), "requestId": .string(requestID),
                ])
        }
        var result: JSONValue
        if let id {
            result = try c.interruptible(requestID: requestID, check: "geofence show \(id)") {
                try c.call([request(id: id)])[0]
            }
        } else {
            // A generated id: retry on the (astronomically unlikely) collision rather than fail.
            var attempt = 0
            while true {
                let id = RegionCommands.generatedID()
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
        report(result, c)
    }

    /// `add --nats`: the region as the engine's `add` decodes it (`RegionJSON`, the same checks), written to
    /// the cluster's bucket; a duplicate refused as the store refuses it.
    private func runOnCluster(_ cluster: ClusterTarget, _ c: CommandContext) throws {
        let store = try cluster.connect()
        func add(id: String) throws -> StoredRegion {
            let region = try ClusterTarget.perform {
                try RegionJSON.decode(
                    .object(RegionJSON.encode(makeRegion(id: id, c))), now: Date(), createdBy: getuid())
            }
            return try ClusterTarget.perform { try store.add(region, replace: replace, requestID: requestID) }
        }
        var stored: StoredRegion
        if let id {
            stored = try add(id: id)
        } else {
            // A generated id: retry on the (astronomically unlikely) collision rather than fail.
            var attempt = 0
            while true {
                do {
                    stored = try add(id: RegionCommands.generatedID())
                    break
                } catch let failure as CommandFailure where failure.exitCode == .dataError && attempt < 5 {
                    attempt += 1
                }
            }
        }
        report(.object(RegionReport.json(stored)), c)
    }

    private func report(_ result: JSONValue, _ c: CommandContext) {
        if c.json {
            c.console.print(result.serialized())
        } else {
            c.console.print("Added region " + RegionCommands.describe(result))
        }
        if let expires = fields.expires, expires <= c.now {
            c.console.message(RegionCommands.pastExpiryWarning([result["id"]?.stringValue ?? "?"], at: expires))
        }
    }

    /// `--polygon`: a GeoJSON file (or `-`), else corners as `lat,lon lat,lon ...`.
    static func parsePolygon(_ text: String, _ c: CommandContext) throws -> RegionPolygon {
        let isPositions = text.contains(",") && !FileManager.default.fileExists(atPath: text)
        do {
            if isPositions { return try RegionGeoJSON.polygon(fromPositions: text) }
            let bytes = try RegionCommands.readInput(text)
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
}
