import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A request to the HTTP API as the server hands it over: what was asked, by whom (the bearer token), and
/// the body, read whole (up to `HTTPAPI.maximumBody`).
package struct HTTPRequest: Sendable {
    package var method: String
    /// The path, percent-decoded by the server, without the query.
    package var path: String
    /// The query arguments the API reads (`after`, `limit`, `latest`, `replace`, `dryRun`), decoded.
    package var arguments: [String: String] = [:]
    /// `Authorization`, `Last-Event-ID`, `Idempotency-Key`, `Content-Length`: the headers the API reads.
    package var headers: [String: String] = [:]
    package var body: [UInt8] = []
    /// The body was longer than `HTTPAPI.maximumBody` (and was not kept).
    package var bodyTooLarge = false
    /// The request's token, once `HTTPAPI.check` has found it.
    package var token: StoredToken?

    package init(method: String, path: String) {
        self.method = method
        self.path = path
    }

    /// The headers and query arguments the API reads.
    package static let headerNames = ["Authorization", "Last-Event-ID", "Idempotency-Key", "Content-Length"]
    package static let argumentNames = ["after", "limit", "latest", "replace", "dryRun"]
}

/// What the API answers: a response, or an event stream that the server's connection thread reads.
package enum HTTPAnswer: Sendable {
    case response(MetricsServer.Response)
    case stream(HTTPEventStream)
}

