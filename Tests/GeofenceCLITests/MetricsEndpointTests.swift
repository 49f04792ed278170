import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// One HTTP/1.0 GET on loopback: the status code and the body (nil when nothing answered).
func httpGet(port: UInt16, path: String, method: String = "GET") -> (status: Int, body: String)? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
    guard connected else { return nil }
    let request = Array("\(method) \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
    guard send(fd, request, request.count, Int32(MSG_NOSIGNAL)) == request.count else { return nil }
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 { break }
        response += buffer[0..<n]
    }
    let text = String(decoding: response, as: UTF8.self)
    guard let head = text.range(of: "\r\n\r\n"), let status = Int(text.split(separator: " ").dropFirst().first ?? "")
    else { return nil }
    return (status, String(text[head.upperBound...]))
}

@Suite("metrics and health over HTTP (--metrics)")
struct MetricsEndpointTests {
    /// The port the engine logged (`metrics at http://127.0.0.1:PORT/metrics`), when given port 0.
    static func port(_ daemon: DaemonProcess) async -> UInt16? {
        guard await daemon.waitForLog("/metrics", timeout: 10) else { return nil }
        guard let range = daemon.log.range(of: #"http://127\.0\.0\.1:[0-9]+/metrics"#, options: .regularExpression)
        else { return nil }
        let url = daemon.log[range]
        return UInt16(url.split(separator: ":").last?.split(separator: "/").first ?? "")
    }

    /// An engine with metrics on a free port, fed JSON lines through a FIFO, watching one region (the depot
    /// of `DiskFaultTests.trips`).
    static func fleetEngine(_ cli: CLI, environment: [String: String] = [:], arguments: [String] = []) throws -> (
        DaemonProcess, FleetFeed
    ) {
        try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100")
        let fifo = cli.dir.file("fleet.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let daemon = try DaemonProcess(
            ["run", "--state-dir", cli.stateDir, "--source", "json:" + fifo, "--metrics", "127.0.0.1:0"] + arguments,
            logPath: cli.dir.file("run.log"), environment: cli.environment.merging(environment) { $1 })
        return (daemon, try FleetFeed(fifo: fifo))
    }

    /// Parses Prometheus text with the reference parser (the Python client's), into `name{labels}` → value.
    static func parse(_ text: String) throws -> [String: Double] {
        let script = """
            import json, sys
            from prometheus_client.parser import text_string_to_metric_families
            out = {}
            for family in text_string_to_metric_families(sys.stdin.read()):
                for s in family.samples:
                    labels = ",".join(f'{k}={v}' for k, v in sorted(s.labels.items()))
                    out[s.name + "{" + labels + "}"] = s.value
            print(json.dumps(out))
            """
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        python.arguments = ["-c", script]
        let input = Pipe()
        let output = Pipe()
        let errors = Pipe()
        python.standardInput = input
        python.standardOutput = output
        python.standardError = errors
        try python.run()
        input.fileHandleForWriting.write(Data(text.utf8))
        try input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let problem = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        python.waitUntilExit()
        guard python.terminationStatus == 0 else {
            throw CommandFailureText(
                "the Prometheus parser refused the text (is python3-prometheus-client installed? `make test` installs it): \(problem)"
            )
        }
        var samples: [String: Double] = [:]
        for (key, value) in try JSON.parse(String(decoding: data, as: UTF8.self)).objectValue ?? [:] {
            samples[key] = value.doubleValue
        }
        return samples
    }

    struct CommandFailureText: Error, CustomStringConvertible {
        var description: String
        init(_ d: String) { description = d }
    }

    @Test("after a drive, /metrics parses as Prometheus text and its counters equal status --json's")
    func countersMatchStatus() async throws {
        try await withCLI { cli in
            let (daemon, feed) = try Self.fleetEngine(cli)
            defer { feed.close() }
            let start = Date().addingTimeInterval(-3600)
            var lines = DiskFaultTests.trips(2, from: start)
            // Refusals of several kinds: a line that is no JSON, one without a position, a repeat of an epoch, a jump.
            lines.insert("not json", at: 3)
            lines.insert(#"{"class":"TPV","device":"truck-1","mode":3}"#, at: 5)
            lines.insert(lines[7], at: 8)
            let far = TimestampParser.format(start.addingTimeInterval(8 * 9 + 1))
            lines.insert(
                #"{"class":"TPV","device":"truck-1","mode":3,"time":"\#(far)","lat":10,"lon":10,"eph":5}"#, at: 11)
            feed.send(lines)
            let port = try #require(await Self.port(daemon), "\(daemon.log)")

            let status = try await FleetSourceTests.status(cli) {
                $0["data"]?["lines"]?.intValue == lines.count
                    && $0["engine"]?["fixes"]?["accepted"]?.intValue.map { $0 > 0 } == true
            }
            // The engine publishes every tenth of a second: once status has all the lines, ask both again.
            try await Task.sleep(for: .milliseconds(300))
            let settled = try await FleetSourceTests.status(cli) { _ in true }
            let page = try #require(httpGet(port: port, path: "/metrics"))
            #expect(page.status == 200)
            let samples = try Self.parse(page.body)

            let fixes = try #require(settled["engine"]?["fixes"], "\(status)")
            #expect(samples["geofence_fixes_total{result=accepted}"] == fixes["accepted"]?.doubleValue, "\(page.body)")
            let refused = fixes["refused"]?.objectValue ?? [:]
            #expect(refused["implausible-jump"]?.intValue == 1, "\(fixes)")
            #expect(refused["duplicate"]?.intValue == 1, "\(fixes)")
            for reason in FixRejection.allCases {
                #expect(
                    samples["geofence_fixes_total{reason=\(reason.rawValue),result=refused}"]
                        == (refused[reason.rawValue]?.doubleValue ?? 0), "\(reason)")
            }
            let events = settled["engine"]?["eventsSinceStart"]?.objectValue ?? [:]
            #expect(events["enter"]?.intValue == 2, "\(settled)")
            #expect(events["exit"]?.intValue == 2)
            for (type, n) in events {
                #expect(samples["geofence_events_total{type=\(type)}"] == n.doubleValue, "\(type)")
            }
            let data = settled["data"]
            #expect(samples["geofence_source_messages_total{kind=json}"] == data?["lines"]?.doubleValue)
            #expect(samples["geofence_source_unusable_total{reason=not-json}"] == 1)
            #expect(samples["geofence_source_unusable_total{reason=no-position}"] == 1)
            #expect(samples["geofence_outbox_events{}"] == settled["outbox"]?["events"]?.doubleValue)
            #expect(samples["geofence_regions{status=monitoring}"] == 1)
            #expect(samples["geofence_vehicles{}"] == 1)
            #expect(samples["geofence_source_up{}"] == 1)
            #expect(samples["geofence_healthy{}"] == 1)
            // Every accepted fix that changed something was committed, and timed.
            #expect((samples["geofence_fix_commit_seconds_count{}"] ?? 0) > 0)
            #expect(
                samples["geofence_fix_commit_seconds_bucket{le=+Inf}"] == samples["geofence_fix_commit_seconds_count{}"]
            )

            #expect(httpGet(port: port, path: "/healthz")?.status == 200)
            #expect(httpGet(port: port, path: "/healthz")?.body == "ok\n")
            #expect(httpGet(port: port, path: "/nothing")?.status == 404)
            #expect(httpGet(port: port, path: "/metrics", method: "POST")?.status == 405)
            let text = try cli.run(["status", "--wait", "1s"], environment: try FleetSourceTests.deadGPSD())
            #expect(
                text.stdout.contains("3 refused (1 duplicate, 1 implausible-jump, 1 invalid-coordinates)"),
                "\(text.stdout)"
            )
            feed.close()
            #expect(await daemon.stop() != nil)
        }
    }

