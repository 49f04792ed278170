import Foundation
import GeofenceCore
import GeofenceSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Severity of a log line (syslog's levels, which journald understands).
public enum LogLevel: Int, Sendable, Comparable, CustomStringConvertible {
    case error = 3
    case warning = 4
    case notice = 5
    case info = 6
    case debug = 7

    /// Less severe is less: `debug < info < ... < error`.
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue > b.rawValue }

    public var description: String {
        switch self {
        case .error: "error"
        case .warning: "warning"
        case .notice: "notice"
        case .info: "info"
        case .debug: "debug"
        }
    }

    /// The level named `error`, `warning` (or `warn`), `notice`, `info` or `debug`, in any case; nil for any
    /// other name.
    public init?(name: String) {
        switch name.lowercased() {
        case "error": self = .error
        case "warning", "warn": self = .warning
        case "notice": self = .notice
        case "info": self = .info
        case "debug": self = .debug
        default: return nil
        }
    }
}

/// One line per event or state change on stderr. Under systemd (JOURNAL_STREAM set) each line starts with
/// `<N>`, the sd-daemon priority prefix, and carries no timestamp (journald adds its own); elsewhere a line
/// is `2026-11-30T14:03:07.123Z info message`.
public struct Logger: Sendable {
    /// The least severe level written: lines below it are dropped (their message is never built).
    public var minimum: LogLevel
    private let journald: Bool
    private let sink: @Sendable (String) -> Void

    /// A logger that writes to standard error, in journald's form when `environment` has `JOURNAL_STREAM`;
    /// `info` and more severe by default.
    public init(minimum: LogLevel = .info, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.minimum = minimum
        journald = environment["JOURNAL_STREAM"] != nil
        sink = { line in try? System.writeAll(2, Array(line.utf8) + [10]) }
    }

    /// A logger that hands lines to `sink` (tests).
    public init(minimum: LogLevel = .debug, sink: @escaping @Sendable (String) -> Void) {
        self.minimum = minimum
        journald = false
        self.sink = sink
    }

    /// Writes `message` as one line at `level`, escaped so that nothing in it can break the line or steer a
    /// terminal; nothing when `level` is below `minimum`.
    public func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        guard level.rawValue <= minimum.rawValue else { return }
        // One line per record whatever the message holds, and nothing that steers a terminal (a refused
        // vehicle name with U+202E, a topic with ESC): `PrintableText`, the one escaping of outside text.
        let text = PrintableText.escaped(message())
        if journald {
            sink("<\(level.rawValue)>\(text)")
        } else {
            sink("\(TimestampFormat.now()) \(level) \(text)")
        }
    }

    /// Logs `m` at `error`: something failed.
    public func error(_ m: @autoclosure () -> String) { log(.error, m()) }
    /// Logs `m` at `warning`: something is wrong but the engine goes on.
    public func warning(_ m: @autoclosure () -> String) { log(.warning, m()) }
    /// Logs `m` at `notice`: a normal but significant change.
    public func notice(_ m: @autoclosure () -> String) { log(.notice, m()) }
    /// Logs `m` at `info`, the default minimum.
    public func info(_ m: @autoclosure () -> String) { log(.info, m()) }
    /// Logs `m` at `debug`, written only when `minimum` is `debug`.
    public func debug(_ m: @autoclosure () -> String) { log(.debug, m()) }
}

enum TimestampFormat {
    static func now() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let seconds = Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
        return TimestampParser.format(Date(timeIntervalSince1970: seconds))
    }
}