/// The HTTP API (`run --api`, Docs/http.md): regions, status, events (a page, or a live Server-Sent Events
/// stream), vehicles, behind bearer tokens with a scope.
///
/// It is a translation, not a second engine: changes and the status go to the control socket's
/// `ControlHandler` as the requests the CLI sends (the same validation, errors and all-or-nothing import),
/// made as the engine's own user; what only reads (tokens, events, vehicles) comes from a read-only
/// connection to the store. Regions with hooks are refused: a hook is a shell command, which a token over the
/// network must not be able to run.
package final class HTTPAPI: Sendable {
    /// Longest body accepted, as a control request line.
    package static let maximumBody = ControlRequest.maximumLineLength
    /// Seconds between comment lines on an idle event stream: under the server's idle timeout, so that a
    /// quiet stream is not closed, and so that a client gone away is noticed.
    package static let keepAlive = 5.0

    private let handler: ControlHandler
    private let reader: StateStore
    private let peer: ControlPeer
    private let bell: EventBell
    /// Changes per token, as the control socket limits each user's.
    private let changeLimit = ChangeRateLimit<String>()

    /// `bell` is rung when events are committed (`wake` rings it too).
    init(handler: ControlHandler, reader: StateStore, bell: EventBell = EventBell()) {
        self.handler = handler
        self.reader = reader
        self.bell = bell
        peer = ControlPeer(pid: getpid(), uid: getuid(), gid: getgid())
    }

    /// Events were committed: streams look at once.
    package func wake() { bell.ring() }

    /// Ends every event stream (the server is stopping).
    package func stop() { bell.stop() }

    // MARK: Routes

    private enum Route {
        case status, vehicles, events, eventStream, regions, importRegions
        case region(String)
    }

    private func route(_ path: String) -> Route? {
        switch path {
        case "/v1/status": return .status
        case "/v1/vehicles": return .vehicles
        case "/v1/events": return .events
        case "/v1/events/stream": return .eventStream
        case "/v1/regions": return .regions
        case "/v1/regions:import": return .importRegions
        default:
            let prefix = "/v1/regions/"
            guard path.hasPrefix(prefix), path.count > prefix.count else { return nil }
            return .region(String(path.dropFirst(prefix.count)))
        }
    }

    /// The methods each route takes, and the scope each needs.
    private func methods(_ route: Route) -> [String: StoredToken.Scope] {
        switch route {
        case .status, .vehicles, .events, .eventStream, .regions: ["GET": .read]
        case .importRegions: ["POST": .write]
        case .region: ["GET": .read, "PUT": .write, "DELETE": .write]
        }
    }

    /// What can be answered before the body has come: the token, the route, the scope, the rate and the
    /// announced size. Nil when the request may go on (its body is then read and `handle` called).
    package func check(_ request: inout HTTPRequest) -> MetricsServer.Response? {
        let token: StoredToken
        switch authenticate(request.headers["Authorization"]) {
        case .failure(let refusal): return refusal.response
        case .success(let found): token = found
        }
        request.token = token
        guard let route = route(request.path) else {
            return Self.error(
                404, "not-found", "no such endpoint: \(String(request.path.prefix(200))) (see Docs/http.md)")
        }
        let allowed = methods(route)
        guard let scope = allowed[request.method] else {
            var response = Self.error(
                405, "method-not-allowed",
                "\(request.method) is not allowed on \(String(request.path.prefix(200))): "
                    + allowed.keys.sorted().joined(separator: ", "))
            response.header = ("Allow", allowed.keys.sorted().joined(separator: ", "))
            return response
        }
        guard token.scope.allows(scope) else {
            return Self.error(
                403, "permission-denied",
                "token \"\(token.id)\" has scope \(token.scope.rawValue); \(request.method) \(String(request.path.prefix(200))) "
                    + "needs a token of scope \(scope.rawValue)")
        }
        if scope == .write, let wait = changeLimit.take(token.id, now: MonotonicClock.seconds()) {
            var response = Self.error(
                429, "busy",
                "too many changes with token \"\(token.id)\": at most \(changeLimit.burst) at once and "
                    + "\(changeLimit.perSecond) a second; try again in \(String(format: "%.1f", wait)) s")
            response.header = ("Retry-After", String(Int(wait.rounded(.up))))
            return response
        }
        if let length = request.headers["Content-Length"].flatMap({ Int($0) }), length > Self.maximumBody {
            return Self.tooLarge(length)
        }
        return nil
    }

    /// The answer to a request that passed `check`, its body read.
    package func handle(_ request: HTTPRequest) -> HTTPAnswer {
        if request.bodyTooLarge { return .response(Self.tooLarge(nil)) }
        guard let route = route(request.path) else {
            return .response(Self.error(404, "not-found", "no such endpoint"))
        }
        switch (route, request.method) {
        case (.status, _):
            var response = call(.status)
            // Who asks is the token, not the engine's user the request is made as.
            if response.status == 200, case .object(var o)? = try? JSON.parse(response.body), let token = request.token
            {
                o["you"] = ["token": .string(token.id), "scope": .string(token.scope.rawValue)]
                response = Self.json(200, .object(o))
            }
            return .response(response)
        case (.vehicles, _):
            return .response(
                read {
                    JSONValue.array(try self.reader.monitorState.vehicles().map { .object(VehicleReport.json($0)) })
                })
        case (.events, _):
            return .response(events(request))
        case (.eventStream, _):
            return eventStream(request)
        case (.regions, _):
            return .response(call(.list))
        case (.region(let id), "GET"):
            return .response(call(.show, ["id": .string(id)]))
        case (.region(let id), "PUT"):
            return .response(put(id: id, request))
        case (.region(let id), _):
            var params: JSONObject = ["ids": [.string(id)]]
            if let refusal = Self.idempotency(request, into: &params) { return .response(refusal) }
            return .response(call(.remove, params))
        case (.importRegions, _):
            return .response(importRegions(request))
        }
    }

    // MARK: Tokens

    private func authenticate(_ header: String?) -> Result<StoredToken, Refusal> {
        guard let header, !header.isEmpty else {
            return .failure(
                Refusal(Self.unauthorized("no token: send Authorization: Bearer TOKEN (geofence token add)")))
        }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            return .failure(Refusal(Self.unauthorized("the Authorization header must be Bearer TOKEN")))
        }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        do {
            guard let found = try reader.tokens.find(hash: HTTPTokens.hash(token)) else {
                return .failure(
                    Refusal(Self.unauthorized("the token is not known (geofence token list shows the tokens)")))
            }
            return .success(found)
        } catch {
            return .failure(Refusal(Self.error(503, "store-failed", "cannot read the tokens: \(error)")))
        }
    }

    // MARK: Through the control handler

    /// Runs `method` as the control socket would for the engine's own user, and answers its result.
    private func call(_ method: ControlMethod, _ params: JSONObject = [:], success: UInt32 = 200)
        -> MetricsServer.Response
    {
        guard let response = handler.handle(ControlRequest(method: method, params: params), peer: peer, connection: nil)
        else {
            return Self.error(500, "internal", "the request took over a connection it does not have")
        }
        switch response.result {
        case .success(let value): return Self.json(success, value)
        case .failure(let error): return Self.error(error)
        }
    }

    /// `PUT /v1/regions/{id}`: the region's JSON, added or replacing the one with that id.
    private func put(id: String, _ request: HTTPRequest) -> MetricsServer.Response {
        guard case .object(var region)? = try? JSON.parse(request.body) else {
            return Self.error(400, "bad-request", "the body must be a region as a JSON object (Docs/regions-format.md)")
        }
        if let given = region["id"] {
            guard given.stringValue == id else {
                return Self.error(
                    400, "bad-request",
                    "the body's id \(given.serialized().prefix(100)) is not the path's \(JSONValue.string(id).serialized())"
                )
            }
        }
        region["id"] = .string(id)
        if let hooks = region["hooks"], !(hooks.objectValue?.isEmpty ?? hooks.isNull) {
            return Self.hooksRefused
        }
        var params: JSONObject = ["region": .object(region), "replace": true]
        if let refusal = Self.idempotency(request, into: &params) { return refusal }
        return call(.add, params)
    }

    /// `POST /v1/regions:import`: a regions file or a GeoJSON FeatureCollection, all or nothing, checked as
    /// `geofence import` checks it (every bad entry named by its position).
    private func importRegions(_ request: HTTPRequest) -> MetricsServer.Response {
        guard (try? JSON.parse(request.body)) != nil else {
            return Self.error(
                400, "bad-request", "the body must be JSON: {\"regions\": [...]} or a GeoJSON FeatureCollection")
        }
        let regions: [Region]
        switch RegionJSON.decodeFile(request.body, now: Date(), createdBy: peer.uid) {
        case .success(let decoded): regions = decoded
        case .failure(let error):
            let problems = error.problems
            return Self.error(
                ControlError(
                    .invalid,
                    problems.count == 1
                        ? "nothing imported: \(problems[0])"
                        : "nothing imported: \(problems.count) problems\n"
                            + problems.prefix(50).map { "  \($0)" }.joined(separator: "\n")
                            + (problems.count > 50 ? "\n  ... and \(problems.count - 50) more" : "")))
        }
        if regions.contains(where: { !$0.hooks.isEmpty }) { return Self.hooksRefused }
        var params: JSONObject = [
            "regions": .array(regions.map { .object(RegionJSON.encode($0)) }),
            "replace": .bool(Self.flag(request.arguments["replace"])),
            "dryRun": .bool(Self.flag(request.arguments["dryRun"])), "final": true,
        ]
        if let refusal = Self.idempotency(request, into: &params) { return refusal }
        return call(.importRegions, params)
    }

    /// `Idempotency-Key: KEY` as the change's request id (`http:KEY`, apart from the CLI's ids), or why not.
    private static func idempotency(_ request: HTTPRequest, into params: inout JSONObject) -> MetricsServer.Response? {
        guard let key = request.headers["Idempotency-Key"] else { return nil }
        guard !key.isEmpty, key.utf8.count <= 120 else {
            return error(400, "bad-request", "Idempotency-Key must be 1 to 120 bytes")
        }
        params["requestId"] = .string("http:" + key)
        return nil
    }

    private static func flag(_ text: String?) -> Bool { text == "true" || text == "1" || text == "" }

    private static let hooksRefused = error(
        403, "permission-denied",
        "regions with hooks cannot be set over HTTP (a hook is a shell command the engine runs): "
            + "add hooks with the geofence command on the engine's machine")

    // MARK: Events

    /// Where `after` (an event id) is in the outbox: its seq, 0 for none, or the refusal of an unknown id.
    private func position(after id: String?) -> Result<Int64?, Refusal> {
        guard let id, !id.isEmpty else { return .success(nil) }
        do {
            guard let seq = try reader.outbox.seq(id: id) else {
                return .failure(
                    Refusal(
                        Self.error(
                            404, "not-found",
                            "no event with id \(JSONValue.string(String(id.prefix(100))).serialized()) in the outbox "
                                + "(pruned, or never made): start again without it")))
            }
            return .success(seq)
        } catch {
            return .failure(Refusal(Self.error(503, "store-failed", "cannot read the outbox: \(error)")))
        }
    }

    /// `GET /v1/events?after=ID&limit=N`: the events after that one (from the oldest without it), oldest
    /// first, and the id to ask after next. `?latest=N`: the newest N, oldest first.
    private func events(_ request: HTTPRequest) -> MetricsServer.Response {
        var limit = 100
        if let text = request.arguments["limit"] {
            guard let n = Int(text), (1...1000).contains(n) else {
                return Self.error(400, "bad-request", "limit must be a whole number from 1 to 1000")
            }
            limit = n
        }
        var latest: Int?
        if let text = request.arguments["latest"] {
            guard let n = Int(text), (1...1000).contains(n) else {
                return Self.error(400, "bad-request", "latest must be a whole number from 1 to 1000")
            }
            guard request.arguments["after"] == nil else {
                return Self.error(400, "bad-request", "give after or latest, not both")
            }
            latest = n
        }
        let seq: Int64
        switch position(after: request.arguments["after"]) {
        case .failure(let refusal): return refusal.response
        case .success(let found): seq = found ?? 0
        }
        do {
            let events =
                try latest.map { try reader.outbox.latest(limit: $0) } ?? reader.outbox.events(after: seq, limit: limit)
            // The bodies are the events' JSON already: put together, not parsed and written again.
            var body = "{\"events\":[" + events.map(\.body).joined(separator: ",") + "]"
            let last =
                events.last.map { JSONValue.string($0.id) } ?? request.arguments["after"].map { .string($0) } ?? .null
            body += ",\"last\":" + last.serialized() + "}\n"
            return MetricsServer.Response(status: 200, contentType: Self.jsonType, body: body)
        } catch {
            return Self.error(503, "store-failed", "cannot read the outbox: \(error)")
        }
    }

    /// `GET /v1/events/stream`: Server-Sent Events, one event a message with its id, from after
    /// `Last-Event-ID` (or `?after=ID`), else from now on.
    private func eventStream(_ request: HTTPRequest) -> HTTPAnswer {
        let seq: Int64
        switch position(after: request.headers["Last-Event-ID"] ?? request.arguments["after"]) {
        case .failure(let refusal): return .response(refusal.response)
        case .success(let found?): seq = found
        case .success(nil):
            do {
                seq = try reader.outbox.latestSeq()
            } catch {
                return .response(Self.error(503, "store-failed", "cannot read the outbox: \(error)"))
            }
        }
        return .stream(HTTPEventStream(store: reader, after: seq, bell: bell))
    }

    // MARK: Answers

    /// A refusal on the way to an answer.
    struct Refusal: Error {
        var response: MetricsServer.Response
        init(_ response: MetricsServer.Response) { self.response = response }
    }

    private func read(_ body: () throws -> JSONValue) -> MetricsServer.Response {
        do {
            return Self.json(200, try body())
        } catch {
            return Self.error(ControlHandler.translate(error))
        }
    }

    static let jsonType = "application/json"

    static func json(_ status: UInt32, _ value: JSONValue) -> MetricsServer.Response {
        MetricsServer.Response(status: status, contentType: jsonType, body: value.serialized() + "\n")
    }

    /// One JSON error: `{"error": {"code": ..., "message": ...}}`.
    static func error(_ status: UInt32, _ code: String, _ message: String) -> MetricsServer.Response {
        json(status, ["error": ["code": .string(code), "message": .string(message)]])
    }

    static func error(_ e: ControlError) -> MetricsServer.Response {
        let status: UInt32 =
            switch e.code {
            case .badRequest, .unknownMethod: 400
            case .tooLong: 413
            case .permissionDenied, .servicesOff: 403
            case .notFound: 404
            case .invalid: 422
            case .duplicate: 409
            case .busy: 503
            case .storeFailed, .internalError: 500
            case .unavailable: 503
            }
        return error(status, e.code.rawValue, e.message)
    }

    static func unauthorized(_ message: String) -> MetricsServer.Response {
        var response = error(401, "unauthorized", message)
        response.header = ("WWW-Authenticate", "Bearer realm=\"geofence\"")
        return response
    }

    static func tooLarge(_ length: Int?) -> MetricsServer.Response {
        error(
            413, "too-long",
            "the body\(length.map { " of \($0) bytes" } ?? "") is over the 1 MiB limit (\(maximumBody) bytes): "
                + "import larger files with geofence import")
    }
}