    @Test("/healthz turns 503 and says why while the store refuses writes, and 200 again when it takes them")
    func healthFollowsTheStore() async throws {
        try await withCLI { cli in
            let (daemon, feed) = try Self.fleetEngine(cli)
            defer { feed.close() }
            let trips = DiskFaultTests.trips(2, from: Date().addingTimeInterval(-3600))
            feed.send(Array(trips.prefix(6)))
            let port = try #require(await Self.port(daemon))
            #expect(await Self.health(port: port, until: { $0.status == 200 }, timeout: 10)?.status == 200)

            // Another writer holds the store's write lock: the engine's next commit (an event) waits, then fails.
            let holder = try DatabaseConnection(path: cli.stateDir + "/" + StateStore.fileName)
            try holder.execute("BEGIN IMMEDIATE")
            feed.send(Array(trips[6..<12]))
            let sick = await Self.health(port: port, until: { $0.status == 503 }, timeout: 20)
            #expect(sick?.status == 503, "\(daemon.log)")
            #expect(sick?.body.hasPrefix("unhealthy\n") == true, "\(sick?.body ?? "")")
            #expect(sick?.body.contains("store: refuses writes") == true || sick?.body.contains("monitor:") == true)
            let gauges = try Self.parse(try #require(httpGet(port: port, path: "/metrics")).body)
            #expect(gauges["geofence_healthy{}"] == 0)
            try holder.execute("ROLLBACK")

            let well = await Self.health(port: port, until: { $0.status == 200 }, timeout: 20)
            #expect(well?.status == 200, "\(daemon.log)")
            // Nothing was lost meanwhile: the trips' events are all in the store.
            let events = try cli.run("events", "--json").stdout
            #expect(events.components(separatedBy: #""type":"exit""#).count - 1 >= 1, "\(events)")
            feed.close()
            #expect(await daemon.stop() != nil)
        }
    }

    @Test("a monitor held stuck turns /healthz to 503 (monitor: its loop has not run), and 200 once it runs")
    func healthFollowsTheMonitor() async throws {
        try await withCLI { cli in
            let stall = cli.dir.file("stall")
            let (daemon, feed) = try Self.fleetEngine(cli, environment: ["GEOFENCE_TEST_STALL_MONITOR": stall])
            defer { feed.close() }
            feed.send(Array(DiskFaultTests.trips(1, from: Date().addingTimeInterval(-3600)).prefix(4)))
            let port = try #require(await Self.port(daemon))
            #expect(await Self.health(port: port, until: { $0.status == 200 }, timeout: 10)?.status == 200)
            // The monitor's own thread blocks (debug builds' fault injection) while the file exists.
            #expect(FileManager.default.createFile(atPath: stall, contents: nil))
            let stuck = await Self.health(port: port, until: { $0.status == 503 }, timeout: 15)
            #expect(stuck?.status == 503, "\(daemon.log)")
            #expect(stuck?.body.contains("monitor: its loop has not run for") == true, "\(stuck?.body ?? "")")
            try FileManager.default.removeItem(atPath: stall)
            #expect(await Self.health(port: port, until: { $0.status == 200 }, timeout: 10)?.status == 200)
            feed.close()
            #expect(await daemon.stop() != nil)
        }
    }

    static func health(
        port: UInt16, until done: ((status: Int, body: String)) -> Bool, timeout: Double
    ) async -> (status: Int, body: String)? {
        var last: (status: Int, body: String)?
        _ = await Wait.until(timeout: timeout, every: .milliseconds(100)) {
            last = httpGet(port: port, path: "/healthz")
            return last.map(done) ?? false
        }
        return last
    }

    @Test("a bad --metrics is a usage error; a port in use is one clear line and no engine")
    func badAddress() throws {
        try withCLI { cli in
            let bad = try cli.run(["run", "--source", "json:/dev/null", "--metrics", "metrics.example:80"])
            #expect(bad.status == 64)
            #expect(bad.stderr.contains("invalid value for --metrics"), "\(bad.stderr)")
            let env = try cli.run(
                ["run", "--source", "json:/dev/null"], environment: ["GEOFENCE_METRICS": "127.0.0.1:99999"])
            #expect(env.status == 64, "\(env.stderr)")

            // Something already listens on the port.
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, length) == 0 && listen(fd, 1) == 0 && getsockname(fd, $0, &length) == 0
                }
            }
            #expect(bound)
            let port = UInt16(bigEndian: address.sin_port)
            let busy = try cli.run(["run", "--source", "json:/dev/null", "--metrics", "127.0.0.1:\(port)"])
            #expect(busy.status == 69, "\(busy.stderr)")
            #expect(busy.stderr.contains("cannot serve metrics on 127.0.0.1:\(port)"), "\(busy.stderr)")
            #expect(busy.stderr.split(separator: "\n").count == 1, "\(busy.stderr)")
        }
    }
}
