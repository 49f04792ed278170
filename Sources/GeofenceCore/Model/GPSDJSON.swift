import Foundation

/// One line of gpsd's JSON protocol (what `gpspipe -w` prints), as far as the engine cares.
package enum GPSDJSONReport: Sendable, Equatable {
    /// A time-position-velocity report.
    case tpv(Fix)
    /// Any other class (`SKY`, `VERSION`, `DEVICES`, `WATCH`, ...), by name.
    case other(String)
    /// Not a gpsd report, or a TPV whose vehicle name is refused: why, for counting and one clear log line.
    case malformed(MalformedLine)
}

/// Why a line is not a usable gpsd report: a kind to count by, and the words for a log line.
package struct MalformedLine: Sendable, Equatable, CustomStringConvertible {
    package enum Kind: String, Sendable, CaseIterable {
        case tooLong = "too-long"
        case notJSON = "not-json"
        case noClass = "no-class"
        case wrongType = "wrong-type"
        case badTime = "bad-time"
        /// The `device` (the vehicle's name, the subject of its events) breaks `SubjectName`'s rule.
        case badDevice = "bad-device"
    }

    package var kind: Kind
    package var description: String

    package init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }
}

/// Decodes gpsd JSON reports (TPV into `Fix`); used by `replay` and fleet ingest (`--source json:`).
///
/// Lenient where gpsd is (absent fields are absent, NaN-like `null`s are absent), strict where the
/// input is hostile: a line that is not a JSON object, has no `class`, or gives a field the wrong type
/// is `malformed`, never a crash and never a fix with made-up values.
package enum GPSDJSON {
    /// Lines longer than this are refused without parsing (gpsd's own reports are under 2 KiB, SKY
    /// with many satellites under 8 KiB).
    package static let maximumLineLength = 64 * 1024

    /// - Parameters:
    ///   - defaultSubject: the subject when the TPV names no `device`.
    ///   - receivedAt: the wall clock at receipt, for live sources; nil for recordings.
    package static func decode(
        _ line: some Collection<UInt8>, defaultSubject: String = "gpsd", receivedAt: Date? = nil
    ) -> GPSDJSONReport {
        if line.count > maximumLineLength {
            return .malformed(.init(.tooLong, "line of \(line.count) bytes is too long"))
        }
        // Raw NMEA (`gpspipe -r`, or interleaved as in gpsd's regression logs) and comments are not reports.
        // The first byte through the line's own storage: called from another module, this body is generic, and
        // `Collection.first` looked up the index type's conformances each time (hundreds of instructions a line).
        switch line.withContiguousStorageIfAvailable({ $0.first }) ?? line.first {
        case UInt8(ascii: "$"), UInt8(ascii: "!"): return .other("NMEA")
        case UInt8(ascii: "#"): return .other("comment")
        default: break
        }
        var klass: String?
        var device: String?
        var mode: Double?
        var time: String?
        var lat: Double?
        var lon: Double?
        var altHAE: Double?
        var altMSL: Double?
        var alt: Double?
        var eph: Double?
        var epx: Double?
        var epy: Double?
        var epv: Double?
        var speed: Double?
        var track: Double?
        var badField: String?
        do {
            try JSON.forEachMember(in: line, matching: tpvFields) { key, value in
                func number() -> Double? {
                    switch value {
                    case .number(let n): return n
                    case .null: return nil
                    default:
                        badField = badField ?? key.rawValue
                        return nil
                    }
                }
                switch key {
                case .class: klass = value.stringValue
                case .device:
                    // A vehicle named by a number (or anything but a string) is refused, not renamed `fleet`.
                    if case .string(let s) = value {
                        device = s
                    } else if !value.isNull {
                        badField = badField ?? key.rawValue
                    }
                case .mode: mode = number()
                case .time:
                    if case .string(let s) = value {
                        time = s
                    } else if !value.isNull {
                        badField = badField ?? key.rawValue
                    }
                case .lat: lat = number()
                case .lon: lon = number()
                case .altHAE: altHAE = number()
                case .altMSL: altMSL = number()
                case .alt: alt = number()
                case .eph: eph = number()
                case .epx: epx = number()
                case .epy: epy = number()
                case .epv: epv = number()
                case .speed: speed = number()
                case .track: track = number()
                }
            }
        } catch {
            return .malformed(.init(.notJSON, "not a JSON object: \(error)"))
        }
        guard let klass else { return .malformed(.init(.noClass, "no \"class\" member")) }
        guard klass == "TPV" else { return .other(klass) }
        if let badField { return .malformed(.init(.wrongType, "TPV field \"\(badField)\" has the wrong type")) }
        if let device, let problem = SubjectName.problem(device) {
            return .malformed(.init(.badDevice, "TPV \"device\" \(problem)"))
        }

        var fixTime: Date?
        if let time {
            guard let parsed = try? TimestampParser.parse(time) else {
                return .malformed(.init(.badTime, "TPV time \"\(time.prefix(40))\" is not a timestamp"))
            }
            fixTime = parsed
        }
        let modeValue = mode.flatMap { $0.isFinite && $0 == $0.rounded() ? Int(exactly: $0) : nil }
        let fixMode = modeValue.flatMap(FixMode.init(rawValue:)) ?? .unknown
        return .tpv(
            Fix(
                subject: device.map(VisibleName.normalized) ?? defaultSubject, time: fixTime, receivedAt: receivedAt,
                mode: fixMode,
                latitude: finite(lat), longitude: finite(lon), altitudeHAE: finite(altHAE),
                altitudeMSL: finite(altMSL ?? alt),
                horizontalAccuracy: Fix.horizontalAccuracy(eph: eph, epx: epx, epy: epy),
                verticalAccuracy: finite(epv).flatMap { $0 >= 0 ? $0 : nil }, speed: finite(speed),
                course: finite(track)))
    }

    /// The TPV members the decoder reads; a key table lets the parser match them without building strings.
    private enum TPVField: String, CaseIterable, Sendable {
        case `class`, device, mode, time, lat, lon, altHAE, altMSL, alt, eph, epx, epy, epv, speed, track
    }

    private static let tpvFields = JSONKeyTable(TPVField.self)

    private static func finite(_ v: Double?) -> Double? {
        guard let v, v.isFinite else { return nil }
        return v
    }
}
