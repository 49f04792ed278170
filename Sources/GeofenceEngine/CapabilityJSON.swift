import Foundation
import GeofenceCore

/// The capability snapshot as JSON (`status --json`, and the daemon's copy in the store), both ways.
package enum CapabilityJSON {
    static let fieldNames: [(CapabilitySnapshot.ReportedFields, String)] = [
        (.time, "time"), (.position2D, "2D"), (.position3D, "3D"), (.speed, "speed"), (.course, "course"),
        (.horizontalAccuracy, "horizontal-accuracy"), (.verticalAccuracy, "vertical-accuracy"),
    ]

    package static func encode(_ s: CapabilitySnapshot) -> JSONObject {
        var o = JSONObject()
        if let d = s.daemon {
            o["gpsd"] = [
                "release": .string(d.release), "revision": .string(d.revision),
                "protocol": .string("\(d.protocolMajor).\(d.protocolMinor)"),
            ]
        }
        o["devices"] = .array(
            s.devices.map { d in
                var device: JSONObject = ["path": .string(d.path)]
                if let driver = d.driver { device["driver"] = .string(driver) }
                if let subtype = d.subtype { device["subtype"] = .string(subtype) }
                if let activated = d.activated { device["activated"] = .string(TimestampParser.format(activated)) }
                if let native = d.nativeMode { device["native"] = .bool(native) }
                if let interval = d.updateInterval { device["interval"] = .number(interval) }
                device["reports"] = .array(fieldNames.filter { d.reports.contains($0.0) }.map { .string($0.1) })
                return .object(device)
            })
        return o
    }

    /// Reads back what `encode` wrote (for `status` from the daemon's copy).
    package static func decode(_ o: JSONObject) -> CapabilitySnapshot {
        var snapshot = CapabilitySnapshot()
        if let g = o["gpsd"]?.objectValue {
            let proto = (g["protocol"]?.stringValue ?? "0.0").split(separator: ".").compactMap { Int($0) }
            snapshot.daemon = .init(
                release: g["release"]?.stringValue ?? "?", revision: g["revision"]?.stringValue ?? "",
                protocolMajor: proto.first ?? 0, protocolMinor: proto.dropFirst().first ?? 0)
        }
        for item in o["devices"]?.arrayValue ?? [] {
            guard let path = item["path"]?.stringValue else { continue }
            var reports = CapabilitySnapshot.ReportedFields()
            let names = Set(item["reports"]?.arrayValue?.compactMap(\.stringValue) ?? [])
            for (field, name) in fieldNames where names.contains(name) { reports.insert(field) }
            snapshot.devices.append(
                .init(
                    path: path, driver: item["driver"]?.stringValue, subtype: item["subtype"]?.stringValue,
                    activated: item["activated"]?.stringValue.flatMap { try? TimestampParser.parse($0) },
                    nativeMode: item["native"]?.boolValue, reports: reports,
                    observedInterval: item["interval"]?.doubleValue))
        }
        return snapshot
    }

    /// One line for people: `u-blox on /dev/ttyACM0, every 1 s, reports 3D, speed, course, horizontal accuracy`.
    package static func describe(_ d: CapabilitySnapshot.Device) -> String {
        var text = d.path
        if let driver = d.driver { text += " (\(driver)" + (d.subtype.map { ", \($0)" } ?? "") + ")" }
        if let interval = d.updateInterval { text += String(format: ", a fix every %g s", interval) }
        let fields = fieldNames.filter { d.reports.contains($0.0) }.map(\.1)
        if !fields.isEmpty { text += ", reports " + fields.joined(separator: ", ") }
        return text
    }
}
