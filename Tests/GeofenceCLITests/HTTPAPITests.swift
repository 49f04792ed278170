import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// One answer of the API, as curl got it.
struct APIAnswer: CustomStringConvertible {
    var status: Int
    var headers: String
    var body: String

    var json: JSONValue? { try? JSON.parse(body) }
    /// The error's code of a JSON error (`{"error": {"code": ...}}`).
    var errorCode: String? { json?["error"]?["code"]?.stringValue }
    var description: String { "\(status) \(body)" }
}

/// An HTTP API client: curl (Debian's), as the docs use it.
struct APIClient {
    let base: String
    let dir: TemporaryDirectory
    /// More curl options (`--cacert FILE`).
    var options: [String] = []

    func request(
        _ method: String, _ path: String, token: String?, body: [UInt8]? = nil, headers: [String] = []
    ) throws -> APIAnswer {
        let out = dir.file("curl.body")
        let head = dir.file("curl.headers")
        var arguments = ["-sS", "-X", method, "-o", out, "-D", head, "-w", "%{http_code}"] + options
        if let token { arguments += ["-H", "Authorization: Bearer \(token)"] }
        for header in headers { arguments += ["-H", header] }
        if let body {
            let file = dir.file("curl.request")
            try Data(body).write(to: URL(fileURLWithPath: file))
            arguments += ["--data-binary", "@" + file, "-H", "Content-Type: application/json"]
        }
        arguments.append(base + path)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try GPSDHarness.withUnblockedSignals { try process.run() }
        let code = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return APIAnswer(
            status: Int(code) ?? 0, headers: (try? String(contentsOfFile: head, encoding: .utf8)) ?? "",
            body: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "")
    }

    /// `count` requests in one curl (one kept-alive connection, as fast as they go): each one's status and
    /// body, and all the headers.
    func repeated(_ method: String, _ path: String, token: String, count: Int) throws -> (
        answers: [APIAnswer], headers: String
    ) {
        let head = dir.file("curl.headers")
        var arguments = [
            "-sS", "-X", method, "-D", head, "-w", "%{http_code}\n", "-H", "Authorization: Bearer \(token)",
        ]
        for i in 0..<count { arguments += ["-o", dir.file("curl.body.\(i)"), base + path] }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try GPSDHarness.withUnblockedSignals { try process.run() }
        let codes = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let answers = codes.split(separator: "\n").enumerated().map { i, code in
            APIAnswer(
                status: Int(code) ?? 0, headers: "",
                body: (try? String(contentsOfFile: dir.file("curl.body.\(i)"), encoding: .utf8)) ?? "")
        }
        return (answers, (try? String(contentsOfFile: head, encoding: .utf8)) ?? "")
    }

    func get(_ path: String, token: String?, headers: [String] = []) throws -> APIAnswer {
        try request("GET", path, token: token, headers: headers)
    }
}

/// A Server-Sent Events client on a plain socket (HTTP/1.0, so the body is the stream itself): reads the
/// events as they come, and can drop the connection at any moment, as a network does.
final class SSEClient {
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var headerDone = false
    private(set) var status = 0

