import Foundation

/// An MQTT source as `--source` takes it: `mqtt://[USER[:PASS]@]HOST[:PORT]/TOPIC-FILTER`, or `mqtts://`
/// for TLS (port 8883 by default).
///
/// Parsed by hand rather than by `URL`: a topic filter's `#` is a wildcard here, not a fragment.
public struct MQTTAddress: Sendable, Equatable, CustomStringConvertible {
    /// The broker's host name or IP address (an IPv6 one without brackets).
    public var host: String
    /// The broker's TCP port: 1883 unless given (`init(parsing:)` makes it 8883 for `mqtts://`; setting
    /// `tls` does not change it).
    public var port: Int32 = 1883
    /// The user name to log in with; nil: none.
    public var username: String?
    /// The password to log in with, given only with a `username`; nil: none.
    public var password: String?
    /// What to subscribe to (MQTT wildcards `+` and `#` allowed), such as `fleet/+/tpv`.
    public var topicFilter: String
    /// `mqtts://`: TLS, the broker's certificate checked against `caFile` (else the system's CAs).
    public var tls = false
    /// A PEM file of the CA certificates to trust (`--mqtt-ca`).
    public var caFile: String?
    /// The client's own certificate and its private key (PEM, the key without a passphrase), for a broker
    /// that asks for one (`--mqtt-cert`, `--mqtt-key`).
    public var certificateFile: String?
    /// The private key of `certificateFile` (PEM, without a passphrase).
    public var keyFile: String?

    /// A broker and a topic filter, as given (unchecked; `init(parsing:)` checks a URL); no TLS, no login.
    public init(host: String, port: Int32 = 1883, topicFilter: String) {
        self.host = host
        self.port = port
        self.topicFilter = topicFilter
    }

