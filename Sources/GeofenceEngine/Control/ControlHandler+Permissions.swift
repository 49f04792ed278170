import Foundation
import GeofenceCore
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

extension ControlHandler {
    // MARK: Status, switch, permissions

    func status(peer: ControlPeer) throws -> JSONObject {
        let servicesOn = try store.permissions.servicesOn()
        let recorded = try store.permissions.find(uid: peer.uid)
        let own = policy.storedStatus(uid: peer.uid, recorded: recorded?.status)
        let effective = policy.effectiveStatus(uid: peer.uid, recorded: recorded?.status, servicesOn: servicesOn)
        var you: JSONObject = [
            "uid": .number(Double(peer.uid)), "user": .string(ControlHandler.userName(peer.uid)),
            "status": .string(own.rawValue), "effective": .string(effective.rawValue),
        ]
        if policy.isPrivileged(peer.uid) { you["privileged"] = true }
        if recorded?.requestedAt != nil { you["requested"] = true }
        if effective != .authorized && !policy.isPrivileged(peer.uid) {
            you["howTo"] = .string(
                policy.isDeniedByServicesOff(uid: peer.uid, recorded: recorded?.status, servicesOn: servicesOn)
                    ? "Location Services are off: an administrator can run `geofence services on`"
                    : own == .restricted
                        ? "restricted by the system's policy"
                        : "run `geofence permission request --reason TEXT`, then ask an administrator to run "
                            + "`geofence permission grant \(ControlHandler.userName(peer.uid))`")
        }
        var o: JSONObject = ["services": .string(servicesOn ? "on" : "off"), "you": .object(you)]
        // That it runs, and on which store, is no secret: `hello` says as much to anyone.
        if let engine { o["engine"] = .object(engine.json) }
        // What only an authorized client may see.
        if try authorize(.list, uid: peer.uid) == nil {
            var counts = JSONObject()
            for (status, n) in try store.regions.countsByStatus().sorted(by: { $0.key < $1.key }) {
                counts[status] = .number(Double(n))
            }
            o["regions"] = .object(counts)
            o["outbox"] = ["events": .number(Double(try store.outbox.count()))]
            if let metrics = engine?.metrics { for (key, value) in metrics.statusJSON { o[key] = value } }
            let sinks = try sinkReports()
            if !sinks.isEmpty { o["sinks"] = .array(sinks.map { .object($0) }) }
            // A fleet source's own account, for a client that cannot read the store (`SourceStatus.json`).
            if let text = try store.settings.value(DaemonSettings.sourceStatus), let source = try? JSON.parse(text) {
                o["source"] = source
            }
        }
        return o
    }

    func setServices(_ on: Bool, by uid: UInt32) throws {
        let before = try store.permissions.servicesOn()
        guard before != on else { return }
        let effectiveBefore = try effectiveStatuses(servicesOn: before)
        var events = [
            StateEvent(
                id: ids.next(now: Date()), type: .services, time: Date(), state: on ? "on" : "off",
                reason: "switched \(on ? "on" : "off") by \(ControlHandler.userName(uid))")
        ]
        let effectiveAfter = try effectiveStatuses(servicesOn: on)
        for (client, status) in effectiveAfter.sorted(by: { $0.key < $1.key }) where effectiveBefore[client] != status {
            events.append(
                authorizationEvent(uid: client, status: status, reason: "Location Services \(on ? "on" : "off")"))
        }
        // The switch and the events that report it commit together.
        try store.permissions.setServices(on: on, events: events)
        changed(.services(on))
    }

    /// The effective status of every client the store knows.
    func effectiveStatuses(servicesOn: Bool) throws -> [UInt32: AuthorizationStatus] {
        var all: [UInt32: AuthorizationStatus] = [:]
        for p in try store.permissions.all() {
            all[p.uid] = policy.effectiveStatus(uid: p.uid, recorded: p.status, servicesOn: servicesOn)
        }
        return all
    }

    func authorizationEvent(uid: UInt32, status: AuthorizationStatus, reason: String) -> StateEvent {
        StateEvent(
            id: ids.next(now: Date()), type: .authorization, time: Date(), state: status.rawValue,
            subject: ControlHandler.userName(uid), reason: reason, details: ["uid": .number(Double(uid))])
    }

