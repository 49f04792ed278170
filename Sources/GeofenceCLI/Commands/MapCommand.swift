import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

/// `geofence map`: a snapshot of the map page (Docs/map.md), the data in it, for a browser offline.
struct MapCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "map",
        abstract: "Write a map of the regions, the vehicles and the latest events as one HTML page.",
        discussion: """
            The page is self-contained: Leaflet (Debian's libjs-leaflet) and the page's own script and style \
            are inside, and it fetches nothing (no fonts or libraries, and no map tiles unless --tiles names \
            a tile server), so it opens offline in any browser. It draws the regions (circles and polygons, \
            with their names; green while a vehicle is inside), each vehicle's last fix with its accuracy, a \
            scale bar and a graticule (or the tiles), with pan and zoom, and lists the latest events. It is a \
            snapshot of the store as it is now. Without Leaflet installed, the regions and vehicles are drawn \
            on a plain SVG, and standard error says so.

            For a live map, serve the HTTP API (geofence run --metrics ADDRESS --api on) and open \
            http://ADDRESS/map#token=TOKEN with a read token (geofence token add NAME --scope read): the same \
            page, which reads the API and follows its event stream. The token stays in the URL's fragment, \
            which a browser never sends. With --json and no --output, the data the page would hold is printed \
            instead of the page; with --output, what was written.
            """,
        options: [
            .value("--output", short: "-o", valueName: "file", help: "Write to this file instead of stdout."),
            .value(
                "--events", valueName: "n", help: "How many of the latest events to list (0 to 1000).", default: "50"),
            .value(
                "--tiles", valueName: "url-template",
                help: """
                    Draw on map tiles from this server (Leaflet's template, such as \
                    https://tile.openstreetmap.org/{z}/{x}/{y}.png) when the page is opened online; the page may \
                    then load images from that server only. Off unless given: a graticule, and no network.
                    """),
        ],
        examples: [
            Example("A map to open in a browser:", "geofence map -o map.html"),
            Example("The same, to stdout:", "geofence map > map.html"),
            Example(
                "On OpenStreetMap's tiles, for a browser online:",
                "geofence map --tiles 'https://tile.openstreetmap.org/{z}/{x}/{y}.png' -o map.html"),
            Example("The data of the map, as JSON:", "geofence map --json --events 10"),
        ])

    /// The file to write; nil for standard output (`-` or no `--output`).
    let output: String?
    let events: Int
    let tiles: MapTiles?

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        output = a.value("--output").flatMap { $0 == "-" ? nil : $0 }
        let n = try a.integer("--events") ?? 50
        guard (0...1000).contains(n) else { throw c.usage("invalid value for --events: must be 0 to 1000") }
        events = n
        do {
            tiles = try a.value("--tiles").map { try MapTiles($0) }
        } catch {
            throw c.usage("invalid value for --tiles: \(error)")
        }
    }

    func run(_ c: CommandContext) throws {
        let regions = try c.call(.list).arrayValue ?? []
        let store = try c.openStore()
        let vehicles = try store.monitorState.vehicles().map { JSONValue.object(VehicleReport.json($0)) }
        let latest = try events == 0 ? [] : store.outbox.latest(limit: events).map { try JSON.parse($0.body) }
        if c.json && output == nil {
            let data: JSONObject = [
                "regions": .array(regions), "vehicles": .array(vehicles), "events": .array(latest),
                "made": .string(TimestampParser.format(c.now)),
            ]
            c.console.print(JSONValue.object(data).serialized())
            return
        }
        let page = MapPage.snapshot(regions: regions, vehicles: vehicles, events: latest, made: c.now, tiles: tiles)
        guard let output else {
            c.console.write(page)
            if let missing = MapPage.leafletMissing { c.console.message(missing) }
            return
        }
        do {
            try Data(page.utf8).write(to: URL(fileURLWithPath: output), options: .atomic)
        } catch {
            throw CommandFailure("cannot write \(output): \(error.localizedDescription)", exitCode: .cantCreate)
        }
        if let missing = MapPage.leafletMissing { c.console.message(missing) }
        if c.json {
            c.console.print(
                JSONValue.object([
                    "output": .string(output), "regions": .number(Double(regions.count)),
                    "vehicles": .number(Double(vehicles.count)), "events": .number(Double(latest.count)),
                ]).serialized())
        } else {
            c.console.message(
                "Wrote a map of \(regions.count) regions, \(vehicles.count) vehicles and \(latest.count) events to \(output)"
            )
        }
    }
}