    init(port: UInt16, token: String, lastEventID: String? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
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
        guard connected else { throw APIFailure("cannot connect to 127.0.0.1:\(port)") }
        var request = "GET /v1/events/stream HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
        if let lastEventID { request += "Last-Event-ID: \(lastEventID)\r\n" }
        request += "\r\n"
        let bytes = Array(request.utf8)
        guard send(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count else {
            throw APIFailure("cannot send the request")
        }
    }

    deinit { close(fd) }

    /// Drops the connection (no goodbye).
    func drop() { shutdown(fd, Int32(SHUT_RDWR)) }

    /// Reads until the answer's head and `count` events have come (id and data each), or `timeout` seconds;
    /// returns the events.
    func events(_ count: Int, timeout: Double) -> [(id: String, data: String)] {
        var found: [(id: String, data: String)] = []
        let deadline = Date().addingTimeInterval(timeout)
        var chunk = [UInt8](repeating: 0, count: 65536)
        while (found.count < count || !headerDone) && Date() < deadline {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n == 0 { break }
            if n > 0 { buffer += chunk[0..<n] }
            if !headerDone, let end = find([13, 10, 13, 10]) {
                let head = String(decoding: buffer[..<end], as: UTF8.self)
                status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
                buffer.removeFirst(end + 4)
                headerDone = true
            }
            guard headerDone else { continue }
            while found.count < count, let end = find([10, 10]) {
                let block = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeFirst(end + 2)
                var id: String?
                var data: String?
                for line in block.split(separator: "\n") {
                    if line.hasPrefix("id: ") { id = String(line.dropFirst(4)) }
                    if line.hasPrefix("data: ") { data = String(line.dropFirst(6)) }
                }
                if let id, let data { found.append((id, data)) }
            }
        }
        return found
    }

    private func find(_ pattern: [UInt8]) -> Int? {
        guard buffer.count >= pattern.count else { return nil }
        for i in 0...(buffer.count - pattern.count) where Array(buffer[i..<(i + pattern.count)]) == pattern {
            return i
        }
        return nil
    }
}

struct APIFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// One engine at a time: the suite starts nine, each with its curl processes, which would otherwise crowd
/// out the timing of other suites' engines on a small machine.
@Suite("the HTTP API (run --api on)", .serialized)
struct HTTPAPITests {
    /// An engine with the API on a free port, fed JSON lines through a FIFO, watching the depot of
    /// `DiskFaultTests.trips`; and its API's base URL and port.
    static func engine(_ cli: CLI, _ extra: [String] = [], scheme: String = "http") async throws -> (
        DaemonProcess, FleetFeed, base: String, port: UInt16
    ) {
        let (daemon, feed) = try MetricsEndpointTests.fleetEngine(cli, arguments: ["--api", "on"] + extra)
        guard await daemon.waitForLog("HTTP API at", timeout: 10),
            let range = daemon.log.range(
                of: #"\#(scheme)://127\.0\.0\.1:[0-9]+/v1/"#, options: .regularExpression),
            let port = UInt16(daemon.log[range].split(separator: ":").last?.split(separator: "/").first ?? "")
        else {
            throw APIFailure("the engine did not say where its API is:\n\(daemon.log)")
        }
        return (daemon, feed, "\(scheme)://127.0.0.1:\(port)", port)
    }

    static func token(_ cli: CLI, _ name: String, scope: String) throws -> String {
        let made = try cli.run("token", "add", name, "--scope", scope)
        #expect(made.status == 0, "\(made.stderr)")
        return made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("tokens: none, unknown, malformed or removed is 401; a read token cannot write (403); stored hashed")
    func tokensAndScopes() async throws {
        try await withCLI { cli in
            let reader = try Self.token(cli, "dashboard", scope: "read")
            let writer = try Self.token(cli, "backend", scope: "write")
            #expect(reader.hasPrefix("gft_") && reader.count == 68, "\(reader)")
            let (daemon, feed, base, _) = try await Self.engine(cli)
            defer { feed.close() }
            let api = APIClient(base: base, dir: cli.dir)

            for (token, headers) in [
                (nil, [String]()), ("gft_" + String(repeating: "0", count: 64), []),
                (nil, ["Authorization: Basic eDp5"]),
            ] as [(String?, [String])] {
                let answer = try api.get("/v1/status", token: token, headers: headers)
                #expect(answer.status == 401 && answer.errorCode == "unauthorized", "\(answer)")
                #expect(answer.headers.contains("WWW-Authenticate: Bearer"), "\(answer.headers)")
            }
            // Unknown paths say nothing to a client without a token.
            #expect(try api.get("/v1/nothing", token: nil).status == 401)
            #expect(try api.get("/v1/nothing", token: reader).status == 404)

            let region = Array(#"{"lat": 48.86, "lon": 2.35, "radius": 50}"#.utf8)
            let refused = try api.request("PUT", "/v1/regions/office", token: reader, body: region)
            #expect(refused.status == 403 && refused.errorCode == "permission-denied", "\(refused)")
            #expect(try api.request("DELETE", "/v1/regions/depot", token: reader).status == 403)
            #expect(try api.request("POST", "/v1/regions:import", token: reader, body: region).status == 403)
            #expect(try cli.ids() == ["depot"], "a refused write changed nothing")
            let put = try api.request("PUT", "/v1/regions/office", token: writer, body: region)
            #expect(put.status == 200 && put.json?["id"]?.stringValue == "office", "\(put)")
            #expect(try api.get("/v1/regions/office", token: reader).status == 200)

            // The store has the hash, never the token.
            let listed = try cli.run("token", "list", "--json")
            #expect(listed.stdout.contains("\"dashboard\"") && !listed.stdout.contains(reader), "\(listed.stdout)")
            let store = try StateStore(directory: cli.stateDir, options: .init(readOnly: true))
            let hashes = try store.tokens.all().map(\.hash)
            #expect(hashes.count == 2 && hashes.allSatisfy { $0.count == 64 })
            let sha = try Self.sha256(reader)
            #expect(hashes.contains(sha), "the stored hash is the token's SHA-256 (sha256sum: \(sha))")
            for file in ["geofence.db", "geofence.db-wal"] {
                let bytes = FileManager.default.contents(atPath: cli.stateDir + "/" + file) ?? Data()
                #expect(bytes.range(of: Data(reader.utf8)) == nil, "\(file) holds the token itself")
            }

            // A token removed while the engine runs is refused from the next request on.
            #expect(try cli.run("token", "remove", "dashboard").status == 0)
            #expect(try api.get("/v1/status", token: reader).status == 401)
            // The status says who asks: the token.
            let status = try api.get("/v1/status", token: writer)
            #expect(status.status == 200, "\(status)")
            #expect(status.json?["you"]?["token"]?.stringValue == "backend", "\(status)")
            #expect(status.json?["services"]?.stringValue == "on")
            #expect(status.json?["regions"] != nil && status.json?["source"] != nil, "the four questions: \(status)")
            #expect(await daemon.stop() != nil)
        }
    }

    static func sha256(_ text: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(Data(text.utf8))
        try input.fileHandleForWriting.close()
        let out = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return String(out.prefix(64))
    }

    @Test(
        "regions: put, get, replace, delete; bad, malformed, oversized and hooked ones are one JSON error, nothing changed"
    )
    func regions() async throws {
        try await withCLI { cli in
            let writer = try Self.token(cli, "backend", scope: "write")
            let (daemon, feed, base, _) = try await Self.engine(cli)
            defer { feed.close() }
            let api = APIClient(base: base, dir: cli.dir)
            func put(_ id: String, _ body: String) throws -> APIAnswer {
                try api.request("PUT", "/v1/regions/" + id, token: writer, body: Array(body.utf8))
            }

            #expect(try put("office", #"{"lat": 48.86, "lon": 2.35, "radius": 50, "name": "Office"}"#).status == 200)
            let replaced = try put("office", #"{"id": "office", "lat": 48.86, "lon": 2.35, "radius": 75}"#)
            #expect(replaced.status == 200 && replaced.json?["radius"]?.doubleValue == 75, "\(replaced)")
            let shown = try api.get("/v1/regions/office", token: writer)
            #expect(shown.json?["radius"]?.doubleValue == 75 && shown.json?["states"] != nil, "\(shown)")
            let listed = try api.get("/v1/regions", token: writer)
            #expect(listed.json?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["depot", "office"], "\(listed)")
            let before = try cli.regions()

            let refusals: [(APIAnswer, Int, String)] = [
                (try put("office", #"{"lat": 48.86, "lon": 2.35, "radius": -1}"#), 422, "invalid"),
                (try put("office", #"{"lat": 48.86, "lon": 2.35, "radius": 50"#), 400, "bad-request"),
                (try put("office", #"[1, 2]"#), 400, "bad-request"),
                (try put("office", #"{"id": "elsewhere", "lat": 1, "lon": 2, "radius": 50}"#), 400, "bad-request"),
                (
                    try put("office", #"{"lat": 48.86, "lon": 2.35, "radius": 50, "hooks": {"enter": "rm -rf /"}}"#),
                    403, "permission-denied"
                ),
                (
                    try api.request(
                        "PUT", "/v1/regions/office", token: writer,
                        body: Array(#"{"lat": 48.86, "lon": 2.35, "radius": 50, "name": ""#.utf8)
                            + [UInt8](repeating: 0x61, count: 1 << 20 + 1) + Array(#""}"#.utf8)), 413, "too-long"
                ),
                (
                    try api.request(
                        "PUT", "/v1/regions/office", token: writer,
                        body: [UInt8](repeating: 0x20, count: 2 << 20), headers: ["Transfer-Encoding: chunked"]),
                    413, "too-long"
                ),
                (try api.request("PATCH", "/v1/regions/office", token: writer), 405, "method-not-allowed"),
                (try api.request("DELETE", "/v1/regions/nowhere", token: writer), 404, "not-found"),
                (try api.get("/v1/regions/nowhere", token: writer), 404, "not-found"),
            ]
            for (answer, status, code) in refusals {
                #expect(answer.status == status && answer.errorCode == code, "\(answer)")
                // One JSON error: an object with a code and a message, and nothing else.
                #expect(answer.json?["error"]?["message"]?.stringValue?.isEmpty == false, "\(answer)")
            }
            #expect(try cli.regions() == before, "no refused request changed anything")

            let removed = try api.request("DELETE", "/v1/regions/office", token: writer)
            #expect(removed.status == 200 && removed.json?["removed"] == [.string("office")], "\(removed)")
            #expect(try cli.ids() == ["depot"])

            // With an Idempotency-Key, a change sent again is answered from the record, not made again.
            let yard = Array(#"{"lat": 48.86, "lon": 2.35, "radius": 50}"#.utf8)
            let key = ["Idempotency-Key: yard-1"]
            let made = try api.request("PUT", "/v1/regions/yard", token: writer, body: yard, headers: key)
            #expect(made.status == 200, "\(made)")
            #expect(try api.request("DELETE", "/v1/regions/yard", token: writer).status == 200)
            let again = try api.request("PUT", "/v1/regions/yard", token: writer, body: yard, headers: key)
            #expect(again.status == 200 && again.json?["id"]?.stringValue == "yard", "\(again)")
            #expect(try cli.ids() == ["depot"], "the repeat was not made again")
            let misused = try api.request("DELETE", "/v1/regions/depot", token: writer, headers: key)
            #expect(misused.status == 422 && misused.errorCode == "invalid", "\(misused)")
            let long = ["Idempotency-Key: " + String(repeating: "k", count: 121)]
            #expect(try api.request("DELETE", "/v1/regions/depot", token: writer, headers: long).status == 400)
            #expect(try cli.ids() == ["depot"])
            #expect(await daemon.stop() != nil)
        }
    }

    @Test("import: all or nothing with every bad entry named by position, as geofence import; a dry run stores none")
    func importAllOrNothing() async throws {
        try await withCLI { cli in
            let writer = try Self.token(cli, "backend", scope: "write")
            let (daemon, feed, base, _) = try await Self.engine(cli)
            defer { feed.close() }
            let api = APIClient(base: base, dir: cli.dir)
            let bad =
                #"{"regions": [{"id": "a", "lat": 1, "lon": 2, "radius": 50}, {"id": "b", "lat": 95, "lon": 2, "radius": 50}, {"id": "c", "lat": 1, "lon": 2, "radius": 0}]}"#
            let refused = try api.request("POST", "/v1/regions:import", token: writer, body: Array(bad.utf8))
            #expect(refused.status == 422 && refused.errorCode == "invalid", "\(refused)")
            let message = refused.json?["error"]?["message"]?.stringValue ?? ""
            #expect(message.contains("regions[1]") && message.contains("regions[2]"), "\(message)")
            // The CLI says the same of the same file.
            try bad.write(toFile: cli.dir.file("bad.json"), atomically: true, encoding: .utf8)
            let cliImport = try cli.run("import", cli.dir.file("bad.json"))
            #expect(cliImport.status == 65 && cliImport.stderr.contains("regions[1]"), "\(cliImport.stderr)")
            #expect(try cli.ids() == ["depot"], "nothing imported")
            let malformed = try api.request("POST", "/v1/regions:import", token: writer, body: Array("{".utf8))
            #expect(malformed.status == 400 && malformed.errorCode == "bad-request", "\(malformed)")

            let good =
                #"{"regions": [{"id": "a", "lat": 1, "lon": 2, "radius": 50}, {"id": "b", "lat": 3, "lon": 4, "radius": 60}]}"#
            let dry = try api.request("POST", "/v1/regions:import?dryRun=true", token: writer, body: Array(good.utf8))
            #expect(dry.status == 200 && dry.json?["imported"]?.intValue == 0, "\(dry)")
            #expect(try cli.ids() == ["depot"])
            let done = try api.request("POST", "/v1/regions:import", token: writer, body: Array(good.utf8))
            #expect(done.status == 200 && done.json?["imported"]?.intValue == 2, "\(done)")
            #expect(Set(try cli.ids()) == ["a", "b", "depot"])
            let again = try api.request("POST", "/v1/regions:import", token: writer, body: Array(good.utf8))
            #expect(again.status == 409 && again.errorCode == "duplicate", "\(again)")
            let replaced = try api.request(
                "POST", "/v1/regions:import?replace=true", token: writer, body: Array(good.utf8))
            #expect(replaced.status == 200, "\(replaced)")
            #expect(await daemon.stop() != nil)
        }
    }

    @Test("changes per token are rate-limited as the control socket's per user: 429 with Retry-After")
    func rateLimit() async throws {
        try await withCLI { cli in
            let writer = try Self.token(cli, "backend", scope: "write")
            let reader = try Self.token(cli, "dashboard", scope: "read")
            let (daemon, feed, base, _) = try await Self.engine(cli)
            defer { feed.close() }
            let api = APIClient(base: base, dir: cli.dir)
            let (answers, headers) = try api.repeated("DELETE", "/v1/regions/nowhere", token: writer, count: 60)
            let statuses = answers.map(\.status)
            #expect(statuses.count == 60)
            // The burst goes through (and finds nothing to remove); then the limit refuses.
            #expect(statuses.prefix(30).allSatisfy { $0 == 404 }, "\(statuses)")
            let limited = answers.first { $0.status == 429 }
            #expect(limited?.errorCode == "busy", "\(statuses)")
            #expect(headers.contains("Retry-After:"), "\(headers)")
            // Reads, and other tokens, go on.
            #expect(try api.get("/v1/status", token: writer).status == 200)
            #expect(try api.get("/v1/status", token: reader).status == 200)
            #expect(await daemon.stop() != nil)
        }
    }

    @Test("events: a page after an id, vehicles; the stream resumes after a dropped connection with no event missed")
    func eventsAndStream() async throws {
        try await withCLI { cli in
            let token = try Self.token(cli, "dashboard", scope: "read")
            let (daemon, feed, base, port) = try await Self.engine(cli)
            defer { feed.close() }
            let api = APIClient(base: base, dir: cli.dir)
            func outbox() throws -> [String] {
                let page = try api.get("/v1/events?limit=1000", token: token)
                return page.json?["events"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
            }
            let trips = DiskFaultTests.trips(6, from: Date().addingTimeInterval(-3600))

            let first = try SSEClient(port: port, token: token)
            #expect(first.events(0, timeout: 0.5).isEmpty)
            feed.send(Array(trips[..<24]))
            #expect(await Wait.until(timeout: 10) { ((try? outbox()) ?? []).count >= 3 }, "the drive made events")
            let handled = first.events(2, timeout: 10)
            #expect(first.status == 200)
            #expect(handled.count == 2)
            first.drop()
            // Events made while no one listens.
            feed.send(Array(trips[24...]))
            #expect(await Wait.until(timeout: 10) { ((try? outbox()) ?? []).count >= 9 }, "the drive made events")
            let all = try outbox()
            let second = try SSEClient(port: port, token: token, lastEventID: handled.last?.id)
            let rest = second.events(all.count - 2, timeout: 10)
            let seen = (handled + rest).map(\.id)
            #expect(seen == all, "each event once, in order, across the drop")
            // Each message's data is the event's JSON, as hooks and sinks see it.
            let data = try JSON.parse(rest.last?.data ?? "")
            #expect(data["id"]?.stringValue == all.last && data["type"]?.stringValue != nil)

            // A page after an id: the events after it, and where to go on from.
            let page = try api.get("/v1/events?after=\(all[2])&limit=3", token: token)
            #expect(page.status == 200, "\(page)")
            #expect(page.json?["events"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == Array(all[3..<6]))
            #expect(page.json?["last"]?.stringValue == all[5])
            let unknown = try api.get("/v1/events?after=0193a4c2-7f1e-7c3a-9d2b-5e8f0a1b2c3d", token: token)
            #expect(unknown.status == 404 && unknown.errorCode == "not-found", "\(unknown)")
            #expect(try api.get("/v1/events?limit=0", token: token).status == 400)
            let lost = try SSEClient(port: port, token: token, lastEventID: "no-such-event")
            _ = lost.events(1, timeout: 1)
            #expect(lost.status == 404)

            let vehicles = try api.get("/v1/vehicles", token: token)
            #expect(vehicles.json?.arrayValue?.first?["subject"]?.stringValue == "truck-1", "\(vehicles)")
            #expect(vehicles.json?.arrayValue?.first?["lastFix"]?["lat"]?.doubleValue != nil)

            // An open stream does not hold the engine up when it stops.
            let open = try SSEClient(port: port, token: token)
            _ = open.events(0, timeout: 0.3)
            // (Its thread ends with the stream, which sees the stop within 200 ms; libmicrohttpd's stop waits for
            // that thread, so a stream that did not end would hold the engine until it is killed.)
            let took = await daemon.stop(timeout: 10)
            #expect(took != nil, "the engine did not stop with a stream open:\n\(daemon.log.suffix(2000))")
        }
    }

    @Test("connections: at most 16 from one address (a stream holds one); one dropped frees its place")
    func connectionLimit() async throws {
        try await withCLI { cli in
            let token = try Self.token(cli, "dashboard", scope: "read")
            let (daemon, feed, _, port) = try await Self.engine(cli)
            defer { feed.close() }
            var streams: [SSEClient] = []
            for _ in 0..<16 {
                let stream = try SSEClient(port: port, token: token)
                _ = stream.events(0, timeout: 0.1)
                streams.append(stream)
            }
            // The first comment says the stream is open: each of the 16 has its answer.
            for stream in streams {
                _ = stream.events(0, timeout: 2)
                #expect(stream.status == 200)
            }
            let refused = try SSEClient(port: port, token: token)
            _ = refused.events(1, timeout: 2)
            #expect(refused.status == 0, "the 17th connection from one address is closed unanswered")
            streams[0].drop()
            // Noticed at the stream's next write (a comment every 5 s at most).
            #expect(
                await Wait.until(timeout: 10) {
                    let next = try? SSEClient(port: port, token: token)
                    _ = next?.events(0, timeout: 0.5)
                    return next?.status == 200
                })
            #expect(await daemon.stop() != nil)
        }
    }

    @Test("a connection that sends nothing is closed after the idle timeout (10 s)")
    func idleTimeout() async throws {
        try await withCLI { cli in
            let (daemon, feed, _, port) = try await Self.engine(cli)
            defer { feed.close() }
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var timeout = timeval(tv_sec: 20, tv_usec: 0)
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
            #expect(connected)
            // Half a request, then nothing.
            let part = Array("GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n".utf8)
            #expect(send(fd, part, part.count, Int32(MSG_NOSIGNAL)) == part.count)
            let started = Date()
            var byte: UInt8 = 0
            let n = recv(fd, &byte, 1, 0)
            let waited = Date().timeIntervalSince(started)
            #expect(n == 0, "closed by the server, not timed out by the client")
            #expect(waited > 8 && waited < 15, "closed after \(waited) s")
            #expect(await daemon.stop() != nil)
        }
    }

    @Test("TLS: with --tls-cert and --tls-key the API (and /metrics) answer over HTTPS only")
    func tls() async throws {
        try await withCLI { cli in
            let cert = cli.dir.file("cert.pem")
            let key = cli.dir.file("key.pem")
            let openssl = Process()
            openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            openssl.arguments = [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            ]
            openssl.standardOutput = FileHandle.nullDevice
            openssl.standardError = FileHandle.nullDevice
            try openssl.run()
            openssl.waitUntilExit()
            #expect(openssl.terminationStatus == 0)
            let token = try Self.token(cli, "dashboard", scope: "read")
            let (daemon, feed, base, port) = try await Self.engine(
                cli, ["--tls-cert", cert, "--tls-key", key], scheme: "https")
            defer { feed.close() }
            let api = APIClient(base: base, dir: cli.dir, options: ["--cacert", cert])
            let status = try api.get("/v1/status", token: token)
            #expect(status.status == 200 && status.json?["you"]?["token"]?.stringValue == "dashboard", "\(status)")
            #expect(try api.get("/metrics", token: nil).status == 200)
            #expect(try api.get("/v1/status", token: nil).status == 401)
            // Without trusting the certificate, curl refuses; in plain HTTP, the server does.
            #expect(try APIClient(base: base, dir: cli.dir).get("/v1/status", token: token).status == 0)
            #expect(
                try APIClient(base: "http://127.0.0.1:\(port)", dir: cli.dir).get("/v1/status", token: token).status
                    != 200)
            #expect(await daemon.stop() != nil)
        }
    }

    @Test("run refuses --api without --metrics, half a TLS pair, and a key it cannot read")
    func startRefusals() throws {
        try withCLI { cli in
            let noServer = try cli.run("run", "--source", "json:-", "--api", "on", stdin: "")
            #expect(noServer.status == 64 && noServer.stderr.contains("--metrics"), "\(noServer.stderr)")
            let half = try cli.run(
                "run", "--source", "json:-", "--metrics", "127.0.0.1:0", "--tls-cert", "/nonexistent", stdin: "")
            #expect(half.status == 64 && half.stderr.contains("--tls-key"), "\(half.stderr)")
            let unreadable = try cli.run(
                "run", "--source", "json:-", "--metrics", "127.0.0.1:0", "--tls-cert", "/nonexistent/cert.pem",
                "--tls-key", "/nonexistent/key.pem", stdin: "")
            #expect(
                unreadable.status == 69 && unreadable.stderr.contains("/nonexistent/cert.pem"), "\(unreadable.stderr)")
            let bad = try cli.run("run", "--source", "json:-", "--metrics", "127.0.0.1:0", "--api", "yes", stdin: "")
            #expect(bad.status == 64, "\(bad.stderr)")
            let name = try cli.run("token", "add", "a b")
            #expect(name.status == 64, "\(name.stderr)")
            #expect(try cli.run("token", "add", "x", "--scope", "admin").status == 64)
            #expect(try cli.run("token", "add", "x").status == 0)
            #expect(try cli.run("token", "add", "x").status == 65)
            #expect(try cli.run("token", "remove", "x", "y").status == 66)
            #expect(try cli.run("token", "list", "--json").stdout.contains("\"x\""), "all or nothing")
        }
    }
}
