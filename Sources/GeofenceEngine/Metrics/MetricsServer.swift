import CMicroHTTPD
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Where `--metrics` listens: an IP literal and a port (`127.0.0.1:9464`, `[::1]:9464`, `0.0.0.0:9464`), or a
/// port alone for loopback. No host names: what the engine binds is what the operator wrote.
package struct MetricsAddress: Sendable, Equatable, CustomStringConvertible {
    package var host: String
    package var port: UInt16
    package var isIPv6: Bool { host.contains(":") }

    package struct Invalid: Error, CustomStringConvertible {
        package var description: String
    }

    package init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    package init(parsing text: String) throws(Invalid) {
        let value = text.trimmingCharacters(in: .whitespaces)
        var host = "127.0.0.1"
        var portText = value
        if value.hasPrefix("[") {
            guard let close = value.firstIndex(of: "]"), value[value.index(after: close)...].hasPrefix(":") else {
                throw Invalid(description: "'\(text)' is not [IPV6]:PORT")
            }
            host = String(value[value.index(after: value.startIndex)..<close])
            portText = String(value[value.index(close, offsetBy: 2)...])
        } else if let colon = value.lastIndex(of: ":") {
            host = String(value[..<colon])
            portText = String(value[value.index(after: colon)...])
            if host == "localhost" { host = "127.0.0.1" }
        }
        guard let port = UInt16(portText) else {
            throw Invalid(description: "'\(text)': the port must be a number from 0 to 65535")
        }
        var v4 = in_addr()
        var v6 = in6_addr()
        guard inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1 else {
            throw Invalid(description: "'\(text)': give an IP address (127.0.0.1, [::1]) and a port, not a host name")
        }
        self.host = host
        self.port = port
    }

    package var description: String { isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// A small HTTP server for an operator's probes (`/metrics`, `/healthz`), on libmicrohttpd: one polling
/// thread of its own, at most `connectionLimit` connections, each closed after `timeout` seconds idle, only
/// GET and HEAD. It never touches the monitor: what it answers comes from `respond`, which reads published
/// values and the store.
///
/// With an `api` (`run --api on`) it also serves the HTTP API under `/v1/`, and then runs a thread per
/// connection (an event stream's reader waits for events in it), at most `apiConnectionLimit` connections
/// and `apiPerAddressLimit` from one address, reading bodies of up to `HTTPAPI.maximumBody`. With `tls` it
/// speaks HTTPS only.
package final class MetricsServer: @unchecked Sendable {
    // @unchecked: `daemon` is set in `start` and cleared in `stop`, both called by the one owner; libmicrohttpd
    // calls `respond` on its own thread, and `respond` is Sendable.

    /// An answer: HTTP status, content type, body, and at most one more header.
    package struct Response: Sendable {
        package var status: UInt32
        package var contentType: String
        package var body: String
        package var header: (name: String, value: String)?

        package init(status: UInt32, contentType: String, body: String) {
            self.status = status
            self.contentType = contentType
            self.body = body
        }
    }

    /// A certificate and its private key (PEM text) to serve HTTPS with.
    package struct TLSIdentity: Sendable {
        package var certificate: String
        package var key: String

        /// Reads both files; an error says which cannot be read.
        package init(certificateFile: String, keyFile: String) throws(StartError) {
            func read(_ path: String, _ what: String) throws(StartError) -> String {
                guard let data = FileManager.default.contents(atPath: path), !data.isEmpty else {
                    throw StartError(
                        description: "cannot read the TLS \(what) \(path): \(String(cString: strerror(errno)))")
                }
                return String(decoding: data, as: UTF8.self)
            }
            certificate = try read(certificateFile, "certificate")
            key = try read(keyFile, "key")
        }
    }

    package struct StartError: Error, CustomStringConvertible {
        package var description: String
    }

    package let address: MetricsAddress
    private let respond: @Sendable (_ path: String) -> Response
    /// The HTTP API under `/v1/` (`run --api`); nil: only the probes.
    let api: HTTPAPI?
    let tls: TLSIdentity?
    /// The map's live page at `/map` (with the API), made once.
    let mapPage: String
    private var daemon: OpaquePointer?
    private var retained: Unmanaged<MetricsServer>?
    /// The port it listens on (the kernel's choice for port 0), once started.
    package private(set) var port: UInt16 = 0

    package static let connectionLimit: UInt32 = 16
    package static let timeout: UInt32 = 10
    /// With the API: connections in all (each has a thread), and from one address.
    package static let apiConnectionLimit: UInt32 = 64
    package static let apiPerAddressLimit: UInt32 = 16

    package init(
        address: MetricsAddress, api: HTTPAPI? = nil, tls: TLSIdentity? = nil, mapTiles: MapTiles? = nil,
        respond: @escaping @Sendable (_ path: String) -> Response
    ) {
        self.address = address
        mapPage = api == nil ? "" : MapPage.live(tiles: mapTiles)
        self.respond = respond
        self.api = api
        self.tls = tls
    }

    /// `http` or `https`.
    package var scheme: String { tls == nil ? "http" : "https" }

    package func start() throws(StartError) {
        if tls != nil && CMicroHTTPD_hasTLS() == 0 {
            throw StartError(description: "this libmicrohttpd was built without TLS: cannot serve HTTPS")
        }
        let context = Unmanaged.passRetained(self)
        var started: OpaquePointer?
        if api != nil || tls != nil {
            started = withSocketAddress { startAPI($0, context: context.toOpaque()) }
        } else {
            started = withSocketAddress {
                CMicroHTTPD_start(
                    $0, address.port, metricsHandler, context.toOpaque(), Self.connectionLimit, Self.timeout,
                    address.isIPv6 ? 1 : 0)
            }
        }
        guard let started else {
            let why = String(cString: strerror(errno))
            context.release()
            throw StartError(description: "cannot serve metrics on \(address): \(why)")
        }
        daemon = started
        retained = context
        port = CMicroHTTPD_port(started)
    }

    private func withSocketAddress<T>(_ body: (UnsafePointer<sockaddr>) -> T) -> T {
        if address.isIPv6 {
            var sa = sockaddr_in6()
            sa.sin6_family = sa_family_t(AF_INET6)
            sa.sin6_port = address.port.bigEndian
            _ = inet_pton(AF_INET6, address.host, &sa.sin6_addr)
            return withUnsafePointer(to: &sa) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1, body) }
        }
        var sa = sockaddr_in()
        sa.sin_family = sa_family_t(AF_INET)
        sa.sin_port = address.port.bigEndian
        _ = inet_pton(AF_INET, address.host, &sa.sin_addr)
        return withUnsafePointer(to: &sa) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1, body) }
    }

    /// The server with the API (and TLS): a thread per connection, a callback when a request ends.
    private func startAPI(_ sa: UnsafePointer<sockaddr>, context: UnsafeMutableRawPointer) -> OpaquePointer? {
        let limit = api == nil ? Self.connectionLimit : Self.apiConnectionLimit
        let perAddress = api == nil ? Self.connectionLimit : Self.apiPerAddressLimit
        let v6: UInt32 = address.isIPv6 ? 1 : 0
        guard let tls else {
            return CMicroHTTPD_startAPI(
                sa, address.port, apiHandler, context, requestCompleted, limit, perAddress, Self.timeout, v6, nil, nil)
        }
        return CMicroHTTPD_startAPI(
            sa, address.port, apiHandler, context, requestCompleted, limit, perAddress, Self.timeout, v6,
            tls.certificate, tls.key)
    }

    /// Stops listening and waits for the server's thread to end (a request being answered finishes first).
    package func stop() {
        api?.stop()
        if let daemon { MHD_stop_daemon(daemon) }
        daemon = nil
        retained?.release()
        retained = nil
    }

    fileprivate func answer(connection: OpaquePointer?, path: String, method: String) -> MHD_Result {
        let response: Response
        if method != "GET" && method != "HEAD" {
            response = Response(status: 405, contentType: "text/plain; charset=utf-8", body: "only GET and HEAD\n")
        } else {
            response = respond(path)
        }
        let body = method == "HEAD" ? "" : response.body
        return Self.queue(response, body: body, on: connection)
    }

    fileprivate static func queue(_ response: Response, body: String, on connection: OpaquePointer?) -> MHD_Result {
        body.utf8CString.withUnsafeBufferPointer { bytes in
            if let header = response.header {
                return CMicroHTTPD_respondWith(
                    connection, response.status, response.contentType, bytes.baseAddress, bytes.count - 1,
                    header.name, header.value)
            }
            return CMicroHTTPD_respond(
                connection, response.status, response.contentType, bytes.baseAddress, bytes.count - 1)
        }
    }

    /// The first call for a request, its headers in: answers what needs no body (the probes, a refusal),
    /// or returns nil to read the body first.
    fileprivate func begin(_ exchange: HTTPExchange, connection: OpaquePointer?) -> MHD_Result? {
        if api != nil, exchange.request.path == "/map" {
            // The map's page holds no data (it asks /v1/ with the token of its URL's fragment): no token.
            exchange.answered = true
            let method = exchange.request.method
            guard method == "GET" || method == "HEAD" else {
                var refusal = HTTPAPI.error(405, "method-not-allowed", "\(method) is not allowed on /map: GET, HEAD")
                refusal.header = ("Allow", "GET, HEAD")
                return Self.queue(refusal, body: refusal.body, on: connection)
            }
            let page = Response(status: 200, contentType: "text/html; charset=utf-8", body: mapPage)
            return Self.queue(page, body: method == "HEAD" ? "" : page.body, on: connection)
        }
        guard let api, exchange.request.path.hasPrefix("/v1/") else {
            exchange.answered = true
            return answer(connection: connection, path: exchange.request.path, method: exchange.request.method)
        }
        for name in HTTPRequest.headerNames {
            if let value = CMicroHTTPD_header(connection, name) {
                exchange.request.headers[name] = String(cString: value)
            }
        }
        for name in HTTPRequest.argumentNames {
            if let value = CMicroHTTPD_argument(connection, name) {
                exchange.request.arguments[name] = String(cString: value)
            }
        }
        if let refusal = api.check(&exchange.request) {
            exchange.answered = true
            return Self.queue(refusal, body: refusal.body, on: connection)
        }
        let method = exchange.request.method
        guard method == "PUT" || method == "POST" else { return finish(exchange, connection: connection) }
        return nil
    }

    /// The last call for a request, its body read: the API's answer.
    fileprivate func finish(_ exchange: HTTPExchange, connection: OpaquePointer?) -> MHD_Result {
        exchange.answered = true
        guard let api else { return MHD_Result(rawValue: 0)! }
        switch api.handle(exchange.request) {
        case .response(let response):
            return Self.queue(response, body: response.body, on: connection)
        case .stream(let stream):
            let context = Unmanaged.passRetained(stream).toOpaque()
            return CMicroHTTPD_respondStream(connection, "text/event-stream", streamReader, context, streamReleased)
        }
    }
}

