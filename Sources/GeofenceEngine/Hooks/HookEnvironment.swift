import Foundation
import GeofenceCore
import GeofenceStore

/// The environment a hook runs with: a few variables from the daemon, then the event as `GEOFENCE_*`.
///
/// Event data reaches the hook only here and on its stdin, never in the command string, so a region named
/// `$(rm -rf ~)` is a value the shell never parses.
enum HookEnvironment {
    /// Names whose values come from the delivery or the event's well-known fields, whatever else it carries.
    static func variables(for delivery: ClaimedDelivery, inherited: [String: String]) -> [String: String] {
        var vars: [String: String] = [:]
        // Every scalar field of the event, so state events' own fields (`reason`, ...) and fields added later
        // reach hooks without a change here; the fix's fields without a prefix.
        for field in delivery.fields.scalars { vars["GEOFENCE_" + name(field.key)] = field.text }
        vars["GEOFENCE_EVENT"] = delivery.eventType
        vars["GEOFENCE_EVENT_ID"] = delivery.eventID
        vars["GEOFENCE_ID"] = nil
        vars["GEOFENCE_TYPE"] = nil
        if let region = delivery.region {
            vars["GEOFENCE_REGION"] = region
            vars["GEOFENCE_REGION_TOPIC"] = SubjectName.topicLevel(region)
        }
        if let name = delivery.regionName { vars["GEOFENCE_REGION_NAME"] = name }
        if let subject = delivery.subject {
            vars["GEOFENCE_SUBJECT"] = subject
            vars["GEOFENCE_SUBJECT_TOPIC"] = SubjectName.topicLevel(subject)
        }
        vars["GEOFENCE_ATTEMPT"] = String(delivery.attempt)
        vars["GEOFENCE_DELIVERY_ID"] = String(delivery.id)
        vars["GEOFENCE_HOOK"] = delivery.hook.hasPrefix("hook:") ? String(delivery.hook.dropFirst(5)) : delivery.hook
        for (key, value) in inherited where vars[key] == nil { vars[key] = value }
        return vars
    }

    /// `NAME=value` strings, sorted, with NUL bytes (which cannot cross exec) replaced by U+FFFD.
    static func strings(_ vars: [String: String]) -> [String] {
        vars.sorted { $0.key < $1.key }.map { key, value in
            key + "=" + (value.utf8.contains(0) ? value.replacingOccurrences(of: "\0", with: "\u{FFFD}") : value)
        }
    }

    /// `accuracyEstimated` → `ACCURACY_ESTIMATED`, `region-status` → `REGION_STATUS`, `lat` → `LAT`.
    static func name(_ key: String) -> String {
        var out: [UInt8] = []
        var previousLowerOrDigit = false
        for byte in key.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"):
                out.append(byte - 32)
                previousLowerOrDigit = true
            case UInt8(ascii: "A")...UInt8(ascii: "Z"):
                if previousLowerOrDigit { out.append(UInt8(ascii: "_")) }
                out.append(byte)
                previousLowerOrDigit = false
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                out.append(byte)
                previousLowerOrDigit = true
            default:
                // Anything else (a dash, a non-ASCII byte) cannot be part of a portable variable name.
                out.append(UInt8(ascii: "_"))
                previousLowerOrDigit = false
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
