import Foundation

/// Decodes OwnTracks location messages (`{"_type":"location","lat":…,"lon":…,"tst":…}`), the JSON the
/// OwnTracks apps publish to `owntracks/USER/DEVICE`, into `Fix`.
///
/// Only `_type` `location` is a fix; other OwnTracks types (`transition`, `lwt`, `card`, ...) are `other`.
/// `acc` is the horizontal accuracy in metres, `tst` the fix time in Unix seconds, `vel` the speed in
/// km/h, `cog` the course in degrees, `alt` the altitude in metres. A field of the wrong type is
/// `malformed` (`wrong-type`), never a fix with made-up values.
package enum OwnTracksJSON {
    /// Whether a payload is an OwnTracks message at all (a JSON object with a string `_type`), checked
    /// cheaply before decoding: gpsd's TPVs have `class` instead.
    package static func isOwnTracks(_ object: JSONValue) -> Bool {
        object["_type"]?.stringValue != nil
    }

    /// The vehicle an OwnTracks topic names: `USER/DEVICE` of `owntracks/USER/DEVICE[/...]`, else nil.
    package static func subject(topic: String) -> String? {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        guard levels.count >= 3, levels[0] == "owntracks", !levels[1].isEmpty, !levels[2].isEmpty else { return nil }
        return levels[1] + "/" + levels[2]
    }

    /// A tracker id (`tid`) for a vehicle, as the OwnTracks apps make a device's default one: the last two
    /// characters of its device name (`alice/phone`: `ne`; `truck-7`: `-7`).
    package static func trackerID(subject: String) -> String {
        let device = subject.split(separator: "/").last.map(String.init) ?? subject
        return String(device.suffix(2))
    }

    /// - Parameters:
    ///   - object: the parsed payload.
    ///   - subject: the vehicle (from the topic, see `subject(topic:)`).
    package static func decode(_ object: JSONValue, subject: String) -> GPSDJSONReport {
        guard let type = object["_type"]?.stringValue else {
            return .malformed(.init(.noClass, "no \"_type\" member"))
        }
        guard type == "location" else { return .other("OwnTracks \(type)") }
        var numbers: [String: Double] = [:]
        for key in ["lat", "lon", "acc", "tst", "vel", "cog", "alt", "vac"] {
            guard let value = object[key] else { continue }
            switch value {
            case .number(let n): numbers[key] = n
            case .null: break
            default: return .malformed(.init(.wrongType, "OwnTracks field \"\(key)\" has the wrong type"))
            }
        }
        if let tid = object["tid"], tid.stringValue == nil, !tid.isNull {
            return .malformed(.init(.wrongType, "OwnTracks field \"tid\" has the wrong type"))
        }
        if let problem = SubjectName.problem(subject) {
            return .malformed(.init(.badDevice, "OwnTracks vehicle \(problem)"))
        }
        func finite(_ key: String) -> Double? {
            guard let v = numbers[key], v.isFinite else { return nil }
            return v
        }
        var time: Date?
        if let tst = numbers["tst"] {
            // Held to the years the engine reads and writes (before 10000): a `tst` of 1e300 once reached an
            // `Int` conversion and ended the engine, at every restart since the broker offered it again.
            guard tst.isFinite, tst > 0, Fix.representableTimes.contains(tst) else {
                return .malformed(
                    .init(.badTime, "OwnTracks \"tst\" \(tst) is not a Unix time between 1970 and the year 9999"))
            }
            time = Date(timeIntervalSince1970: tst)
        }
        let latitude = finite("lat")
        let longitude = finite("lon")
        let altitude = finite("alt")
        // A phone's location is a fix; with an altitude, a 3D one. One without a position is counted as such.
        let mode: FixMode = altitude == nil ? .twoD : .threeD
        return .tpv(
            Fix(
                subject: VisibleName.normalized(subject), time: time, mode: mode, latitude: latitude,
                longitude: longitude, altitudeMSL: altitude,
                horizontalAccuracy: finite("acc").flatMap { $0 >= 0 ? $0 : nil },
                verticalAccuracy: finite("vac").flatMap { $0 >= 0 ? $0 : nil },
                speed: finite("vel").flatMap { $0 >= 0 ? $0 / 3.6 : nil },
                course: finite("cog").flatMap { $0 >= 0 ? $0 : nil }))
    }
}
