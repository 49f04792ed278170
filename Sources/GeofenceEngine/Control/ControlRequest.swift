import GeofenceCore

/// What a control-socket client asks (Docs/control-protocol.md). Pure: no I/O, so it can be fuzzed alone.
package enum ControlMethod: String, Sendable, CaseIterable {
    /// Which engine answers: its state directory (canonical), pid and version, so that a client can tell
    /// whether it serves the store the client names.
    case hello
    case status
    case list
    case show
    case add
    case remove
    case importRegions = "import"
    case export
    case servicesGet = "services.get"
    case servicesSet = "services.set"
    case permissionList = "permission.list"
    case permissionRequest = "permission.request"
    case permissionGrant = "permission.grant"
    case permissionDeny = "permission.deny"
    case permissionReset = "permission.reset"
    case watch
    /// The outbox's latest events and their hook deliveries (`geofence events`).
    case events
    case hookAdd = "hook.add"
    case hookList = "hook.list"
    case hookRemove = "hook.remove"
    /// Event sinks (`geofence sink ...`): an MQTT broker the engine publishes events to.
    case sinkAdd = "sink.add"
    case sinkList = "sink.list"
    case sinkRemove = "sink.remove"

    /// Methods any client may call, authorized or not: how else would it learn its status or ask.
    package var isOpen: Bool { self == .hello || self == .status || self == .permissionRequest }

    /// Methods that can change the store (and so make events, run hooks, reach sinks): rate-limited for
    /// users other than root and the engine's own (`ChangeRateLimit`).
    package var canWrite: Bool {
        switch self {
        case .add, .remove, .importRegions, .servicesSet, .permissionRequest, .permissionGrant, .permissionDeny,
            .permissionReset, .hookAdd, .hookRemove, .sinkAdd, .sinkRemove:
            true
        case .hello, .status, .list, .show, .export, .servicesGet, .permissionList, .watch, .events, .hookList,
            .sinkList:
            false
        }
    }

    /// Methods that change who may do what, or the switch: privileged users only.
    package var isAdministrative: Bool {
        switch self {
        // A sink sends every vehicle's events off the machine: as much the administrator's say as the switch.
        case .servicesSet, .permissionGrant, .permissionDeny, .permissionReset, .permissionList, .sinkAdd, .sinkRemove:
            true
        default: false
        }
    }
}

/// Why a request failed: a code for programs, a message for people, the exit status the CLI uses.
package struct ControlError: Error, Sendable, Equatable, CustomStringConvertible {
    package enum Code: String, Sendable, CaseIterable {
        case badRequest = "bad-request"
        case unknownMethod = "unknown-method"
        case tooLong = "too-long"
        case permissionDenied = "permission-denied"
        case servicesOff = "services-off"
        case notFound = "not-found"
        case invalid = "invalid"
        case duplicate = "duplicate"
        case busy = "busy"
        case storeFailed = "store-failed"
        case unavailable = "unavailable"
        case internalError = "internal"
    }

    package var code: Code
    package var message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { message }

    /// sysexits status for the CLI.
    package var exitStatus: Int32 {
        switch code {
        case .badRequest, .unknownMethod, .tooLong: 64
        case .invalid, .duplicate: 65
        case .notFound: 66
        case .unavailable: 69
        case .internalError: 70
        case .storeFailed: 74
        case .busy: 75
        case .permissionDenied, .servicesOff: 77
        }
    }

    package var json: JSONObject {
        ["code": .string(code.rawValue), "message": .string(message), "exit": .number(Double(exitStatus))]
    }

    package init?(json: JSONObject) {
        guard let code = json["code"]?.stringValue.flatMap(Code.init(rawValue:)),
            let message = json["message"]?.stringValue
        else { return nil }
        self.init(code, message)
    }
}

/// One request: a JSON object on one line, `{"id": any, "method": "list", "params": {...}}`.
package struct ControlRequest: Sendable, Equatable {
    /// Longest request line accepted; anything longer is refused and the connection closed.
    package static let maximumLineLength = 1 << 20

    /// Echoed in the response, so a client can match them.
    package var id: JSONValue?
    package var method: ControlMethod
    package var params: JSONObject

    package init(id: JSONValue? = nil, method: ControlMethod, params: JSONObject = JSONObject()) {
        self.id = id
        self.method = method
        self.params = params
    }

    package static func parse(_ line: some Collection<UInt8>) -> Result<ControlRequest, ControlError> {
        if line.count > maximumLineLength {
            return .failure(ControlError(.tooLong, "request of \(line.count) bytes is over the 1 MiB limit"))
        }
        let value: JSONValue
        do {
            value = try JSON.parse(line)
        } catch {
            return .failure(ControlError(.badRequest, "request is not JSON: \(error)"))
        }
        guard case .object(let o) = value else {
            return .failure(ControlError(.badRequest, "request must be a JSON object"))
        }
        guard let name = o["method"]?.stringValue else {
            return .failure(ControlError(.badRequest, "request has no \"method\" string"))
        }
        guard let method = ControlMethod(rawValue: name) else {
            return .failure(ControlError(.unknownMethod, "unknown method \"\(name.prefix(64))\""))
        }
        var params = JSONObject()
        if let p = o["params"], !p.isNull {
            guard case .object(let object) = p else {
                return .failure(ControlError(.badRequest, "\"params\" must be an object"))
            }
            params = object
        }
        return .success(ControlRequest(id: o["id"], method: method, params: params))
    }

    package var line: String {
        var o: JSONObject = [:]
        if let id { o["id"] = id }
        o["method"] = .string(method.rawValue)
        if !params.isEmpty { o["params"] = .object(params) }
        return JSONValue.object(o).serialized()
    }
}

/// One response line: `{"id": ..., "ok": true, "result": ...}` or `{"id": ..., "ok": false, "error": {...}}`.
package struct ControlResponse: Sendable, Equatable {
    package var id: JSONValue?
    package var result: Result<JSONValue, ControlError>

    package init(id: JSONValue?, result: Result<JSONValue, ControlError>) {
        self.id = id
        self.result = result
    }

    package var line: String {
        var o: JSONObject = [:]
        if let id { o["id"] = id }
        switch result {
        case .success(let value):
            o["ok"] = true
            o["result"] = value
        case .failure(let error):
            o["ok"] = false
            o["error"] = .object(error.json)
        }
        return JSONValue.object(o).serialized()
    }

    package static func parse(_ line: some Collection<UInt8>) -> ControlResponse? {
        guard case .object(let o)? = try? JSON.parse(line), let ok = o["ok"]?.boolValue else { return nil }
        if ok { return ControlResponse(id: o["id"], result: .success(o["result"] ?? .null)) }
        guard let e = o["error"]?.objectValue.flatMap(ControlError.init(json:)) else { return nil }
        return ControlResponse(id: o["id"], result: .failure(e))
    }
}