/// A vehicle as `geofence vehicles --json` and `GET /v1/vehicles` show it.
package enum VehicleReport {
    package static func json(_ v: VehicleSummary) -> JSONObject {
        var o: JSONObject = ["subject": .string(v.subject), "inside": .array(v.inside.map { .string($0) })]
        if let time = v.lastFixTime { o["lastFixTime"] = .string(TimestampParser.format(time)) }
        if let fix = v.lastFix { o["lastFix"] = .object(fix.json) }
        return o
    }
}

/// Rung when events are committed; event streams wait on it (with a deadline) for more.
final class EventBell: @unchecked Sendable {
    // @unchecked: `generation` and `stopped` are only touched under `condition`.
    private let condition = NSCondition()
    private var generation: UInt64 = 0
    private var stopped = false

    func ring() {
        condition.withLock {
            generation &+= 1
            condition.broadcast()
        }
    }

    func stop() {
        condition.withLock {
            stopped = true
            condition.broadcast()
        }
    }

    var isStopped: Bool { condition.withLock { stopped } }
    var current: UInt64 { condition.withLock { generation } }

    /// Waits until a ring after `seen`, the stop, or `deadline` (monotonic seconds).
    func wait(after seen: UInt64, until deadline: Double) {
        condition.withLock {
            while generation == seen && !stopped {
                let left = deadline - MonotonicClock.seconds()
                guard left > 0 else { return }
                _ = condition.wait(until: Date(timeIntervalSinceNow: left))
            }
        }
    }
}