    /// Parses `text`; what is wrong with it, in a few words, when it is not an MQTT source.
    public init(parsing text: String) throws(MQTTAddressError) {
        let scheme = text.hasPrefix("mqtts://") ? "mqtts://" : "mqtt://"
        guard text.hasPrefix(scheme) else { throw MQTTAddressError("it does not start with mqtt:// or mqtts://") }
        tls = scheme == "mqtts://"
        port = tls ? 8883 : 1883
        let rest = text.dropFirst(scheme.count)
        guard let slash = rest.firstIndex(of: "/") else {
            throw MQTTAddressError("it has no topic filter (mqtt://HOST[:PORT]/TOPIC-FILTER)")
        }
        var authority = rest[..<slash]
        let topic = String(rest[rest.index(after: slash)...])
        if let at = authority.lastIndex(of: "@") {
            let userinfo = authority[..<at]
            authority = authority[authority.index(after: at)...]
            let parts = userinfo.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard let user = parts[0].removingPercentEncoding, !user.isEmpty else {
                throw MQTTAddressError("its user name is empty or badly percent-encoded")
            }
            username = user
            if parts.count == 2 {
                guard let pass = parts[1].removingPercentEncoding else {
                    throw MQTTAddressError("its password is badly percent-encoded")
                }
                password = pass
            }
        }
        var hostPart = authority
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw MQTTAddressError("its IPv6 host has no ]") }
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            hostPart = authority[authority.index(after: close)...]
            if !hostPart.isEmpty && !hostPart.hasPrefix(":") {
                throw MQTTAddressError("something follows its IPv6 host")
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            hostPart = authority[colon...]
        } else {
            host = String(authority)
            hostPart = ""
        }
        guard !host.isEmpty else { throw MQTTAddressError("it has no host") }
        if hostPart.hasPrefix(":") {
            guard let n = Int32(hostPart.dropFirst()), (1...65535).contains(n) else {
                throw MQTTAddressError("its port \"\(hostPart.dropFirst())\" is not a number from 1 to 65535")
            }
            port = n
        }
        if let problem = Self.filterProblem(topic) { throw MQTTAddressError(problem) }
        topicFilter = topic
    }

    /// A broker without a topic filter, as `geofence sink add --mqtt` takes it: `mqtt://[USER@]HOST[:PORT]`
    /// (or `mqtts://`), a trailing `/` allowed. The topic is the sink's own (`--topic`).
    public init(broker text: String) throws(MQTTAddressError) {
        let scheme = text.hasPrefix("mqtts://") ? "mqtts://" : "mqtt://"
        guard text.hasPrefix(scheme) else { throw MQTTAddressError("it does not start with mqtt:// or mqtts://") }
        let rest = text.dropFirst(scheme.count)
        let authority = rest.prefix { $0 != "/" }
        if rest.count > authority.count + 1 {
            throw MQTTAddressError(
                "it has a path: give the broker only (mqtt://HOST[:PORT]) and the topic with --topic")
        }
        try self.init(parsing: scheme + authority + "/#")
        topicFilter = ""
    }

    /// The broker alone, without the password or a topic: `mqtt://user@host:1883`.
    public var broker: String {
        let user = username.map { ($0.addingPercentEncoding(withAllowedCharacters: .urlUserAllowed) ?? $0) + "@" }
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "\(tls ? "mqtts" : "mqtt")://\(user ?? "")\(shownHost):\(port)"
    }

    /// Where the password is in an `mqtt://` URL as given, in bytes of UTF-8 (`:PASS`, with its colon), so
    /// the engine can blank it in its own command line; nil when the URL has none.
    public static func passwordSpan(in text: String) -> Range<Int>? {
        let bytes = Array(text.utf8)
        let scheme = text.hasPrefix("mqtts://") ? "mqtts://" : "mqtt://"
        let start = scheme.utf8.count
        guard bytes.starts(with: scheme.utf8) else { return nil }
        let end = bytes[start...].firstIndex(of: UInt8(ascii: "/")) ?? bytes.count
        guard let at = bytes[start..<end].lastIndex(of: UInt8(ascii: "@")),
            let colon = bytes[start..<at].firstIndex(of: UInt8(ascii: ":"))
        else { return nil }
        return colon..<at
    }

    /// What is wrong with a topic filter (MQTT 3.1.1 §4.7), or nil.
    static func filterProblem(_ filter: String) -> String? {
        if filter.isEmpty { return "it has no topic filter (mqtt://HOST[:PORT]/TOPIC-FILTER)" }
        if filter.utf8.contains(0) { return "its topic filter contains NUL" }
        let levels = filter.split(separator: "/", omittingEmptySubsequences: false)
        for (i, level) in levels.enumerated() {
            if level.contains("#") && (level != "#" || i != levels.count - 1) {
                return "its topic filter has # other than as the whole last level"
            }
            if level.contains("+") && level != "+" { return "its topic filter has + other than as a whole level" }
        }
        return nil
    }

    /// The address without its password, for logs and `status`.
    public var description: String {
        let user = username.map { ($0.addingPercentEncoding(withAllowedCharacters: .urlUserAllowed) ?? $0) + "@" }
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "\(tls ? "mqtts" : "mqtt")://\(user ?? "")\(shownHost):\(port)/\(topicFilter)"
    }

    /// A client id for a persistent session that stays the same across restarts of one engine: made from
    /// the host name and the state directory, so two engines (here or on another machine) never share one.
    public static func clientID(stateDirectory: String) -> String {
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, name.count - 1)
        let path = URL(fileURLWithPath: stateDirectory).standardizedFileURL.path
        let host = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        // FNV-1a, 64 bits: stable across runs and builds (Swift's Hasher is seeded per process).
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in (host + "\0" + path).utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return "geofence-" + String(hash, radix: 16)
    }
}

/// Why a `--source mqtt://...` is not one.
public struct MQTTAddressError: Error, CustomStringConvertible {
    /// What is wrong with the text, in a few words (`it has no host`).
    public var description: String
    init(_ description: String) { self.description = description }
}
