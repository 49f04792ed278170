/// Where gpsd listens, and optionally which of its devices to watch, as gpsd's own clients
/// take it on the command line: `HOST[:PORT[:DEVICE]]`, default `localhost:2947`.
///
/// The forms follow gpsd's `gpsd_source_spec()`: an IPv6 literal goes in brackets
/// (`[::1]:2947`), an empty host or port keeps the default (`:2948`, `::/dev/ttyUSB0`),
/// a bare path means a device on the default gpsd (`/dev/ttyACM0`), and the device is
/// everything after the second colon (`localhost:2947:udp://127.0.0.1:5000`).
/// Unlike gpsd, a port must be a number and a device must look like a path or a URL, so a
/// mistyped address fails here with a reason instead of as a confusing connection error.
public struct GPSDAddress: Sendable, Hashable, CustomStringConvertible {
    /// The host when none is given: this machine.
    public static let defaultHost = "localhost"
    /// gpsd's registered TCP port, when none is given.
    public static let defaultPort: UInt16 = 2947
    /// `localhost:2947`, all devices.
    public static let `default` = GPSDAddress()

    /// A host name or an IP address (IPv6 without brackets).
    public var host: String
    /// gpsd's TCP port (parsing accepts 1 to 65535).
    public var port: UInt16
    /// The one device to watch (a path such as `/dev/ttyACM0`, or a gpsd URL such as
    /// `udp://127.0.0.1:5000`); nil watches every device gpsd has.
    public var device: String?

    /// An address as given, unchecked (`init(parsing:)` checks a string); by default `localhost:2947`, all devices.
    public init(host: String = GPSDAddress.defaultHost, port: UInt16 = GPSDAddress.defaultPort, device: String? = nil) {
        self.host = host
        self.port = port
        self.device = device
    }

    /// Parses `HOST[:PORT[:DEVICE]]`; an empty string is the default address.
    public init(parsing spec: String) throws(ParseError) {
        self.init()
        if spec.isEmpty { return }
        if spec.hasPrefix("/") {
            device = spec
            return
        }

        var rest = Substring(spec)
        var bracketedHost: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw .unclosedBracket(spec: spec) }
            bracketedHost = rest[rest.index(after: rest.startIndex)..<close]
            rest = rest[rest.index(after: close)...]
            guard rest.isEmpty || rest.hasPrefix(":") else { throw .unexpectedText(String(rest), spec: spec) }
        }

        let hostPart: Substring
        var afterHost: Substring?
        if let colon = rest.firstIndex(of: ":") {
            hostPart = bracketedHost ?? rest[..<colon]
            afterHost = rest[rest.index(after: colon)...]
        } else {
            hostPart = bracketedHost ?? rest
        }
        if let bracketedHost, bracketedHost.isEmpty { throw .emptyHost(spec: spec) }
        if !hostPart.isEmpty {
            guard !hostPart.contains(where: \.isWhitespace) else { throw .badHost(String(hostPart), spec: spec) }
            host = String(hostPart)
        }

        guard let afterHost else { return }
        let portPart: Substring
        var devicePart: Substring?
        if let colon = afterHost.firstIndex(of: ":") {
            portPart = afterHost[..<colon]
            devicePart = afterHost[afterHost.index(after: colon)...]
        } else {
            portPart = afterHost
        }
        if !portPart.isEmpty {
            guard portPart.allSatisfy(\.isASCII), portPart.allSatisfy(\.isNumber),
                let number = UInt16(portPart), number > 0
            else { throw .badPort(String(portPart), spec: spec) }
            port = number
        }
        if let devicePart, !devicePart.isEmpty {
            // A device is a path or a URL. Anything else is almost always an IPv6 address
            // written without brackets ("::1" reads, in gpsd's syntax, as device "1").
            guard devicePart.hasPrefix("/") || devicePart.contains("://") else {
                throw .badDevice(String(devicePart), spec: spec)
            }
            device = String(devicePart)
        }
    }

    /// Why a `HOST[:PORT[:DEVICE]]` string is not an address.
    public enum ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        case unclosedBracket(spec: String)
        case unexpectedText(String, spec: String)
        case emptyHost(spec: String)
        case badHost(String, spec: String)
        case badPort(String, spec: String)
        case badDevice(String, spec: String)

        public var description: String {
            switch self {
            case .unclosedBracket(let spec):
                return "bad gpsd address \"\(spec)\": an IPv6 address needs a closing bracket, as in [::1]:2947"
            case .unexpectedText(let text, let spec):
                return "bad gpsd address \"\(spec)\": unexpected \"\(text)\" after the bracketed host"
            case .emptyHost(let spec):
                return "bad gpsd address \"\(spec)\": the host between the brackets is empty"
            case .badHost(let host, let spec):
                return "bad gpsd address \"\(spec)\": \"\(host)\" is not a host name"
            case .badPort(let port, let spec):
                return "bad gpsd address \"\(spec)\": port \"\(port)\" is not a number from 1 to 65535"
            case .badDevice(let device, let spec):
                return "bad gpsd address \"\(spec)\": device \"\(device)\" is neither a path (/dev/ttyACM0) "
                    + "nor a URL (udp://…); write an IPv6 host in brackets, as in [::1]:2947"
            }
        }
    }

    /// `HOST:PORT[:DEVICE]`, with an IPv6 host in brackets; parses back to the same address.
    public var description: String {
        let hostText = host.contains(":") ? "[\(host)]" : host
        if let device { return "\(hostText):\(port):\(device)" }
        return "\(hostText):\(port)"
    }

    /// True when the host is this machine, so that advice such as "start gpsd" applies here.
    public var isLocal: Bool {
        let lowered = host.lowercased()
        return lowered == "localhost" || lowered == "::1" || lowered.hasPrefix("127.") || lowered == "localhost6"
    }
}
