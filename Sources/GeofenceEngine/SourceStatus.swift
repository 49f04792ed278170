import Foundation
import GeofenceCore
import GeofenceGPSD

/// What a fleet source knows about itself, in its own terms: the first and fourth questions for a stream
/// of JSON lines (is it open, are lines arriving, are they usable fixes, when was the last one), or for an
/// MQTT subscription (is the broker connected, are messages arriving, ...).
///
/// The engine writes it to the store's settings (`source.status`) every tick, so `geofence status` can
/// answer for that source instead of asking a gpsd the engine does not use.
public struct SourceStatus: Sendable, Equatable {
    /// `json` (a file, FIFO or standard input) or `mqtt` (a broker's topic filter).
    public var kind = "json"
    /// The file's path, or the MQTT address without its password.
    public var path: String
    /// Whether the file, FIFO or standard input is open now; for MQTT, whether the broker is connected.
    public var open = false
    /// Why it is not open (a FIFO that cannot be opened again, a broker that went away), when it is not.
    public var problem: String?
    /// Lines read (for MQTT: messages received).
    public var lines = 0
    /// Lines (messages) that gave a usable fix: 2D or 3D, a valid position, not dated ahead of the clock.
    /// The fix filter may still refuse some of them.
    public var usableFixes = 0
    /// Lines of other classes (SKY, VERSION, ...): not errors, not fixes.
    public var ignored = 0
    /// Lines that gave no usable fix, by reason (`not-json`, `no-position`, `bad-device`, ...).
    public var unusable: [String: Int] = [:]
    /// The last usable fix: its own time, and when it was read (the wall clock).
    public var lastFixTime: Date?
    /// When the last usable fix was read, by the wall clock; nil before the first.
    public var lastFixRead: Date?
    /// The watchdog's word: `awaiting-first-fix`, `receiving`, `silent` or `lost`.
    package var liveness = Liveness.awaitingFirstFix
    /// Vehicle names that arrived on more than one MQTT topic (two receivers taken as one vehicle).
    public var sharedNames = 0

    /// A JSON-lines source's status, for `path` (`-` for standard input), with nothing read yet.
    public init(path: String) { self.path = path }

    /// An MQTT subscription's status; `address` is shown as it is, so it must carry no password.
    public init(mqtt address: String) {
        kind = "mqtt"
        path = address
    }

    private var isMQTT: Bool { kind == "mqtt" }
    /// What the source delivers: lines, or MQTT messages.
    public var unit: String { isMQTT ? "message" : "line" }

    /// Lines (messages) that gave no usable fix, all reasons together.
    public var unusableTotal: Int { unusable.values.reduce(0, +) }

    /// "21 no-position, 3 not-json", most frequent first.
    public var unusableSummary: String {
        unusable.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { "\($0.value) \($0.key)" }
            .joined(separator: ", ")
    }

    /// Where the lines come from, as `status` and the log say it.
    public var label: String {
        isMQTT ? "MQTT \(path)" : path == "-" ? "JSON lines on standard input" : "JSON lines from \(path)"
    }

    /// How `status` says the first question's answer: open or connected, or why not.
    public var openText: String {
        if isMQTT {
            return open ? "connected" : "not connected" + (problem.map { " (\($0))" } ?? "")
        }
        return open
            ? "open" : "not open" + (problem.map { " (\($0))" } ?? " (a FIFO waiting for a writer, or at its end)")
    }

    /// "9 lines read", "9 messages received".
    public var countText: String { isMQTT ? "\(lines) messages received" : "\(lines) lines read" }

    /// Why no usable fix has come: what is known, in the source's terms (for the `silent` event).
    public var silenceReason: String {
        if isMQTT {
            if !open { return "\(label) is not connected" + (problem.map { ": \($0)" } ?? "") }
            if lines == 0 { return "no message has arrived from \(path)" }
            var text = "\(lines) message(s) received from \(path), none a usable fix"
            if unusableTotal > 0 { text += " (" + unusableSummary + ")" }
            return text
        }
        if !open { return "\(label) is not open" + (problem.map { ": \($0)" } ?? "") }
        if lines == 0 {
            return path == "-" ? "no line has arrived on standard input" : "no line has arrived from \(path)"
        }
        var text = "\(lines) line(s) read from \(path == "-" ? "standard input" : path), none a usable fix"
        if unusableTotal > 0 { text += " (" + unusableSummary + ")" }
        return text
    }

    /// Why usable fixes stopped (for the `lost` event).
    public var lostReason: String {
        if isMQTT {
            var text =
                open
                ? "\(usableFixes) usable fix(es) from \(path) so far"
                : "\(label) is not connected"
                    + (problem.map { ": \($0)" } ?? "") + "; \(usableFixes) usable fix(es) so far"
            if let lastFixRead { text += ", the last received at \(TimestampParser.format(lastFixRead))" }
            if unusableTotal > 0 { text += "; \(unusableTotal) unusable message(s) (\(unusableSummary))" }
            return text
        }
        if !open { return "\(label) is not open" + (problem.map { ": \($0)" } ?? " (its writer went away)") }
        var text = "\(usableFixes) usable fix(es) from \(path == "-" ? "standard input" : path) so far"
        if let lastFixRead { text += ", the last read at \(TimestampParser.format(lastFixRead))" }
        if unusableTotal > 0 { text += "; \(unusableTotal) unusable line(s) (\(unusableSummary))" }
        return text
    }

    package var json: JSONObject {
        var o: JSONObject = [
            "kind": .string(kind), "path": .string(path), "open": .bool(open), "lines": .number(Double(lines)),
            "usableFixes": .number(Double(usableFixes)), "ignored": .number(Double(ignored)),
            "liveness": .string(liveness.rawValue),
            "unusable": .object(
                JSONObject(
                    uniqueKeysWithValues: unusable.sorted { $0.key < $1.key }.map {
                        ($0.key, JSONValue.number(Double($0.value)))
                    })),
        ]
        if let problem { o["problem"] = .string(problem) }
        if sharedNames > 0 { o["sharedNames"] = .number(Double(sharedNames)) }
        if let lastFixTime { o["lastFixTime"] = .string(TimestampParser.format(lastFixTime)) }
        if let lastFixRead { o["lastFixRead"] = .string(TimestampParser.format(lastFixRead)) }
        return o
    }

    /// Reads back what `json` wrote (nil for anything else).
    package init?(json value: JSONValue) {
        guard let kind = value["kind"]?.stringValue, kind == "json" || kind == "mqtt",
            let path = value["path"]?.stringValue
        else { return nil }
        self.kind = kind
        self.path = path
        open = value["open"]?.boolValue ?? false
        problem = value["problem"]?.stringValue
        lines = value["lines"]?.intValue ?? 0
        usableFixes = value["usableFixes"]?.intValue ?? 0
        ignored = value["ignored"]?.intValue ?? 0
        liveness = value["liveness"]?.stringValue.flatMap(Liveness.init(rawValue:)) ?? .awaitingFirstFix
        sharedNames = value["sharedNames"]?.intValue ?? 0
        for (key, n) in value["unusable"]?.objectValue ?? [:] { unusable[key] = n.intValue ?? 0 }
        lastFixTime = value["lastFixTime"]?.stringValue.flatMap { try? TimestampParser.parse($0) }
        lastFixRead = value["lastFixRead"]?.stringValue.flatMap { try? TimestampParser.parse($0) }
    }
}
