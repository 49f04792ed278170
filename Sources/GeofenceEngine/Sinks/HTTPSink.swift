import CCrypto
import CCurl
import Foundation
import GeofenceCore
import GeofenceStore

/// POSTs each event's JSON (Docs/events.md) to a webhook through libcurl, one request at a time, in order, on
/// one kept-alive connection (Docs/http.md).
///
/// The answer decides: 2xx acknowledges the event; 4xx other than 408 and 429 refuses it for good: it becomes a
/// dead letter (`DeliveryRepository.recordDeadLetter`, shown by `geofence events --dead` with the status and
/// the start of the body) and the sink goes on; anything else (408, 429, 5xx, 3xx, no answer, the timeout)
/// stops the batch there, and the runner offers the event again with backoff. So the receiver sees every event
/// at least once, in commit order, and never an event before one it has not acknowledged.
///
/// Each request carries `X-Geofence-Event-Id` (the event's id: receivers de-duplicate by it) and
/// `X-Geofence-Event-Type`; with a secret, `X-Geofence-Signature: t=UNIX,v1=HEX`, HEX being the HMAC-SHA256
/// under the secret of `"<t>.<body>"` (as Stripe signs its webhooks).
///
/// libcurl's transfers block: they run on the sink's own thread (its `StoreWorker`), with its dead letters'
/// writes, never on the cooperative pool; the engine stopping abandons a transfer within a second.
package final class HTTPSink: EventSink, @unchecked Sendable {
    // @unchecked: `handle` and `store` are used only on `worker`'s thread; the rest is under `lock` or constant;
    // `exchange` is written by libcurl on that thread, and only its atomic `stop` from elsewhere.
    package let id: String
    package let url: String
    private let events: [String]
    private let headers: [String]
    private let secret: [UInt8]?
    private let caFile: String?
    private let timeout: Double
    private let stateDirectory: String
    private let logger: Logger
    /// Events read from the outbox at a time. A batch is how often the cursor is written: after 32 requests
    /// (of one event, or 4 of `perRequest`), a write that costs little beside them, and few events sent again
    /// after the engine is killed (500 sent 105 duplicates of 240 events across 4 kills in HTTPSinkTests).
    package let batchSize: Int
    /// Events per request: 1, the body is the event's JSON; more, a JSON array of up to this many.
    package let perRequest: Int

    private let worker: StoreWorker
    private let exchange: UnsafeMutablePointer<CCurlExchange>
    private var handle: UnsafeMutableRawPointer?
    private var store: StateStore?

    private let lock = NSLock()
    private var answered = true
    private var problem: String?
    /// Failed attempts at the event the sink is stuck on (for its dead letter's count).
    private var attempts = 0

    /// libcurl's global set-up, once per process, before its first handle.
    private static let global: CURLcode = CCurl_globalInit()

    package init(
        id: String, url: String, events: [String], headers: [String], secret: [UInt8]?, caFile: String?,
        timeout: Double, perRequest: Int = 1, stateDirectory: String, logger: Logger
    ) {
        self.perRequest = max(1, perRequest)
        batchSize = max(32, 4 * self.perRequest)
        self.id = id
        self.url = url
        self.events = events
        self.headers = headers
        self.secret = secret
        self.caFile = caFile
        self.timeout = timeout
        self.stateDirectory = stateDirectory
        self.logger = logger
        worker = StoreWorker(name: "geofence.http-sink")
        exchange = .allocate(capacity: 1)
        exchange.initialize(to: CCurlExchange())
    }

    deinit {
        if let handle { curl_easy_cleanup(handle) }
        exchange.deinitialize(count: 1)
        exchange.deallocate()
    }

    package func accepts(eventType: String) -> Bool { events.isEmpty || events.contains(eventType) }

    package var health: SinkHealth {
        lock.withLock { SinkHealth(address: url, connected: answered, problem: problem) }
    }

    package func open() async throws {
        try await worker.run { try self.prepare() }
    }

    /// On `worker`'s thread: the handle, configured once (its connection is kept between requests), and the
    /// store the dead letters go to.
    private func prepare() throws {
        guard Self.global == CURLE_OK else {
            throw SinkUnavailable("libcurl: \(String(cString: curl_easy_strerror(Self.global)))")
        }
        if store == nil {
            let own = try StateStore(directory: stateDirectory, options: .init(synchronous: .normal))
            try? own.retryLocksQuickly()
            store = own
        }
        guard handle == nil else { return }
        guard let made = curl_easy_init() else { throw SinkUnavailable("libcurl cannot make a handle") }
        let milliseconds = Int((timeout * 1000).rounded())
        let rc = url.withCString { u in
            "geofence/\(HTTPSink.version)".withCString { agent in
                if let caFile {
                    return caFile.withCString { ca in
                        CCurl_configure(made, u, milliseconds, min(milliseconds, 10_000), ca, agent, exchange)
                    }
                }
                return CCurl_configure(made, u, milliseconds, min(milliseconds, 10_000), nil, agent, exchange)
            }
        }
        guard rc == CURLE_OK else {
            curl_easy_cleanup(made)
            throw SinkUnavailable("libcurl: \(String(cString: curl_easy_strerror(rc)))")
        }
        handle = made
    }

    /// The version in the User-Agent.
    static let version = "1"

    package func deliver(_ batch: [StoredEvent]) async throws -> Int {
        var index = 0
        while index < batch.count {
            if Task.isCancelled { return index }
            // One event, or with `perRequest` more than one, the next ones of the batch as one request.
            let request = Array(batch[index..<min(batch.count, index + perRequest)])
            let started = Date()
            let outcome = await withTaskCancellationHandler {
                await worker.run { self.post(request) }
            } onCancel: {
                self.abandonTransfer()
            }
            let duration = Date().timeIntervalSince(started)
            switch outcome {
            case .acknowledged:
                lock.withLock {
                    answered = true
                    problem = nil
                    attempts = 0
                }
            case .refused(let status, let body, let total):
                let tries = lock.withLock {
                    answered = true
                    attempts += 1
                    defer { attempts = 0 }
                    return attempts
                }
                do {
                    try await worker.run {
                        for event in request {
                            try self.store?.deliveries.recordDeadLetter(
                                event: event, sink: self.id, target: "POST " + self.url, attempts: tries,
                                error: "HTTP \(status)", response: body, responseBytes: total, startedAt: started,
                                duration: duration)
                        }
                    }
                } catch {
                    // Not recorded: not given up either. Offered again, and refused again, until it is.
                    let why = "cannot record the dead letter of event \(request[0].id): \(error)"
                    lock.withLock { problem = why }
                    if index == 0 { throw SinkUnavailable(why) }
                    return index
                }
                let what =
                    request.count == 1 ? "event \(request[0].id)" : "\(request.count) events from \(request[0].id)"
                logger.warning(
                    "sink \(id): \(what) refused with HTTP \(status): a dead letter (geofence events --dead); going on")
            case .failed(let why, let status):
                lock.withLock {
                    answered = status != nil
                    problem = why
                    attempts += 1
                }
                if index == 0 { throw SinkUnavailable(why) }
                return index
            }
            index += request.count
        }
        return batch.count
    }

    /// The engine is stopping: the transfer under way ends at its next progress callback, and any later one
    /// at once.
    private func abandonTransfer() { CCurl_stop(exchange) }

    private enum Outcome: Sendable {
        case acknowledged
        /// A 4xx other than 408 and 429: the start of its body, and how long it was.
        case refused(status: Int, body: [UInt8], total: Int)
        /// To be tried again: why, and the status if one came.
        case failed(String, status: Int?)
    }

    /// One request, on `worker`'s thread.
    private func post(_ events: [StoredEvent]) -> Outcome {
        guard let handle else { return .failed("not ready", status: nil) }
        var list: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(list) }
        let body = Self.body(events, array: perRequest > 1)
        for header in requestHeaders(events: events, body: body) {
            guard let longer = curl_slist_append(list, header) else {
                return .failed("libcurl: out of memory for headers", status: nil)
            }
            list = longer
        }
        var status = 0
        let rc = body.withUnsafeBytes { bytes in
            CCurl_post(handle, bytes.baseAddress, bytes.count, list, exchange, &status)
        }
        guard rc == CURLE_OK else {
            let detail = withUnsafeBytes(of: &exchange.pointee.error) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            let why = detail.isEmpty ? String(cString: curl_easy_strerror(rc)) : detail
            return .failed("\(url): \(why)", status: nil)
        }
        switch status {
        case 200..<300:
            return .acknowledged
        case 400..<500 where status != 408 && status != 429:
            let kept = withUnsafeBytes(of: &exchange.pointee.body) { raw in
                Array(raw.prefix(min(exchange.pointee.length, raw.count)))
            }
            return .refused(status: status, body: kept, total: exchange.pointee.total)
        default:
            return .failed("\(url) answered HTTP \(status)", status: status)
        }
    }

    /// One event's JSON as stored; with `array`, a JSON array of the events' (even of one).
    static func body(_ events: [StoredEvent], array: Bool) -> [UInt8] {
        guard array else { return Array((events.first?.body ?? "").utf8) }
        var out: [UInt8] = [UInt8(ascii: "[")]
        for (i, event) in events.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out += event.body.utf8
        }
        out.append(UInt8(ascii: "]"))
        return out
    }

    /// The request's headers: the sink's own, then those it was given. One event: its id and type; several:
    /// their count and the first and last ids (each event's id is in the body).
    func requestHeaders(events: [StoredEvent], body: [UInt8], now: Date = Date()) -> [String] {
        // Ids and types are geofence's own; kept to one line whatever the store holds.
        func line(_ text: String) -> String {
            String(text.unicodeScalars.filter { $0.value >= 0x20 && $0 != "\u{7f}" })
        }
        var out = ["Content-Type: application/json", "Expect:"]
        if perRequest == 1, let event = events.first {
            out += ["X-Geofence-Event-Id: " + line(event.id), "X-Geofence-Event-Type: " + line(event.type)]
        } else if let first = events.first, let last = events.last {
            out += [
                "X-Geofence-Event-Count: \(events.count)", "X-Geofence-First-Event-Id: " + line(first.id),
                "X-Geofence-Last-Event-Id: " + line(last.id),
            ]
        }
        if let secret {
            out.append("X-Geofence-Signature: " + Self.signature(secret: secret, body: body, now: now))
        }
        return out + headers
    }

    /// `t=UNIX,v1=HEX`: HEX is HMAC-SHA256 under `secret` of `"<t>.<body>"`.
    package static func signature(secret: [UInt8], body: [UInt8], now: Date) -> String {
        let seconds = now.timeIntervalSince1970
        let t = seconds.isFinite && abs(seconds) < 1e15 ? Int64(seconds.rounded(.down)) : 0
        return "t=\(t),v1=" + hex(hmacSHA256(key: secret, message: Array("\(t).".utf8) + body))
    }

    /// HMAC-SHA256 (RFC 2104 over FIPS 180-4's SHA-256), by OpenSSL's libcrypto.
    package static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let ok = key.withUnsafeBytes { k in
            message.withUnsafeBytes { m in
                out.withUnsafeMutableBufferPointer { o in
                    CCrypto_hmacSHA256(k.baseAddress, k.count, m.baseAddress, m.count, o.baseAddress)
                }
            }
        }
        return ok == 1 ? out : []
    }

    package static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0xf)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    package func close() async {
        await worker.run {
            if let handle = self.handle { curl_easy_cleanup(handle) }
            self.handle = nil
            self.store = nil
        }
        worker.finish()
    }
}
