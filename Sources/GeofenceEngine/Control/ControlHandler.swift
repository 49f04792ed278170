import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceSystem

#if canImport(Glibc)
    import Glibc
#endif

/// What the control methods do, with authorization by uid. The daemon runs it behind the socket; the CLI
/// runs the same code in-process on the store when no daemon runs (file permissions then being the
/// authorization), so both paths behave alike.
package final class ControlHandler: Sendable {
    package let store: StateStore
    package let policy: AccessPolicy
    /// Called after a change the running engine should apply at once (regions, the switch).
    let changed: @Sendable (Change) -> Void
    /// For `watch`: registers a subscriber; nil when no engine runs.
    private let subscribe: (@Sendable (ControlConnection) -> Void)?
    /// The engine this handler runs in, for `hello` and `status`; nil in the CLI's in-process mode.
    let engine: EngineIdentity?
    /// The engine's one event id generator (its pipeline's), for the events the handler makes.
    let ids: EventIDs
    /// Changes per uid through the socket, for users other than root and the engine's own.
    let changeLimit = ChangeRateLimit<UInt32>()

    /// Changes the engine reacts to.
    package enum Change: Sendable {
        case regions
        case services(Bool)
        case permissions
        /// Sinks added or removed.
        case sinks
    }

    package init(
        store: StateStore, policy: AccessPolicy, changed: @escaping @Sendable (Change) -> Void = { _ in },
        subscribe: (@Sendable (ControlConnection) -> Void)? = nil, engine: EngineIdentity? = nil,
        ids: EventIDs = EventIDs()
    ) {
        self.ids = ids
        self.store = store
        self.policy = policy
        self.changed = changed
        self.subscribe = subscribe
        self.engine = engine
    }

    /// Runs one request for `peer`. `connection` is nil in the CLI's in-process mode. Returns nil when the
    /// request took over the connection (`watch`).
    package func handle(_ request: ControlRequest, peer: ControlPeer, connection: ControlConnection?)
        -> ControlResponse?
    {
        let result: Result<JSONValue, ControlError>
        do {
            if let refusal = try authorize(request.method, uid: peer.uid) {
                result = .failure(refusal)
            } else if let refusal = limit(request, peer: peer, connection: connection) {
                result = .failure(refusal)
            } else {
                result = .success(try perform(request, peer: peer, connection: connection))
            }
        } catch let error as ControlError {
            result = .failure(error)
        } catch is Streaming {
            return nil
        } catch {
            result = .failure(ControlHandler.translate(error))
        }
        return ControlResponse(id: request.id, result: result)
    }

    package static func translate(_ error: any Error) -> ControlError {
        switch error {
        case let e as ControlError: return e
        case let e as StoreError:
            switch e {
            case .duplicateRegions: return ControlError(.duplicate, e.description)
            case .regionNotFound: return ControlError(.notFound, e.description)
            case .tooManyPolygonPositions: return ControlError(.invalid, e.description)
            default: return ControlError(.storeFailed, e.description)
            }
        case let e as DatabaseError:
            return ControlError(e.isBusy ? .busy : .storeFailed, e.description)
        case let e as RegionValidationError:
            return ControlError(.invalid, e.description)
        case let e as HookStoreError:
            switch e {
            case .duplicateHook: return ControlError(.duplicate, e.description)
            case .hookNotFound, .deliveryNotFound: return ControlError(.notFound, e.description)
            case .nothingToRetry: return ControlError(.invalid, e.description)
            }
        case let e as SinkStoreError:
            switch e {
            case .duplicateSink: return ControlError(.duplicate, e.description)
            case .sinkNotFound: return ControlError(.notFound, e.description)
            }
        default:
            return ControlError(.internalError, "\(error)")
        }
    }

    // MARK: Authorization

    package static func userName(_ uid: UInt32) -> String {
        guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return "uid \(uid)" }
        return String(cString: name)
    }

    /// How far the control socket trusts `uid` when it connects (its connection limits).
    package func trust(_ uid: UInt32) -> ControlTrust {
        if policy.isPrivileged(uid) { return .privileged }
        do {
            return try authorize(.list, uid: uid) == nil ? .authorized : .other
        } catch {
            return .other
        }
    }

    /// The refusal for `uid` calling `method`, or nil when it may.
    func authorize(_ method: ControlMethod, uid: UInt32) throws -> ControlError? {
        if policy.isPrivileged(uid) || method.isOpen { return nil }
        let user = ControlHandler.userName(uid)
        if method.isAdministrative {
            return ControlError(.permissionDenied, "only root or the engine's own user may do this (you are \(user))")
        }
        let servicesOn = try store.permissions.servicesOn()
        let recorded = try store.permissions.find(uid: uid)?.status
        switch policy.effectiveStatus(uid: uid, recorded: recorded, servicesOn: servicesOn) {
        case .authorized:
            return nil
        case .denied where policy.isDeniedByServicesOff(uid: uid, recorded: recorded, servicesOn: servicesOn):
            return ControlError(
                .servicesOff, "Location Services are off: ask an administrator to run `geofence services on`")
        case .denied:
            return ControlError(
                .permissionDenied,
                "\(user) has been denied access to location; an administrator can change that with "
                    + "`geofence permission grant \(user)`")
        case .restricted:
            return ControlError(
                .permissionDenied, "\(user) is restricted by the system's location policy and cannot be granted access")
        case .notDetermined:
            return ControlError(
                .permissionDenied,
                "\(user) is not authorized to use location: request access with `geofence permission request "
                    + "--reason TEXT`, then ask an administrator to run `geofence permission grant \(user)`")
        }
    }

    /// The rate limit on changes through the socket from users other than root and the engine's own (see
    /// `ChangeRateLimit`); an import counts once, at its first part. Nil when the request may go on.
    private func limit(_ request: ControlRequest, peer: ControlPeer, connection: ControlConnection?) -> ControlError? {
        guard let connection, request.method.canWrite, !policy.isPrivileged(peer.uid) else { return nil }
        if request.method == .importRegions, connection[ImportInProgress.key] != nil { return nil }
        guard let wait = changeLimit.take(peer.uid, now: MonotonicClock.seconds()) else { return nil }
        let refusal = ControlError(
            .busy,
            "too many changes from \(ControlHandler.userName(peer.uid)): at most \(changeLimit.burst) at once and "
                + "\(changeLimit.perSecond) a second; try again in \(String(format: "%.1f", wait)) s")
        if request.method == .importRegions, request.params["final"]?.boolValue == false {
            // The parts that follow belong to this refused import: kept on the connection, it fails them all,
            // so that they are not taken for a new import (and committed without this part) once the limit
            // lets changes through again.
            var refused = ImportInProgress(
                decoder: RegionEntryDecoder(now: Date(), createdBy: peer.uid),
                replace: request.params["replace"]?.boolValue ?? false,
                dryRun: request.params["dryRun"]?.boolValue ?? false)
            refused.refusal = refusal
            connection[ImportInProgress.key] = refused
        }
        return refusal
    }

    // MARK: Methods

    private func perform(_ r: ControlRequest, peer: ControlPeer, connection: ControlConnection?) throws -> JSONValue {
        let p = r.params
        switch r.method {
        case .hello:
            return .object(
                engine?.json ?? ["stateDirectory": .string(canonicalDirectory(store.directory) ?? store.directory)])
        case .status:
            return .object(try status(peer: peer))
        case .list:
            if p["stream"]?.boolValue == true, let connection {
                return try stream(to: connection) { RegionReport.json($0) }
            }
            return .array(try store.regions.all().map { .object(RegionReport.json($0)) })
        case .show:
            let id = try string(p, "id")
            guard let stored = try store.regions.find(id: id) else { throw StoreError.regionNotFound(id) }
            var o = RegionReport.json(stored)
            o["states"] = .array(
                try store.monitorState.states(regionSeq: stored.seq).map { s in
                    var state: JSONObject = ["subject": .string(s.subject), "state": .string(s.record.state.rawValue)]
                    if let since = s.record.since { state["since"] = .string(TimestampParser.format(since)) }
                    return .object(state)
                })
            return .object(o)
        case .add:
            guard let definition = p["region"] else { throw ControlError(.badRequest, "add needs params.region") }
            let region: Region
            do {
                region = try RegionJSON.decode(definition, now: Date(), createdBy: peer.uid)
            } catch {
                throw ControlError(.invalid, error.description)
            }
            if !region.hooks.isEmpty { try checkHookOwner(peer.uid) }
            let replace = p["replace"]?.boolValue ?? false
            let stored: StoredRegion
            if let request = try requestRecord(p, .add, peer: peer) {
                if let answer = try recordedAnswer(request) { return answer }
                stored = try store.regions.add(region, replace: replace, request: request) {
                    JSONValue.object(RegionReport.json($0)).serialized()
                }
            } else {
                stored = try store.regions.add(region, replace: replace)
            }
            changed(.regions)
            return .object(RegionReport.json(stored))
        case .remove:
            let ids = try strings(p, "ids")
            let removed: [String]
            if let request = try requestRecord(p, .remove, peer: peer) {
                if let answer = try recordedAnswer(request) { return answer }
                removed = try store.regions.remove(ids: ids, request: request) {
                    JSONValue.object(["removed": .array($0.map { .string($0) })]).serialized()
                }
            } else {
                removed = try store.regions.remove(ids: ids)
            }
            changed(.regions)
            return ["removed": .array(removed.map { .string($0) })]
        case .importRegions:
            return try importRegions(p, peer: peer, connection: connection)
        case .export:
            if p["stream"]?.boolValue == true, let connection {
                return try stream(to: connection) { RegionJSON.encode($0.region) }
            }
            return ["regions": .array(try store.regions.all().map { .object(RegionJSON.encode($0.region)) })]
        case .servicesGet:
            return ["on": .bool(try store.permissions.servicesOn())]
        case .servicesSet:
            guard let on = p["on"]?.boolValue else { throw ControlError(.badRequest, "services.set needs params.on") }
            try setServices(on, by: peer.uid)
            return ["on": .bool(on)]
        case .permissionList:
            return .array(try permissionList().map { .object($0) })
        case .permissionRequest:
            return .object(try requestPermission(peer: peer, reason: p["reason"]?.stringValue))
        case .permissionGrant, .permissionDeny, .permissionReset:
            let uid = try ControlHandler.resolveUser(try string(p, "user"))
            let status: AuthorizationStatus =
                r.method == .permissionGrant ? .authorized : r.method == .permissionDeny ? .denied : .notDetermined
            return .object(try setPermission(uid: uid, status, by: peer.uid))
        case .watch:
            guard let connection, let subscribe else {
                throw ControlError(.unavailable, "watch needs a running engine: start it with `geofence run`")
            }
            connection.send(ControlResponse(id: r.id, result: .success(["watching": true])).line)
            subscribe(connection)
            throw Streaming()
        case .events:
            let filters: [String: DeliveryFilter] = [
                "all": .all, "pending": .pending, "failed": .failed, "dead": .dead,
            ]
            let name = p["filter"]?.stringValue ?? "all"
            guard let filter = filters[name] else {
                throw ControlError(.badRequest, "params.filter must be all, pending, failed or dead")
            }
            let limit = p["limit"]?.intValue ?? 50
            guard (1...100_000).contains(limit) else {
                throw ControlError(.badRequest, "params.limit must be 1 to 100000")
            }
            return .array(
                try store.deliveries.eventDeliveries(filter: filter, limit: limit).map { .object(EventReport.json($0)) }
            )
        case .hookAdd:
            return try addHook(p, peer: peer)
        case .hookList:
            let counts = try store.deliveries.countsByHook()
            var regionOwn = JSONObject()
            for (status, n) in counts["region"] ?? [:] { regionOwn[status.rawValue] = .number(Double(n)) }
            return [
                "hooks": .array(
                    try store.deliveries.hooks().map {
                        .object(HookReport.json($0, counts: counts[$0.reference] ?? [:]))
                    }),
                "regionDeliveries": .object(regionOwn),
            ]
        case .hookRemove:
            let ids = try strings(p, "ids")
            let answer: @Sendable ([(id: String, stopped: Int)]) -> JSONValue = { removed in
                [
                    "removed": .array(removed.map { .string($0.id) }),
                    "stopped": .number(Double(removed.reduce(0) { $0 + $1.stopped })),
                ]
            }
            guard let request = try requestRecord(p, .hookRemove, peer: peer) else {
                return answer(try store.deliveries.removeHooks(ids: ids))
            }
            if let recorded = try recordedAnswer(request) { return recorded }
            return answer(try store.deliveries.removeHooks(ids: ids, request: request) { answer($0).serialized() })
        case .sinkAdd:
            var sink = try SinkRequest.definition(p, createdBy: peer.uid)
            let request = try requestRecord(p, .sinkAdd, peer: peer)
            if let request, let recorded = try recordedAnswer(request) {
                let id = recorded["id"]?.stringValue
                return .object(try sinkReports().first { $0["id"]?.stringValue == id } ?? recorded.objectValue ?? [:])
            }
            func insert(_ sink: SinkDefinition) throws {
                if let request {
                    let answer = JSONValue.object(SinkRequest.json(sink)).serialized()
                    try store.sinks.add(sink, request: request, answer: answer)
                } else {
                    try store.sinks.add(sink)
                }
            }
            if sink.id.isEmpty {
                sink.id = try Self.generatedID("sink") { id, isLast in
                    sink.id = id
                    do { try insert(sink) } catch SinkStoreError.duplicateSink where !isLast { return false }
                    return true
                }
            } else {
                try insert(sink)
            }
            changed(.sinks)
            return .object(try sinkReports().first { $0["id"]?.stringValue == sink.id } ?? [:])
        case .sinkList:
            return .array(try sinkReports().map { .object($0) })
        case .sinkRemove:
            let ids = try strings(p, "ids")
            let answer: @Sendable ([String]) -> JSONValue = { ["removed": .array($0.map { .string($0) })] }
            let removed: [String]
            if let request = try requestRecord(p, .sinkRemove, peer: peer) {
                if let recorded = try recordedAnswer(request) { return recorded }
                removed = try store.sinks.remove(ids: ids, request: request) { answer($0).serialized() }
            } else {
                removed = try store.sinks.remove(ids: ids)
            }
            changed(.sinks)
            return answer(removed)
        }
    }

    /// The id a change is recorded under (`params.requestId`), for idempotent retries.
    func requestRecord(_ p: JSONObject, _ method: ControlMethod, peer: ControlPeer) throws -> RequestRecord? {
        guard let value = p["requestId"] else { return nil }
        guard let id = value.stringValue, !id.isEmpty, id.utf8.count <= 128 else {
            throw ControlError(.badRequest, "params.requestId must be a string of 1 to 128 bytes")
        }
        return RequestRecord(id: id, uid: peer.uid, method: method.rawValue)
    }

    /// The answer recorded for a request made before (its change is not made again).
    func recordedAnswer(_ request: RequestRecord) throws -> JSONValue? {
        guard let found = try store.requests.recorded(id: request.id, uid: request.uid) else { return nil }
        guard found.method == request.method else {
            throw ControlError(
                .invalid,
                "request id \"\(request.id.prefix(64))\" was used for \(found.method) already: give a new change a new id"
            )
        }
        return try JSON.parse(Array(found.answer.utf8))
    }

    /// Thrown by `watch` once it has answered: the connection now belongs to the subscriber.
    struct Streaming: Error {}

    func string(_ p: JSONObject, _ key: String) throws -> String {
        guard let s = p[key]?.stringValue else { throw ControlError(.badRequest, "missing string params.\(key)") }
        return s
    }

    func strings(_ p: JSONObject, _ key: String) throws -> [String] {
        guard let items = p[key]?.arrayValue else { throw ControlError(.badRequest, "missing array params.\(key)") }
        return try items.map { item in
            guard let s = item.stringValue else { throw ControlError(.badRequest, "params.\(key) must hold strings") }
            return s
        }
    }
}
