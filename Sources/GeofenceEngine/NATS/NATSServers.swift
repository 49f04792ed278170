import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The NATS servers a command talks to and the credentials it logs in with, from the text of one option
/// (`run --source`, `deliver --from`, `status --nats`, `add`/`remove`/`import --nats`): every command parses
/// them here, under the same rules and with the same messages.
///
/// The servers are `nats://[USER@]HOST[:PORT]`, comma-separated (the scheme may be left out, the port is 4222
/// when it is). The user name may be in the URLs, the same in each (one in a single URL applies to all); the
/// password never is: a command line is seen by `ps` and kept in the shell's history, so a password in a URL
/// is refused, and not echoed. It comes from a file (`--nats-password-file`, one line) or from
/// `GEOFENCE_NATS_PASSWORD`, as the MQTT source takes its own. `urls` holds neither the user name nor the
/// password, so no error, log line or status that shows it (nor nats.c's connected URL) holds them.
package struct NATSServers: Sendable, Equatable {
    /// `nats://HOST:PORT,nats://HOST:PORT…`, without a user name or password: what nats.c is given, and what
    /// errors, logs and status show.
    package var urls: String
    package var user: String?
    package var password: String?

    /// The option every command takes the password file with.
    package static let passwordFileOption = "--nats-password-file"
    /// The variable that gives the password instead.
    package static let passwordVariable = "GEOFENCE_NATS_PASSWORD"

    /// Why the servers or their credentials are refused; the CLI says it as it says its own errors. None
    /// holds the password.
    package enum Refusal: Error, Equatable {
        /// `invalid value for OPTION: REASON` (exit 64).
        case invalid(option: String, reason: String)
        /// A usage error (exit 64).
        case usage(String)
        /// The password file cannot be read (exit 66).
        case unreadable(String)
    }

    package init(urls: String, user: String? = nil, password: String? = nil) {
        self.urls = urls
        self.user = user
        self.password = password
    }

    /// The servers `text` (the value of `option`) names, the password from `passwordFile` (the value of
    /// `--nats-password-file`) or else `environment`'s `GEOFENCE_NATS_PASSWORD`.
    package init(parsing text: String, option: String, passwordFile: String?, environment: [String: String]) throws {
        let items = text.split(separator: ",", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard items.allSatisfy({ !$0.isEmpty }) else {
            throw Refusal.invalid(option: option, reason: "give nats://HOST:PORT, or several separated by commas")
        }
        // A password first, so that no later message can echo one.
        for item in items {
            let rest = item.range(of: "://").map { item[$0.upperBound...] } ?? item[...]
            if let at = rest.lastIndex(of: "@"), rest[..<at].contains(":") {
                throw Refusal.invalid(
                    option: option,
                    reason: "a password in the URL is seen by `ps` and kept in the shell's history; give it with "
                        + "\(Self.passwordFileOption) FILE or \(Self.passwordVariable)")
            }
        }
        // A server that is not right is echoed, unless the text has a user name: a password holding a comma
        // would have been cut in two above, and its part would show.
        let hidesItems = text.contains("@")
        var servers: [String] = []
        var user: String?
        for (index, item) in items.enumerated() {
            let shown = hidesItems ? "server \(index + 1) of \(items.count)" : "\"\(item)\""
            var rest = item[...]
            if let scheme = rest.range(of: "://") {
                guard rest[..<scheme.lowerBound] == "nats" else {
                    throw Refusal.invalid(option: option, reason: "\(shown) is not a nats:// URL")
                }
                rest = rest[scheme.upperBound...]
            }
            if let at = rest.lastIndex(of: "@") {
                let name = String(rest[..<at])
                guard !name.isEmpty, user == nil || user == name else {
                    throw Refusal.invalid(option: option, reason: "give one user name, the same in every URL")
                }
                user = name
                rest = rest[rest.index(after: at)...]
            }
            guard Self.isHostPort(rest) else {
                throw Refusal.invalid(
                    option: option, reason: "\(shown) is not HOST:PORT (as in nats://127.0.0.1:4222)")
            }
            servers.append("nats://" + rest)
        }
        var password: String?
        if let file = passwordFile {
            guard let data = FileManager.default.contents(atPath: file) else {
                let reason = access(file, R_OK) == 0 ? "cannot be read" : String(cString: strerror(errno))
                throw Refusal.unreadable("cannot read the NATS password file \(file): \(reason)")
            }
            var line = String(decoding: data, as: UTF8.self)
            if line.hasSuffix("\n") { line.removeLast() }
            password = line
        } else if let value = environment[Self.passwordVariable] {
            password = value
        }
        if password != nil, user == nil {
            throw Refusal.usage("a NATS password needs a user name: \(option) nats://USER@HOST:PORT")
        }
        self.init(urls: servers.joined(separator: ","), user: user, password: password)
    }

    /// `HOST`, `HOST:PORT`, `[IPv6]` or `[IPv6]:PORT`, the port from 1 to 65535; nothing that would make
    /// nats.c read a path, a query or a second server.
    static func isHostPort(_ text: Substring) -> Bool {
        guard
            !text.isEmpty,
            !text.unicodeScalars.contains(where: {
                $0.properties.isWhitespace || $0.value < 32 || $0.value == 127 || "/?#@,".unicodeScalars.contains($0)
            })
        else { return false }
        var host = text
        if let colon = text.lastIndex(of: ":"), !text[colon...].contains("]") {
            let port = text[text.index(after: colon)...]
            guard (1...5).contains(port.count), port.allSatisfy({ $0.isASCII && $0.isNumber }),
                let number = Int(port), (1...65535).contains(number)
            else { return false }
            host = text[..<colon]
        }
        if host.hasPrefix("[") { return host.count > 2 && host.hasSuffix("]") }
        return !host.isEmpty && !host.contains(where: { ":[]".contains($0) })
    }
}

extension NATSConnection {
    /// Connects to `servers` with their credentials (`init(urls:name:user:password:…)`).
    package convenience init(
        _ servers: NATSServers, name: String = "geofence", connectTimeout: Duration = .seconds(2),
        requestTimeout: Duration = .seconds(5), reconnectWait: Duration = .milliseconds(250),
        ignoreDiscoveredServers: Bool = false, buffersWhileReconnecting: Bool = true
    ) throws {
        try self.init(
            urls: servers.urls, name: name, user: servers.user, password: servers.password,
            connectTimeout: connectTimeout, requestTimeout: requestTimeout, reconnectWait: reconnectWait,
            ignoreDiscoveredServers: ignoreDiscoveredServers, buffersWhileReconnecting: buffersWhileReconnecting)
    }
}