/// One client's Server-Sent Events stream: every committed event after a place in the outbox, each as
/// `id: ID` and `data: JSON`, read from the store as the client takes them (so a slow client holds its place
/// in the outbox, not events in memory), with a comment line when nothing happened for a while.
package final class HTTPEventStream: @unchecked Sendable {
    // @unchecked: read only by the one connection thread the server gives the stream to.
    private let store: StateStore
    private var seq: Int64
    private let bell: EventBell
    private var pending: [UInt8]
    private var lastWrite = MonotonicClock.seconds()

    init(store: StateStore, after seq: Int64, bell: EventBell) {
        self.store = store
        self.seq = seq
        self.bell = bell
        // Reconnect a second after a drop, and say at once that the stream is open.
        pending = Array("retry: 1000\n: geofence events after outbox seq \(seq)\n\n".utf8)
    }

    /// Fills `buffer` with up to `capacity` bytes of the stream, waiting for events when there are none:
    /// how many, or nil when the stream ends (the server stops, the store fails).
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        while true {
            if !pending.isEmpty {
                let n = min(buffer.count, pending.count)
                pending.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: n) }
                pending.removeFirst(n)
                lastWrite = MonotonicClock.seconds()
                return n
            }
            if bell.isStopped { return nil }
            let seen = bell.current
            let events: [StoredEvent]
            do {
                events = try store.outbox.events(after: seq, limit: 256)
            } catch {
                return nil
            }
            if let last = events.last {
                for event in events {
                    pending += Array("id: \(event.id)\n".utf8)
                    // One `data:` line per line of the body (the engine's own are one line; a received one
                    // might not be), which the client joins again with newlines.
                    for line in event.body.split(separator: "\n", omittingEmptySubsequences: false) {
                        pending += Array("data: ".utf8) + Array(line.utf8) + [10]
                    }
                    pending.append(10)
                }
                seq = last.seq
                continue
            }
            let quietUntil = lastWrite + HTTPAPI.keepAlive
            if MonotonicClock.seconds() >= quietUntil {
                pending = Array(": keep-alive\n\n".utf8)
                continue
            }
            // Looked at again when events come, and at least every 200 ms (events another process committed).
            bell.wait(after: seen, until: min(quietUntil, MonotonicClock.seconds() + 0.2))
        }
    }
}