/// One request between its calls: what was asked, the body so far, whether it was answered.
final class HTTPExchange {
    var request: HTTPRequest
    var answered = false

    init(method: String, path: String) {
        request = HTTPRequest(method: method, path: path)
    }

    /// Takes a piece of the body, keeping none past the limit.
    func receive(_ bytes: UnsafeRawBufferPointer) {
        guard !request.bodyTooLarge else { return }
        if request.body.count + bytes.count > HTTPAPI.maximumBody {
            request.bodyTooLarge = true
            request.body = []
            return
        }
        request.body += bytes
    }
}

/// libmicrohttpd's request callback of the server with the API: called when the headers are in, then with
/// each piece of the body, then once more with none.
private let apiHandler: MHD_AccessHandlerCallback = {
    context, connection, url, method, _, uploadData, uploadSize, requestState in
    guard let context, let requestState else { return MHD_Result(rawValue: 0)! }
    let server = Unmanaged<MetricsServer>.fromOpaque(context).takeUnretainedValue()
    guard let state = requestState.pointee else {
        let exchange = HTTPExchange(
            method: method.map { String(cString: $0) } ?? "", path: url.map { String(cString: $0) } ?? "/")
        requestState.pointee = Unmanaged.passRetained(exchange).toOpaque()
        return server.begin(exchange, connection: connection) ?? MHD_Result(rawValue: 1)!
    }
    let exchange = Unmanaged<HTTPExchange>.fromOpaque(state).takeUnretainedValue()
    if let uploadSize, uploadSize.pointee > 0 {
        if !exchange.answered, let uploadData {
            exchange.receive(UnsafeRawBufferPointer(start: uploadData, count: uploadSize.pointee))
        }
        uploadSize.pointee = 0
        return MHD_Result(rawValue: 1)!
    }
    if exchange.answered { return MHD_Result(rawValue: 1)! }
    return server.finish(exchange, connection: connection)
}

