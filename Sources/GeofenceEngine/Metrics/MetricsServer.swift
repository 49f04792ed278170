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
package final class MetricsServer: @unchecked Sendable {
    // @unchecked: `daemon` is set in `start` and cleared in `stop`, both called by the one owner; libmicrohttpd
    // calls `respond` on its own thread, and `respond` is Sendable.

    /// An answer: HTTP status, content type, body.
    package struct Response: Sendable {
        package var status: UInt32
        package var contentType: String
        package var body: String

        package init(status: UInt32, contentType: String, body: String) {
            self.status = status
            self.contentType = contentType
            self.body = body
        }
    }

    package struct StartError: Error, CustomStringConvertible {
        package var description: String
    }

    package let address: MetricsAddress
    private let respond: @Sendable (_ path: String) -> Response
    private var daemon: OpaquePointer?
    private var retained: Unmanaged<MetricsServer>?
    /// The port it listens on (the kernel's choice for port 0), once started.
    package private(set) var port: UInt16 = 0

    package static let connectionLimit: UInt32 = 16
    package static let timeout: UInt32 = 10

    package init(address: MetricsAddress, respond: @escaping @Sendable (_ path: String) -> Response) {
        self.address = address
        self.respond = respond
    }

    package func start() throws(StartError) {
        let context = Unmanaged.passRetained(self)
        var started: OpaquePointer?
        if address.isIPv6 {
            var sa = sockaddr_in6()
            sa.sin6_family = sa_family_t(AF_INET6)
            sa.sin6_port = address.port.bigEndian
            _ = inet_pton(AF_INET6, address.host, &sa.sin6_addr)
            started = withUnsafePointer(to: &sa) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    CMicroHTTPD_start(
                        $0, address.port, metricsHandler, context.toOpaque(), Self.connectionLimit, Self.timeout, 1)
                }
            }
        } else {
            var sa = sockaddr_in()
            sa.sin_family = sa_family_t(AF_INET)
            sa.sin_port = address.port.bigEndian
            _ = inet_pton(AF_INET, address.host, &sa.sin_addr)
            started = withUnsafePointer(to: &sa) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    CMicroHTTPD_start(
                        $0, address.port, metricsHandler, context.toOpaque(), Self.connectionLimit, Self.timeout, 0)
                }
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

    /// Stops listening and waits for the server's thread to end (a request being answered finishes first).
    package func stop() {
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
        return body.utf8CString.withUnsafeBufferPointer { bytes in
            CMicroHTTPD_respond(connection, response.status, response.contentType, bytes.baseAddress, bytes.count - 1)
        }
    }
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