    func permissionList() throws -> [JSONObject] {
        let servicesOn = try store.permissions.servicesOn()
        var uids = Set(try store.permissions.all().map(\.uid)).union(policy.restricted)
        uids.insert(policy.daemonUID)
        let recorded = Dictionary(uniqueKeysWithValues: try store.permissions.all().map { ($0.uid, $0) })
        return uids.sorted().map { uid in
            let r = recorded[uid]
            var o: JSONObject = [
                "uid": .number(Double(uid)), "user": .string(ControlHandler.userName(uid)),
                "status": .string(policy.storedStatus(uid: uid, recorded: r?.status).rawValue),
                "effective": .string(
                    policy.effectiveStatus(uid: uid, recorded: r?.status, servicesOn: servicesOn).rawValue),
            ]
            if policy.isPrivileged(uid) { o["privileged"] = true }
            if let reason = r?.reason { o["reason"] = .string(reason) }
            if let at = r?.requestedAt { o["requestedAt"] = .string(TimestampParser.format(at)) }
            return o
        }
    }

    /// The longest reason a user may give with a permission request, in bytes of UTF-8.
    package static let maximumReasonBytes = 256

    /// What is wrong with the reason given with a permission request, or nil. It comes from a user who is not
    /// trusted yet and goes into an event that hooks (root's too) and sinks receive: short, and only text
    /// that shows as it is (no control, bidi or invisible characters: `VisibleName`'s rule).
    package static func reasonProblem(_ reason: String) -> String? {
        if reason.utf8.count > maximumReasonBytes {
            return "the reason is \(reason.utf8.count) bytes long: at most \(maximumReasonBytes) are taken"
        }
        return VisibleName.problem(reason).map { "the reason \($0)" }
    }

    func requestPermission(peer: ControlPeer, reason: String?) throws -> JSONObject {
        if let reason, let problem = Self.reasonProblem(reason) { throw ControlError(.invalid, problem) }
        let user = ControlHandler.userName(peer.uid)
        let recorded = try store.permissions.find(uid: peer.uid)
        let current = policy.storedStatus(uid: peer.uid, recorded: recorded?.status)
        var answer: JSONObject = ["uid": .number(Double(peer.uid)), "status": .string(current.rawValue)]
        guard current == .notDetermined else {
            answer["message"] = .string("your status is already \(current.rawValue)")
            return answer
        }
        let event = authorizationEvent(
            uid: peer.uid, status: .notDetermined, reason: "requested: \(reason ?? "no reason given")")
        // One pending request a user: a repeat changes nothing and makes no event.
        if try store.permissions.request(uid: peer.uid, reason: reason, events: [event]) {
            changed(.permissions)
            answer["message"] = .string(
                "request recorded: an administrator can grant it with `geofence permission grant \(user)`")
        } else {
            answer["pending"] = true
            let since = recorded?.requestedAt.map { " since \(TimestampParser.format($0))" } ?? ""
            answer["message"] = .string(
                "your request is already pending\(since): an administrator can grant it with "
                    + "`geofence permission grant \(user)`; asking again changes nothing")
        }
        return answer
    }

    func setPermission(uid: UInt32, _ status: AuthorizationStatus, by: UInt32) throws -> JSONObject {
        if policy.restricted.contains(uid) {
            throw ControlError(
                .permissionDenied,
                "\(ControlHandler.userName(uid)) is restricted by the policy file; that cannot be changed from the CLI")
        }
        if policy.isPrivileged(uid) {
            throw ControlError(
                .invalid, "\(ControlHandler.userName(uid)) is always authorized (root or the engine's user)")
        }
        let before = try store.permissions.find(uid: uid)?.status ?? .notDetermined
        let events =
            before == status
            ? [] : [authorizationEvent(uid: uid, status: status, reason: "set by \(ControlHandler.userName(by))")]
        try store.permissions.set(uid: uid, status, by: by, events: events)
        changed(.permissions)
        return [
            "uid": .number(Double(uid)), "user": .string(ControlHandler.userName(uid)),
            "status": .string(status.rawValue),
        ]
    }

    /// A user name or a numeric uid.
    package static func resolveUser(_ text: String) throws -> UInt32 {
        if let uid = UInt32(text) { return uid }
        guard let entry = getpwnam(text) else { throw ControlError(.notFound, "no user named \"\(text.prefix(64))\"") }
        return entry.pointee.pw_uid
    }
}