/// A request has ended (answered, or the client went away): its state is released.
private let requestCompleted: MHD_RequestCompletedCallback = { _, _, requestState, _ in
    guard let requestState, let state = requestState.pointee else { return }
    Unmanaged<HTTPExchange>.fromOpaque(state).release()
    requestState.pointee = nil
}

/// An event stream's reader, on its connection's thread.
private let streamReader: MHD_ContentReaderCallback = { context, _, buffer, capacity in
    guard let context, let buffer, capacity > 0 else { return CMicroHTTPD_endOfStream }
    let stream = Unmanaged<HTTPEventStream>.fromOpaque(context).takeUnretainedValue()
    return stream.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: capacity)) ?? CMicroHTTPD_endOfStream
}

private let streamReleased: MHD_ContentReaderFreeCallback = { context in
    guard let context else { return }
    Unmanaged<HTTPEventStream>.fromOpaque(context).release()
}

/// libmicrohttpd's request callback: a C function, so the server comes back through its context pointer.
private let metricsHandler: MHD_AccessHandlerCallback = {
    context, connection, url, method, _, _, uploadSize, requestState in
    guard let context, let requestState else { return MHD_Result(rawValue: 0)! }
    // Called first when the headers are in; a body (which no GET has) would come in later calls. Answer at
    // the first call, and ignore whatever follows.
    if requestState.pointee == nil {
        requestState.pointee = UnsafeMutableRawPointer(bitPattern: 1)
        let server = Unmanaged<MetricsServer>.fromOpaque(context).takeUnretainedValue()
        let path = url.map { String(cString: $0) } ?? "/"
        let verb = method.map { String(cString: $0) } ?? ""
        return server.answer(connection: connection, path: path, method: verb)
    }
    uploadSize?.pointee = 0
    return MHD_Result(rawValue: 1)!
}
