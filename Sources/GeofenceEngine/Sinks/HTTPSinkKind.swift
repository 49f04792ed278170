import Foundation
import GeofenceCore
import GeofenceStore

/// `sink add --http URL`: each event POSTed to a webhook, in order, signed with a secret if one is given
/// (`HTTPSink`, Docs/http.md).
package enum HTTPSinkKind: SinkKind {
    package static let kind = "http"

    /// A request's limit when the sink names none, and the longest one may name.
    package static let defaultTimeout = 10.0
    package static let maximumTimeout = 300.0
    /// Events per request, at most (`--batch`).
    package static let maximumBatch = 1000
    /// Extra headers a sink may add, at most.
    package static let maximumHeaders = 32

    /// The URL (no credentials: it is stored), the secret's file, a private CA for https, extra headers and
    /// the request timeout.
    package static func definition(_ p: JSONObject) throws -> SinkDefinition {
        func text(_ key: String) throws -> String? { try SinkRequest.text(p, key) }
        guard let url = try text("url") else { throw ControlError(.badRequest, "sink.add needs params.url") }
        let tls: Bool
        do {
            tls = try checkedURL(url)
        } catch {
            throw ControlError(.invalid, "url: \(error)")
        }
        let secretFile = try text("secretFile")
        if let file = secretFile {
            guard file.hasPrefix("/") else { throw ControlError(.invalid, "secret file: give an absolute path") }
            guard FileManager.default.isReadableFile(atPath: file) else {
                throw ControlError(.invalid, "the engine cannot read the secret file \(file)")
            }
        }
        let caFile = try text("caFile")
        if let caFile {
            guard tls else { throw ControlError(.invalid, "a CA file is for TLS: use https://") }
            guard caFile.hasPrefix("/"), FileManager.default.isReadableFile(atPath: caFile) else {
                throw ControlError(.invalid, "the engine cannot read the CA file \(caFile) (give an absolute path)")
            }
        }
        var headers: [String] = []
        if let given = p["headers"], given != .null {
            guard let items = given.arrayValue else {
                throw ControlError(.badRequest, "params.headers must be an array of strings")
            }
            guard items.count <= maximumHeaders else {
                throw ControlError(.invalid, "headers: at most \(maximumHeaders)")
            }
            for item in items {
                guard let header = item.stringValue else {
                    throw ControlError(.badRequest, "params.headers must be an array of strings")
                }
                if let problem = headerProblem(header) { throw ControlError(.invalid, "header: \(problem)") }
                headers.append(normalizedHeader(header))
            }
        }
        var timeout: Double?
        if let given = p["timeout"], given != .null {
            guard let seconds = given.doubleValue else {
                throw ControlError(.badRequest, "params.timeout must be a number of seconds")
            }
            guard seconds.isFinite, seconds >= 0.1, seconds <= maximumTimeout else {
                throw ControlError(.invalid, "timeout: give 100ms to \(Int(maximumTimeout))s")
            }
            timeout = seconds
        }
        var batch: Int?
        if let given = p["batch"], given != .null {
            guard let n = given.intValue else { throw ControlError(.badRequest, "params.batch must be an integer") }
            guard (1...maximumBatch).contains(n) else {
                throw ControlError(.invalid, "batch: give 1 to \(maximumBatch) events per request")
            }
            batch = n > 1 ? n : nil
        }
        if try text("format").map({ $0 != SinkFormat.event.rawValue }) == true {
            throw ControlError(.invalid, "format: a webhook is sent the event's JSON (event)")
        }
        return SinkDefinition(
            id: "", kind: kind, url: url, topic: "", format: SinkFormat.event.rawValue, caFile: caFile,
            secretFile: secretFile, headers: headers, timeout: timeout, batch: batch)
    }

    /// Why `url` is no webhook URL; else whether it is https. http:// or https://, a host, no user or password
    /// (the URL is stored and shown), no fragment.
    package static func checkedURL(_ url: String) throws(ValueError) -> Bool {
        if url.utf8.count > 2048 { throw ValueError("it is longer than 2048 bytes") }
        if url.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value >= 0x7f }) {
            throw ValueError("it contains a space, a control character or a non-ASCII character (percent-encode it)")
        }
        let lower = url.lowercased()
        let tls: Bool
        if lower.hasPrefix("https://") {
            tls = true
        } else if lower.hasPrefix("http://") {
            tls = false
        } else {
            throw ValueError("it does not start with http:// or https://")
        }
        guard let parts = URLComponents(string: url), let host = parts.host, !host.isEmpty else {
            throw ValueError("it is not a URL with a host (http://HOST[:PORT]/PATH)")
        }
        if parts.user != nil || parts.password != nil {
            throw ValueError(
                "a sink's URL is stored, so it takes no user or password: give a header (--header 'Authorization: ...')"
            )
        }
        if parts.fragment != nil { throw ValueError("it has a #fragment, which is never sent") }
        if let port = parts.port, !(1...65535).contains(port) { throw ValueError("its port is not 1 to 65535") }
        return tls
    }

    /// Headers the sink sets itself, which another may not replace.
    static let ownHeaders: Set<String> = [
        "content-type", "content-length", "host", "transfer-encoding", "connection",
        "expect", "user-agent",
    ]

    /// What is wrong with `header` (`Name: value`), or nil.
    package static func headerProblem(_ header: String) -> String? {
        guard let colon = header.firstIndex(of: ":") else { return "\"\(header.prefix(64))\" is not Name: value" }
        let name = header[..<colon]
        let value = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        // RFC 9110's token: the characters a field name is made of.
        let tchar = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        if name.isEmpty || !name.allSatisfy(tchar.contains) {
            return "\"\(name.prefix(64))\" is not a header name (letters, digits and !#$%&'*+-.^_`|~)"
        }
        if value.isEmpty { return "\(name) has no value" }
        if value.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7f }) {
            return "the value of \(name) contains a control character (a line break?)"
        }
        if header.utf8.count > 4096 { return "\(name) is longer than 4096 bytes" }
        let lower = name.lowercased()
        if ownHeaders.contains(lower) || lower.hasPrefix("x-geofence-") {
            return "\(name) is set by the sink itself"
        }
        return nil
    }

    /// `Name: value`, with one space after the colon and none around the value.
    static func normalizedHeader(_ header: String) -> String {
        guard let colon = header.firstIndex(of: ":") else { return header }
        return header[..<colon] + ": " + header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }

    /// The sink, its secret read from its file.
    package static func makeSink(_ definition: SinkDefinition, context: SinkContext) throws -> any EventSink {
        var secret: [UInt8]?
        if let file = definition.secretFile {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw SinkUnavailable("cannot read the secret file \(file)")
            }
            var bytes = [UInt8](data)
            while let last = bytes.last, last == 0x0a || last == 0x0d { bytes.removeLast() }
            guard !bytes.isEmpty else { throw SinkUnavailable("the secret file \(file) is empty") }
            secret = bytes
        }
        return HTTPSink(
            id: definition.id, url: definition.url, events: definition.events, headers: definition.headers,
            secret: secret, caFile: definition.caFile, timeout: definition.timeout ?? defaultTimeout,
            perRequest: definition.batch ?? 1, stateDirectory: context.stateDirectory, logger: context.logger)
    }
}
