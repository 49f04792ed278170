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
public final class ControlHandler: Sendable {
    public let store: StateStore
    public let policy: AccessPolicy
    /// Called after a change the running engine should apply at once (regions, the switch).
    let changed: @Sendable (Change) -> Void
    /// For `watch`: registers a subscriber; nil when no engine runs.
    private let subscribe: (@Sendable (ControlConnection) -> Void)?
    /// The engine this handler runs in, for `hello` and `status`; nil in the CLI's in-process mode.
    private let engine: EngineIdentity?
    /// The engine's one event id generator (its pipeline's), for the events the handler makes.
    private let ids: EventIDs
    /// Changes per uid through the socket, for users other than root and the engine's own.
    let changeLimit = ChangeRateLimit()

    /// Changes the engine reacts to.
    public enum Change: Sendable {
        case regions
        case services(Bool)
        case permissions
        /// Sinks added or removed.
        case sinks
    }

    public init(
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
    public func handle(_ request: ControlRequest, peer: ControlPeer, connection: ControlConnection?) -> ControlResponse?
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

    static func translate(_ error: any Error) -> ControlError {
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

    public static func userName(_ uid: UInt32) -> String {
        guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return "uid \(uid)" }
        return String(cString: name)
    }

    /// How far the control socket trusts `uid` when it connects (its connection limits).
    public func trust(_ uid: UInt32) -> ControlTrust {
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
        guard let wait = changeLimit.take(uid: peer.uid, now: MonotonicClock.seconds()) else { return nil }
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

    /// `list` and `export` with `stream`: one line per region, read from the store a page at a time and
    /// written as the client takes them, so that neither end holds a million regions; the answer that
    /// follows them says how many.
    private func stream(to connection: ControlConnection, _ encode: (StoredRegion) -> JSONObject) throws -> JSONValue {
        var count = 0
        var after: Int64 = 0
        while true {
            let page = try store.regions.page(afterSeq: after, limit: 1000)
            guard let last = page.last else { break }
            // A page in one write: a million writes of one line each cost more than the lines.
            let lines = page.map { JSONValue.object(encode($0)).serialized() }.joined(separator: "\n")
            guard connection.send(lines) else { throw ControlError(.unavailable, "the client went away") }
            count += page.count
            after = last.seq
        }
        return ["count": .number(Double(count))]
    }

    /// The id a change is recorded under (`params.requestId`), for idempotent retries.
    private func requestRecord(_ p: JSONObject, _ method: ControlMethod, peer: ControlPeer) throws -> RequestRecord? {
        guard let value = p["requestId"] else { return nil }
        guard let id = value.stringValue, !id.isEmpty, id.utf8.count <= 128 else {
            throw ControlError(.badRequest, "params.requestId must be a string of 1 to 128 bytes")
        }
        return RequestRecord(id: id, uid: peer.uid, method: method.rawValue)
    }

    /// The answer recorded for a request made before (its change is not made again).
    fileprivate func recordedAnswer(_ request: RequestRecord) throws -> JSONValue? {
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

    private func string(_ p: JSONObject, _ key: String) throws -> String {
        guard let s = p[key]?.stringValue else { throw ControlError(.badRequest, "missing string params.\(key)") }
        return s
    }

    private func strings(_ p: JSONObject, _ key: String) throws -> [String] {
        guard let items = p[key]?.arrayValue else { throw ControlError(.badRequest, "missing array params.\(key)") }
        return try items.map { item in
            guard let s = item.stringValue else { throw ControlError(.badRequest, "params.\(key) must hold strings") }
            return s
        }
    }

    /// `import`: all or nothing, in parts over one connection when the file is bigger than one request
    /// line (`final: false` for every part but the last). Each part is checked as it arrives (positions count
    /// from the first part) and, while every entry so far is good, stored at once in a transaction of the
    /// import's own, which the final part commits; any problem, a refusal or the client going away rolls it
    /// back, and the final part's answer says why. `replace` and `dryRun` are the first part's.
    private func importRegions(_ p: JSONObject, peer: ControlPeer, connection: ControlConnection?) throws -> JSONValue {
        let final = p["final"]?.boolValue ?? true
        if !final && connection == nil {
            throw ControlError(.badRequest, "a partial import needs a connection")
        }
        // Taken out of the connection while this part is handled (one copy only, so that adding to what it
        // holds copies nothing).
        var state = (connection?[ImportInProgress.key] as? ImportInProgress) ?? startImport(p, peer: peer)
        connection?[ImportInProgress.key] = nil
        state.receive(p, handler: self, peer: peer)
        if !final {
            if let connection { connection[ImportInProgress.key] = state }
            if let refusal = state.refusal { throw refusal }
            return ["staged": .number(Double(state.decoder.count))]
        }
        return try state.finish(handler: self, peer: peer)
    }

    /// The import a first part begins. One that breaks the protocol (no `regions`) still begins one, refused
    /// by `receive`: kept on the connection, it fails every later part and the final one, so that the rest
    /// is not taken for a new import and committed without it.
    private func startImport(_ p: JSONObject, peer: ControlPeer) -> ImportInProgress {
        var state = ImportInProgress(
            decoder: RegionEntryDecoder(now: Date(), createdBy: peer.uid), replace: p["replace"]?.boolValue ?? false,
            dryRun: p["dryRun"]?.boolValue ?? false)
        do {
            state.request = try requestRecord(p, .importRegions, peer: peer)
            if let request = state.request, !state.dryRun { state.recorded = try recordedAnswer(request) }
        } catch {
            state.refusal = ControlHandler.translate(error)
        }
        if !state.dryRun && p["regions"]?.arrayValue != nil && state.recorded == nil && state.refusal == nil {
            do {
                state.storing = try RegionImport(store: store, replace: state.replace, now: state.decoder.now)
            } catch {
                state.refusal = ControlHandler.translate(error)
            }
        }
        return state
    }

    /// An import in parts, between its first part and its final one.
    struct ImportInProgress: ControlConnectionState {
        static let key = "import"
        var decoder: RegionEntryDecoder
        let replace: Bool
        let dryRun: Bool
        /// The open transaction the parts go into while all is well; nil once anything is wrong (or in a
        /// dry run).
        var storing: RegionImport?
        /// What fails the import regardless of its entries (a part that breaks the protocol, the store
        /// failing); the first one wins.
        var refusal: ControlError?
        /// A region with hooks from a client the engine takes none from: reported unless entries are bad.
        var hookRefusal: ControlError?
        var parts = 0
        /// The id the import is recorded under when it commits.
        var request: RequestRecord?
        /// The answer of the same import made before (its parts are then only read, not stored again).
        var recorded: JSONValue?

        func connectionClosed() { storing?.rollback() }

        /// A line of the connection could not be read: perhaps one of the import's parts, so the import
        /// cannot be complete.
        mutating func requestUnreadable() {
            refuse(
                ControlError(
                    .badRequest, "a request line sent during the import could not be read: nothing is imported"))
        }

        /// Checks one part and stores its regions while everything so far is good.
        mutating func receive(_ p: JSONObject, handler: ControlHandler, peer: ControlPeer) {
            parts += 1
            guard refusal == nil, recorded == nil else { return }
            guard let part = p["regions"]?.arrayValue else {
                return refuse(ControlError(.badRequest, "import needs params.regions (part \(parts) has none)"))
            }
            for (flag, value) in [("replace", replace), ("dryRun", dryRun)] {
                if let given = p[flag], given.boolValue != value {
                    return refuse(
                        ControlError(
                            .badRequest,
                            "import part \(parts) gives \(flag): \(given.serialized()), but the import began with "
                                + "\(flag): \(value); send the same replace and dryRun with every part"))
                }
            }
            decoder.add(part)
            let regions = decoder.takeRegions()
            if hookRefusal == nil, regions.contains(where: { !$0.hooks.isEmpty }) {
                do { try handler.checkHookOwner(peer.uid) } catch { hookRefusal = ControlHandler.translate(error) }
            }
            guard let storing else { return }
            guard decoder.problems.isEmpty, hookRefusal == nil else {
                // It cannot succeed now: let go of the write lock at once, and only check the rest.
                storing.rollback()
                self.storing = nil
                return
            }
            do {
                try storing.add(regions)
            } catch {
                refuse(ControlHandler.translate(error))
            }
        }

        private mutating func refuse(_ error: ControlError) {
            if refusal == nil { refusal = error }
            storing?.rollback()
            storing = nil
        }

        /// The final part's answer: committed, or why nothing was stored.
        func finish(handler: ControlHandler, peer: ControlPeer) throws -> JSONValue {
            defer { storing?.rollback() }
            if let refusal { throw refusal }
            if let recorded { return recorded }
            if !decoder.problems.isEmpty {
                let problems = decoder.problems
                throw ControlError(
                    .invalid,
                    problems.count == 1
                        ? "nothing imported: \(problems[0])"
                        : "nothing imported: \(problems.count) problems\n"
                            + problems.prefix(50).map { "  \($0)" }.joined(separator: "\n")
                            + (problems.count > 50 ? "\n  ... and \(problems.count - 50) more" : ""))
            }
            if let hookRefusal { throw hookRefusal }
            let count = JSONValue.number(Double(decoder.count))
            if dryRun { return ["checked": count, "imported": 0] }
            guard let storing else { throw ControlError(.internalError, "the import was not being stored") }
            let answer: JSONValue = ["checked": count, "imported": count]
            do {
                if let request {
                    try storing.commit(request: request, answer: answer.serialized())
                } else {
                    try storing.commit()
                }
            } catch {
                throw ControlHandler.translate(error)
            }
            handler.changed(.regions)
            return answer
        }
    }

    // MARK: Hooks

    /// Hooks run as whoever registered them when the engine runs as root; an engine that is not root can
    /// only run them as itself, so it takes hooks only from its own user.
    func checkHookOwner(_ uid: UInt32) throws {
        let me = getuid()
        guard me != 0, uid != me, uid != 0 else { return }
        throw ControlError(
            .permissionDenied,
            "this engine runs as \(ControlHandler.userName(me)) and runs hooks only for that user; "
                + "run it as root to take hooks from \(ControlHandler.userName(uid))")
    }

    private func addHook(_ p: JSONObject, peer: ControlPeer) throws -> JSONValue {
        try checkHookOwner(peer.uid)
        let request = try requestRecord(p, .hookAdd, peer: peer)
        if let request, let recorded = try recordedAnswer(request) { return recorded }
        func insert(_ hook: GlobalHook) throws {
            if let request {
                let answer = JSONValue.object(HookReport.json(hook, counts: [:])).serialized()
                try store.deliveries.addHook(hook, request: request, answer: answer)
            } else {
                try store.deliveries.addHook(hook)
            }
        }
        let command = try string(p, "command")
        if let problem = GlobalHook.problem(withCommand: command) {
            throw ControlError(.invalid, "command: \(problem)")
        }
        let events = try (p["on"]?.arrayValue ?? []).map { item -> String in
            guard let type = item.stringValue, GlobalHook.eventTypes.contains(type) else {
                throw ControlError(.invalid, "on: \(item.serialized()) is not an event type")
            }
            return type
        }
        var hook = GlobalHook(
            id: "", events: GlobalHook.eventTypes.filter(Set(events).contains), command: command, createdBy: peer.uid,
            createdAt: Date())
        if let id = p["id"]?.stringValue {
            if let problem = GlobalHook.problem(withID: id) { throw ControlError(.invalid, "id: \(problem)") }
            hook.id = id
            try insert(hook)
        } else {
            hook.id = try Self.generatedID("hook") { id, isLast in
                hook.id = id
                do { try insert(hook) } catch HookStoreError.duplicateHook where !isLast { return false }
                return true
            }
        }
        return .object(HookReport.json(hook, counts: [:]))
    }

    /// Stores something under a generated id (`PREFIX-` and a random base-36 number), trying another on the
    /// (astronomically unlikely) collision rather than failing: `insert` returns false for a taken id, and on
    /// the last of six tries (`isLast`) lets the store's error through.
    static func generatedID(_ prefix: String, _ insert: (String, _ isLast: Bool) throws -> Bool) throws -> String {
        for attempt in 0...5 {
            let id = prefix + "-" + String(UInt32.random(in: 0...UInt32.max), radix: 36)
            if try insert(id, attempt == 5) { return id }
        }
        preconditionFailure("the last try returns or throws")
    }

    // MARK: Sinks

    /// Every sink as `sink list --json` and `status` show it: its definition (no password, only where it is
    /// read from), its cursor and lag, and, while an engine runs, its health.
    public func sinkReports() throws -> [JSONObject] {
        let health =
            engine == nil ? nil : (try store.settings.value(DaemonSettings.sinks)).flatMap { try? JSON.parse($0) }
        return try store.sinks.progress().map { progress in
            var o = SinkRequest.json(progress.sink)
            o["cursor"] = .number(Double(progress.cursor))
            o["waiting"] = .number(Double(progress.waiting))
            if let health {
                let own = health[progress.sink.id]
                o["connected"] = own?["connected"] ?? false
                if let problem = own?["problem"] { o["problem"] = problem }
                if let delivered = own?["delivered"] { o["delivered"] = delivered }
            } else {
                o["connected"] = false
                o["problem"] = "the engine is not running"
            }
            return o
        }
    }

    // MARK: Status, switch, permissions

    private func status(peer: ControlPeer) throws -> JSONObject {
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
    private func effectiveStatuses(servicesOn: Bool) throws -> [UInt32: AuthorizationStatus] {
        var all: [UInt32: AuthorizationStatus] = [:]
        for p in try store.permissions.all() {
            all[p.uid] = policy.effectiveStatus(uid: p.uid, recorded: p.status, servicesOn: servicesOn)
        }
        return all
    }

    private func authorizationEvent(uid: UInt32, status: AuthorizationStatus, reason: String) -> StateEvent {
        StateEvent(
            id: ids.next(now: Date()), type: .authorization, time: Date(), state: status.rawValue,
            subject: ControlHandler.userName(uid), reason: reason, details: ["uid": .number(Double(uid))])
    }

    private func permissionList() throws -> [JSONObject] {
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
    public static let maximumReasonBytes = 256

    /// What is wrong with the reason given with a permission request, or nil. It comes from a user who is not
    /// trusted yet and goes into an event that hooks (root's too) and sinks receive: short, and only text
    /// that shows as it is (no control, bidi or invisible characters: `VisibleName`'s rule).
    public static func reasonProblem(_ reason: String) -> String? {
        if reason.utf8.count > maximumReasonBytes {
            return "the reason is \(reason.utf8.count) bytes long: at most \(maximumReasonBytes) are taken"
        }
        return VisibleName.problem(reason).map { "the reason \($0)" }
    }

    private func requestPermission(peer: ControlPeer, reason: String?) throws -> JSONObject {
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

    private func setPermission(uid: UInt32, _ status: AuthorizationStatus, by: UInt32) throws -> JSONObject {
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
    public static func resolveUser(_ text: String) throws -> UInt32 {
        if let uid = UInt32(text) { return uid }
        guard let entry = getpwnam(text) else { throw ControlError(.notFound, "no user named \"\(text.prefix(64))\"") }
        return entry.pointee.pw_uid
    }
}

/// The running engine as `hello` tells it: which store it serves, so that a client given a state directory
/// can tell whether this engine is the one to ask.
public struct EngineIdentity: Sendable {
    /// Canonical (`realpath`).
    public var stateDirectory: String
    public var pid: Int32
    public var version: String
    public var started: Date
    public var source: String
    /// The engine's counters and health, for `status` (what `/metrics` shows too).
    package var metrics: EngineMetrics?

    public init(stateDirectory: String, pid: Int32, version: String, started: Date, source: String) {
        self.stateDirectory = stateDirectory
        self.pid = pid
        self.version = version
        self.started = started
        self.source = source
    }

    public var json: JSONObject {
        [
            "stateDirectory": .string(stateDirectory), "pid": .number(Double(pid)), "version": .string(version),
            "started": .string(TimestampParser.format(started)), "source": .string(source),
        ]
    }
}

/// The canonical path of an existing directory (symbolic links and `..` resolved), or nil when there is
/// none: two state directories are the same only when both exist and this is equal.
public func canonicalDirectory(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    var info = stat()
    guard stat(resolved, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { return nil }
    return String(cString: resolved)
}

/// A global hook as `hook list --json` and the control socket show it.
public enum HookReport {
    public static func json(_ hook: GlobalHook, counts: [DeliveryStatus: Int]) -> JSONObject {
        var o: JSONObject = [
            "id": .string(hook.id), "on": .array((hook.events.isEmpty ? ["all"] : hook.events).map { .string($0) }),
            "command": .string(hook.command), "createdAt": .string(TimestampParser.format(hook.createdAt)),
        ]
        if let uid = hook.createdBy { o["createdBy"] = .number(Double(uid)) }
        o["deliveries"] = .object(
            JSONObject(
                uniqueKeysWithValues: DeliveryStatus.allCases.map { ($0.rawValue, .number(Double(counts[$0] ?? 0))) })
        )
        return o
    }
}

/// The region object of `list --json` and the control socket: the import format plus status fields.
public enum RegionReport {
    public static func json(_ s: StoredRegion) -> JSONObject {
        var o = RegionJSON.encode(s.region)
        if let polygon = s.region.polygon {
            o["vertices"] = .number(Double(polygon.vertexCount))
            o["area"] = .number(polygon.area.rounded())
        }
        o["status"] = .string(s.status.kind.rawValue)
        if let reason = s.status.reason { o["reason"] = .string(reason) }
        o["attempts"] = .number(Double(s.attempts))
        if let next = s.nextRetry { o["nextRetry"] = .string(TimestampParser.format(next)) }
        o["createdAt"] = .string(TimestampParser.format(s.createdAt))
        if let uid = s.region.createdBy { o["createdBy"] = .number(Double(uid)) }
        o["updatedAt"] = .string(TimestampParser.format(s.updatedAt))
        return o
    }
}
