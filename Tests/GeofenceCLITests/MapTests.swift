import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Debian's chromium, which the map's tests need (with python3, for `Scripts/map-probe.py`, and Debian's
/// libjs-leaflet, which the page inlines).
enum MapChromium {
    static let path = "/usr/bin/chromium"
    static var available: Bool {
        FileManager.default.isExecutableFile(atPath: path)
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")
            && FileManager.default.fileExists(atPath: "/usr/share/javascript/leaflet/leaflet.js")
    }
}

/// The map page (Docs/map.md) in Debian's headless Chromium: `geofence map`'s snapshot opened offline, and
/// the live `/map` of an engine with the API on. The test places regions and vehicles at known coordinates,
/// computes where the page's documented projection (Leaflet's Web Mercator, fitted to the data) puts them,
/// and reads the screenshot's pixels there.
@Suite(
    "the map (geofence map, /map) in headless Chromium", .serialized,
    .enabled(
        if: MapChromium.available,
        "needs Debian's chromium, libjs-leaflet and python3 (apt-get install chromium libjs-leaflet; make test installs them)"
    ))
struct MapTests {
    static let chromium = MapChromium.path
    static var probe: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Scripts/map-probe.py").path
    }

    /// The window, and the map in it (the events' panel takes 320 pixels on the right).
    static let window = (width: 1000, height: 700)
    static let map = (width: 1000 - 320, height: 700)

    // What the test places: the depot of `MetricsEndpointTests.fleetEngine` (48.85, 2.35, 100 m), a square
    // yard to its east, two vehicles outside both.
    static let yard = [(48.849, 2.356), (48.849, 2.358), (48.851, 2.358), (48.851, 2.356)]
    static let truck = (48.853, 2.345)
    static let van = (48.847, 2.353)

    // The page's colours (Docs/map.md): a region's fill is #2563eb at 25 % over the background #f5f3ee, a
    // vehicle is #dc2626.
    static let background = [245, 243, 238]
    static let region = [193, 207, 237]
    static let vehicle = [220, 38, 38]

    /// Where the page puts a point, as Docs/map.md gives it: Leaflet's Web Mercator (`L.CRS.EPSG3857`), the
    /// view fitted once to the data's bounds (circles with their radius, in degrees of a sphere of
    /// 6,371,000 m as Leaflet's circles) with 40 pixels of padding and no zoom snapping, centred on the
    /// middle of the bounds' projected corners, the pixel origin rounded as Leaflet rounds it.
    static func project(_ lat: Double, _ lon: Double) -> (x: Double, y: Double) {
        let points: [(Double, Double, Double)] =
            [(48.85, 2.35, 100)] + yard.map { ($0.0, $0.1, 0) } + [(truck.0, truck.1, 0), (van.0, van.1, 0)]
        var (s, w, n, e) = (Double.infinity, Double.infinity, -Double.infinity, -Double.infinity)
        for (lat, lon, metres) in points {
            let dlat = metres / 6_371_000 * 180 / Double.pi
            let dlon = dlat / cos(lat * Double.pi / 180)
            (s, n) = (min(s, lat - dlat), max(n, lat + dlat))
            (w, e) = (min(w, lon - dlon), max(e, lon + dlon))
        }
        // Spherical Mercator at zoom 0: the world is 256 pixels.
        func world(_ lat: Double, _ lon: Double) -> (Double, Double) {
            let sine = sin(lat * Double.pi / 180)
            return (256 * (0.5 + lon / 360), 256 * (0.5 - log((1 + sine) / (1 - sine)) / 2 / (2 * Double.pi)))
        }
        let (sw, ne) = (world(s, w), world(n, e))
        let scale = min((Double(map.width) - 80) / (ne.0 - sw.0), (Double(map.height) - 80) / (sw.1 - ne.1))
        let origin = (
            ((sw.0 + ne.0) / 2 * scale - Double(map.width) / 2).rounded(),
            ((sw.1 + ne.1) / 2 * scale - Double(map.height) / 2).rounded()
        )
        let p = world(lat, lon)
        return (p.0 * scale - origin.0, p.1 * scale - origin.1)
    }

    /// The start of Debian's leaflet.js, which the page inlines.
    static var leafletStart: String {
        String(
            ((try? String(contentsOfFile: "/usr/share/javascript/leaflet/leaflet.js", encoding: .utf8)) ?? "").prefix(
                300))
    }
    /// The page's Content-Security-Policy without tiles: nothing from anywhere else.
    static let offline =
        #"content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'">"#

    /// Where to look, and what colour must be there.
    static let checks: [(what: String, lat: Double, lon: Double, at: (x: Double, y: Double), colour: [Int])] = [
        ("the depot's centre", 48.85, 2.35, region),
        ("the yard's centre", 48.85, 2.357, region),
        ("truck-1", truck.0, truck.1, vehicle),
        ("van-2", van.0, van.1, vehicle),
        ("between the depot and the yard", 48.85, 2.353, background),
        ("south of the depot", 48.8488, 2.35, background),
    ].map { (what: $0.0, lat: $0.1, lon: $0.2, at: project($0.1, $0.2), colour: $0.3) }

    /// The colours of the screenshot at `checks`' points, each checked (within 12 per channel: the
    /// renderer's blending).
    static func checkPixels(_ png: String, _ dir: TemporaryDirectory) throws {
        let points = checks.map { String(format: "%.0f,%.0f", $0.at.x, $0.at.y) }
        let out = try run("/usr/bin/python3", [probe, "pixels", png] + points, dir: dir)
        let json = try JSON.parse(out)
        #expect(json["size"]?.arrayValue?.compactMap(\.intValue) == [window.width, window.height], "\(out)")
        let colours = json["colours"]?.arrayValue ?? []
        #expect(colours.count == checks.count, "\(out)")
        for (check, colour) in zip(checks, colours) {
            let got = colour.arrayValue?.compactMap(\.intValue) ?? []
            let close = got.count == 3 && zip(got, check.colour).allSatisfy { abs($0 - $1) <= 12 }
            #expect(close, "\(check.what) at \(check.at): \(got), not \(check.colour) (screenshot \(png))")
        }
    }

    static func run(_ tool: String, _ arguments: [String], dir: TemporaryDirectory) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        let out = dir.file("tool.out")
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        process.standardError = FileHandle.nullDevice
        try GPSDHarness.withUnblockedSignals { try process.run() }
        process.waitUntilExit()
        let text = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        guard process.terminationStatus == 0 else {
            throw APIFailure(
                "\(tool) \(arguments.joined(separator: " ")) failed (\(process.terminationStatus)): \(text)")
        }
        return text
    }

    static func fix(_ device: String, _ p: (Double, Double), at t: Date) -> String {
        #"{"class":"TPV","device":"\#(device)","mode":3,"time":"\#(TimestampParser.format(t))","lat":\#(p.0),"lon":\#(p.1),"eph":5}"#
    }

    @Test("the snapshot and the live page draw the regions and vehicles where they are; a new event shows within 2 s")
    func snapshotAndLive() async throws {
        try await withCLI { cli in
            let token = try HTTPAPITests.token(cli, "map", scope: "read")
            let (daemon, feed, base, _) = try await HTTPAPITests.engine(cli)
            defer { feed.close() }
            let api = APIClient(base: base, dir: cli.dir)
            #expect(daemon.log.contains("map at \(base)/map#token=TOKEN"), "the log says where the map is")
            // The page is served without a token, and holds no data.
            let served = try api.get("/map", token: nil)
            #expect(served.status == 200 && served.headers.lowercased().contains("content-type: text/html"))
            #expect(served.body.contains(Self.leafletStart), "the live page inlines Leaflet")
            #expect(!served.body.contains("depot"), "the live page holds no data")
            #expect(served.body.contains(Self.offline), "the live page fetches nothing from elsewhere")
            #expect(try api.request("POST", "/map", token: nil).status == 405)
            let ring = (Self.yard + [Self.yard[0]]).map { "[\($0.1), \($0.0)]" }.joined(separator: ", ")
            let regions = cli.dir.file("yard.json")
            try Data(
                #"{"regions": [{"id": "yard", "name": "Yard", "polygon": {"type": "Polygon", "coordinates": [[\#(ring)]]}}]}"#
                    .utf8
            ).write(to: URL(fileURLWithPath: regions))
            let imported = try cli.run("import", regions)
            #expect(imported.status == 0, "\(imported.stderr)")
            let start = Date().addingTimeInterval(-600)
            feed.send([Self.fix("truck-1", Self.truck, at: start), Self.fix("van-2", Self.van, at: start)])
            let placed = await Wait.until(timeout: 10) {
                let v = (try? api.get("/v1/vehicles", token: token))?.json?.arrayValue ?? []
                return v.filter { $0["lastFix"] != nil }.count == 2
            }
            #expect(placed, "the engine has both vehicles")

            // The snapshot, opened offline from a file.
            let page = cli.dir.file("map.html")
            let made = try cli.run("map", "-o", page, "--json")
            #expect(made.status == 0, "\(made.stderr)")
            #expect(try JSON.parse(made.stdout)["vehicles"]?.intValue == 2, "\(made.stdout)")
            let html = try String(contentsOfFile: page, encoding: .utf8)
            #expect(html.contains(Self.leafletStart) && html.contains(Self.offline), "Leaflet inlined, nothing fetched")
            #expect(!html.contains("img-src") && !html.contains("sourceMappingURL"))
            let shot = cli.dir.file("snapshot.png")
            _ = try Self.run(
                Self.chromium,
                [
                    "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--force-device-scale-factor=1",
                    "--user-data-dir=" + cli.dir.file("chromium-profile"), "--screenshot=" + shot,
                    "--window-size=\(Self.window.width),\(Self.window.height)", "file://" + page,
                ], dir: cli.dir)
            try Self.checkPixels(shot, cli.dir)

            // The live page: drawn from the API, then following the stream.
            let live = cli.dir.file("live.png")
            let watched = cli.dir.file("watch.out")
            _ = FileManager.default.createFile(atPath: watched, contents: nil)
            let watcher = Process()
            watcher.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            watcher.arguments = [
                Self.probe, "watch", "\(base)/map#token=\(token)", "--state", "live", "--screenshot", live,
                "--events", "1", "--timeout", "30", "--size", "\(Self.window.width)x\(Self.window.height)",
                "--points", Self.checks.map { "\($0.lat),\($0.lon)" }.joined(separator: ";"),
            ]
            watcher.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: watched))
            watcher.standardError = FileHandle.nullDevice
            try GPSDHarness.withUnblockedSignals { try watcher.run() }
            func lines() -> [JSONValue] {
                ((try? String(contentsOfFile: watched, encoding: .utf8)) ?? "").split(separator: "\n")
                    .compactMap { try? JSON.parse(String($0)) }
            }
            let ready = await Wait.until(timeout: 30) { !lines().isEmpty }
            #expect(ready && lines().first?["ready"]?.stringValue == "live", "the page follows the stream: \(lines())")
            try Self.checkPixels(live, cli.dir)
            // Where the page's Leaflet map says it put each point is where the test computed (within the
            // rounding of a pixel).
            let asked = lines().first?["points"]?.arrayValue ?? []
            #expect(asked.count == Self.checks.count, "the page's points: \(lines())")
            for (check, point) in zip(Self.checks, asked) {
                let xy = point.arrayValue?.compactMap(\.doubleValue) ?? []
                #expect(
                    xy.count == 2 && abs(xy[0] - check.at.x) <= 1 && abs(xy[1] - check.at.y) <= 1,
                    "\(check.what): the page puts it at \(xy), the test computed \(check.at)")
            }

            // truck-1 drives into the depot at 10 m/s: the page must show the event within 2 s of the fixes.
            let before = Set(
                try api.get("/v1/events?latest=1000", token: token).json?["events"]?.arrayValue?
                    .compactMap { $0["id"]?.stringValue } ?? [])
            var drive: [String] = []
            var t = Date().addingTimeInterval(-300)
            for step in 0...9 {
                let f = Double(step) / 9
                drive.append(
                    Self.fix(
                        "truck-1",
                        (Self.truck.0 + (48.85 - Self.truck.0) * f, Self.truck.1 + (2.35 - Self.truck.1) * f),
                        at: t))
                t = t.addingTimeInterval(8)
            }
            drive.append(Self.fix("truck-1", (48.85, 2.35), at: t))
            let sent = Date().timeIntervalSince1970
            feed.send(drive)
            watcher.waitUntilExit()
            let shown = lines().dropFirst().first
            let id = shown?["lastEvent"]?.stringValue ?? ""
            let at = shown?["at"]?.doubleValue ?? .infinity
            #expect(!id.isEmpty && !before.contains(id), "the page showed a new event: \(lines())")
            let after = try api.get("/v1/events?latest=1000", token: token).json?["events"]?.arrayValue ?? []
            let event = after.first { $0["id"]?.stringValue == id }
            #expect(
                event?["type"]?.stringValue == "enter" && event?["region"]?.stringValue == "depot"
                    && event?["subject"]?.stringValue == "truck-1",
                "the event shown is truck-1 entering the depot: \(event.map { $0.serialized() } ?? "none")")
            #expect(at - sent < 2, "shown \(String(format: "%.3f", at - sent)) s after the fixes were sent")
            print("map: a new event shown \(String(format: "%.3f", at - sent)) s after its fixes were sent")

            // The newest events, where the page starts.
            let ids = after.compactMap { $0["id"]?.stringValue }
            let latest = try api.get("/v1/events?latest=3", token: token)
            #expect(latest.json?["events"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == Array(ids.suffix(3)))
            #expect(latest.json?["last"]?.stringValue == ids.last, "\(latest)")
            for bad in ["latest=0", "latest=1001", "latest=x", "latest=2&after=\(ids[0])"] {
                let refused = try api.get("/v1/events?\(bad)", token: token)
                #expect(refused.status == 400 && refused.errorCode == "bad-request", "\(bad): \(refused)")
            }
            #expect(await daemon.stop() != nil)
        }
    }

    /// A loopback port no one listens on now.
    static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { throw APIFailure("cannot find a free port") }
        return UInt16(bigEndian: address.sin_port)
    }

    /// An engine with the API on 127.0.0.1:`port`, fed JSON lines through a FIFO of its own. The FIFO is
    /// opened once the engine reads it (an engine that did not start fails the test, and does not hang it).
    static func engine(
        _ cli: CLI, port: UInt16, name: String, _ more: [String] = [], environment: [String: String] = [:]
    ) async throws -> (
        DaemonProcess, FileHandle
    ) {
        let fifo = cli.dir.file(name + ".fifo")
        guard mkfifo(fifo, 0o600) == 0 else { throw APIFailure("cannot make \(fifo)") }
        let daemon = try DaemonProcess(
            [
                "run", "--state-dir", cli.stateDir, "--source", "json:" + fifo, "--metrics", "127.0.0.1:\(port)",
                "--api", "on",
            ] + more, logPath: cli.dir.file(name + ".log"),
            environment: cli.environment.merging(environment) { $1 })
        var fd: Int32 = -1
        // Opening a FIFO for writing without blocking fails (ENXIO) until a reader has it open.
        let opened = await Wait.until(timeout: 10) {
            fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            return fd >= 0 || !daemon.process.isRunning
        }
        guard opened, fd >= 0 else { throw APIFailure("the engine did not start:\n\(daemon.log)") }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        guard await daemon.waitForLog("HTTP API at", timeout: 10) else {
            throw APIFailure("the engine did not serve its API:\n\(daemon.log)")
        }
        return (daemon, FileHandle(fileDescriptor: fd, closeOnDealloc: true))
    }

    @Test("the live page follows an engine restarted on the same address, and misses no event")
    func resumes() async throws {
        try await withCLI { cli in
            let token = try HTTPAPITests.token(cli, "map", scope: "read")
            let port = try Self.freePort()
            #expect(
                try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100").status == 0)
            let (first, feed) = try await Self.engine(cli, port: port, name: "first")
            let base = "http://127.0.0.1:\(port)"
            let api = APIClient(base: base, dir: cli.dir)
            let start = Date().addingTimeInterval(-600)
            feed.write(
                Data(
                    (Self.fix("truck-1", Self.truck, at: start) + "\n" + Self.fix("van-2", Self.van, at: start) + "\n")
                        .utf8))
            let placed = await Wait.until(timeout: 10) {
                ((try? api.get("/v1/vehicles", token: token))?.json?.arrayValue ?? []).count == 2
            }
            #expect(placed, "the engine has both vehicles")

            let watched = cli.dir.file("watch.out")
            _ = FileManager.default.createFile(atPath: watched, contents: nil)
            let watcher = Process()
            watcher.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            watcher.arguments = [
                Self.probe, "watch", "\(base)/map#token=\(token)", "--state", "live", "--screenshot",
                cli.dir.file("live.png"), "--events", "1000", "--timeout", "60",
            ]
            watcher.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: watched))
            watcher.standardError = FileHandle.nullDevice
            try GPSDHarness.withUnblockedSignals { try watcher.run() }
            defer {
                watcher.terminate()
                watcher.waitUntilExit()
            }
            func lines() -> [JSONValue] {
                ((try? String(contentsOfFile: watched, encoding: .utf8)) ?? "").split(separator: "\n")
                    .compactMap { try? JSON.parse(String($0)) }
            }
            #expect(await Wait.until(timeout: 30) { !lines().isEmpty }, "the page follows the stream")

            // The engine goes away under the page's stream, and comes back on the same address; the fixes
            // arrive while the page may still be reconnecting.
            #expect(await first.stop() != nil)
            try feed.close()
            // The second engine names a tile server for its map: the page it serves may load images from it.
            let (second, feed2) = try await Self.engine(
                cli, port: port, name: "second", ["--map-tiles", "https://tile.openstreetmap.org/{z}/{x}/{y}.png"])
            defer { try? feed2.close() }
            feed2.write(Data((Self.fix("truck-1", (48.8505, 2.3495), at: start.addingTimeInterval(60)) + "\n").utf8))
            feed2.write(Data((Self.fix("truck-1", (48.85, 2.35), at: start.addingTimeInterval(70)) + "\n").utf8))
            func outbox() -> [JSONValue] {
                (try? api.get("/v1/events?latest=50", token: token))?.json?["events"]?.arrayValue ?? []
            }
            let entered = await Wait.until(timeout: 10) {
                outbox().contains { $0["type"]?.stringValue == "enter" && $0["subject"]?.stringValue == "truck-1" }
            }
            #expect(entered, "truck-1 entered the depot: \(outbox())")
            // The page lists exactly the outbox's latest events: none missed across the restart, none twice.
            let same = await Wait.until(timeout: 10) {
                let listed = lines().last?["ids"]?.arrayValue?.compactMap(\.stringValue) ?? []
                return listed == outbox().compactMap { $0["id"]?.stringValue }.reversed()
            }
            let tiled = try api.get("/map", token: nil).body
            #expect(
                tiled.contains(
                    Self.offline.replacingOccurrences(
                        of: "'self'\">", with: "'self'; img-src https://tile.openstreetmap.org\">")))
            #expect(tiled.contains(#"const TILES = {"url":"https://tile.openstreetmap.org/{z}/{x}/{y}.png""#))
            #expect(same, "the page lists \(lines().last.map { $0.serialized() } ?? "nothing"); the outbox \(outbox())")
            #expect(await second.stop() != nil)
        }
    }

    @Test("an engine without Leaflet serves the SVG page at /map, and its log says so once")
    func withoutLeaflet() async throws {
        try await withCLI { cli in
            let port = try Self.freePort()
            let (daemon, feed) = try await Self.engine(
                cli, port: port, name: "bare", environment: ["GEOFENCE_LEAFLET_DIR": cli.dir.file("no-leaflet")])
            defer { try? feed.close() }
            let page = try APIClient(base: "http://127.0.0.1:\(port)", dir: cli.dir).get("/map", token: nil)
            #expect(page.status == 200 && page.body.contains("<svg id=\"map\"") && !page.body.contains("L.map("))
            #expect(await daemon.waitForLog("Leaflet is not in", timeout: 10), "\(daemon.log)")
            let said = daemon.log.components(separatedBy: "Leaflet is not in \(cli.dir.file("no-leaflet"))").count - 1
            #expect(said == 1, "\(daemon.log)")
            #expect(await daemon.stop() != nil)
        }
    }

    @Test("geofence map: bad input is one line and writes nothing; --json without --output is the data")
    func badInput() throws {
        try withCLI { cli in
            for bad in [["--events", "-1"], ["--events", "1001"], ["--events", "x"]] {
                let r = try cli.run(["map"] + bad)
                #expect(r.status == 64, "\(bad): \(r.stderr)")
                // One line that says what is wrong (then the usage, as every command's usage error).
                #expect(
                    r.stdout.isEmpty && r.stderr.hasPrefix("Error: invalid value for --events"), "\(bad): \(r.stderr)")
            }
            let tiles = "https://{s}.tile.openstreetmap.org/{z}/{x}/{y}.png"
            for bad in [
                "ftp://tiles/{z}/{x}/{y}.png", "https://tiles/{z}/{x}.png", "https://ti'les/{z}/{x}/{y}.png",
                "https://tiles/{z}/{x}/{y}.png; script-src *", "https:///{z}/{x}/{y}.png", "https://a{s}b/{z}/{x}/{y}",
            ] {
                let r = try cli.run("map", "--tiles", bad, "-o", cli.dir.file("tiled.html"))
                #expect(r.status == 64 && r.stderr.hasPrefix("Error: invalid value for --tiles"), "\(bad): \(r.stderr)")
                #expect(!FileManager.default.fileExists(atPath: cli.dir.file("tiled.html")), "\(bad) wrote nothing")
                let run = try cli.run("run", "--metrics", "127.0.0.1:0", "--api", "on", "--map-tiles", bad)
                #expect(run.status == 64 && run.stderr.hasPrefix("Error: invalid value for --map-tiles"), "\(run)")
            }
            let noAPI = try cli.run("run", "--metrics", "127.0.0.1:0", "--map-tiles", tiles)
            #expect(noAPI.status == 64 && noAPI.stderr.hasPrefix("Error: --map-tiles is for the map of --api on"))
            // Tiles opted into: images from that server (any of its {s} subdomains), nothing else.
            let tiled = try cli.run("map", "--tiles", tiles)
            #expect(tiled.status == 0, "\(tiled.stderr)")
            #expect(
                tiled.stdout.contains(
                    Self.offline.replacingOccurrences(
                        of: "'self'\">", with: "'self'; img-src https://*.tile.openstreetmap.org\">")),
                "the CSP allows the tiles' server only")
            #expect(
                tiled.stdout.contains(
                    #"const TILES = {"url":"\#(tiles)","attribution":"© OpenStreetMap contributors"}"#))
            // Without Leaflet: the SVG page, and standard error says so, once.
            let bare = try cli.run(["map"], environment: ["GEOFENCE_LEAFLET_DIR": cli.dir.file("no-leaflet")])
            #expect(bare.status == 0 && bare.stdout.contains("<svg id=\"map\"") && !bare.stdout.contains("L.map("))
            #expect(
                bare.stderr == "Leaflet is not in \(cli.dir.file("no-leaflet")) (apt-get install libjs-leaflet): "
                    + "the map is drawn as a plain SVG\n", "\(bare.stderr)")
            let withLeaflet = try cli.run("map")
            #expect(withLeaflet.stdout.contains("L.map(") && withLeaflet.stderr.isEmpty, "\(withLeaflet.stderr)")
            let unwritable = try cli.run("map", "-o", cli.dir.file("no/such/dir/map.html"))
            #expect(unwritable.status == 73 && unwritable.stderr.split(separator: "\n").count == 1, "\(unwritable)")
            _ = try cli.run(
                "add", "--id", "depot", "--name", "</script><b>x", "--lat", "48.85", "--lon", "2.35", "--radius", "100")
            let data = try cli.run("map", "--json")
            #expect(data.status == 0, "\(data.stderr)")
            #expect(try JSON.parse(data.stdout)["regions"]?.arrayValue?.count == 1, "\(data.stdout)")
            // A region's name cannot end the page's script.
            let page = try cli.run("map")
            #expect(page.stdout.hasPrefix("<!DOCTYPE html>") && !page.stdout.contains("</script><b>"))
        }
    }
}
