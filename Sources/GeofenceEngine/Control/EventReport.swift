import Foundation
import GeofenceCore
import GeofenceStore

/// An event and its deliveries as `geofence events --json` and the control socket's `events` show them.
package enum EventReport {
    /// `hook:ID` → `ID`; `region` stays.
    package static func hookName(_ reference: String) -> String {
        reference.hasPrefix("hook:") ? String(reference.dropFirst(5)) : reference
    }

    package static func json(_ item: EventDeliveries) -> JSONObject {
        let e = item.event
        var o: JSONObject = ["seq": .number(Double(e.seq)), "id": .string(e.id), "type": .string(e.type)]
        if let region = e.region { o["region"] = .string(region) }
        if let subject = e.subject { o["subject"] = .string(subject) }
        o["time"] = .string(TimestampParser.format(e.time))
        o["createdAt"] = .string(TimestampParser.format(e.createdAt))
        o["event"] = (try? JSON.parse(e.body)) ?? .string(e.body)
        o["dispatched"] = .bool(item.dispatched)
        o["deliveries"] = .array(item.deliveries.map { .object(json($0)) })
        return o
    }

    package static func json(_ d: StoredDelivery) -> JSONObject {
        var o: JSONObject = [
            "id": .number(Double(d.id)), "hook": .string(EventReport.hookName(d.hook)),
            "regionHook": .bool(d.hook == "region"), "command": .string(d.command),
            "status": .string(d.status.rawValue), "attempts": .number(Double(d.attempts)),
        ]
        if d.status == .pending { o["nextAttemptAt"] = .string(TimestampParser.format(d.nextAttemptAt)) }
        o["createdAt"] = .string(TimestampParser.format(d.createdAt))
        if let t = d.startedAt { o["startedAt"] = .string(TimestampParser.format(t)) }
        if let t = d.finishedAt { o["finishedAt"] = .string(TimestampParser.format(t)) }
        if let v = d.lastExit { o["lastExit"] = .number(Double(v)) }
        if let v = d.lastSignal { o["lastSignal"] = .number(Double(v)) }
        if d.timedOut { o["timedOut"] = .bool(true) }
        if let v = d.lastError { o["lastError"] = .string(v) }
        if let v = d.lastDuration { o["lastDuration"] = .number((v * 1000).rounded() / 1000) }
        o["stdout"] = .string(String(decoding: d.stdout, as: UTF8.self))
        o["stderr"] = .string(String(decoding: d.stderr, as: UTF8.self))
        o["stdoutBytes"] = .number(Double(d.stdoutBytes))
        o["stderrBytes"] = .number(Double(d.stderrBytes))
        o["history"] = .array(d.history.map { .object($0.json) })
        o["orderKey"] = .string(d.orderKey.storeValue)
        if let uid = d.runAs { o["runAs"] = .number(Double(uid)) }
        return o
    }
}
