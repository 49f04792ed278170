import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

/// Where the engine's control socket is: `--socket`, else `$GEOFENCE_SOCKET`, else `/run/geofence.sock` as
/// root, else `$XDG_RUNTIME_DIR/geofence.sock` (an engine run by this user) and then `/run/geofence.sock`
/// (the system's engine).
enum ControlSocket {
    static let systemPath = "/run/geofence.sock"

    static func candidates(option: String?, environment: [String: String]) -> [String] {
        if let option { return [option] }
        if let env = environment["GEOFENCE_SOCKET"], !env.isEmpty { return [env] }
        if getuid() == 0 { return [systemPath] }
        var paths: [String] = []
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            paths.append(runtime + "/geofence.sock")
        }
        paths.append(systemPath)
        return paths
    }

    /// Where `geofence run` listens.
    static func listenPath(option: String?, environment: [String: String]) -> String {
        candidates(option: option, environment: environment)[0]
    }

    static let helpDefault = "/run/geofence.sock as root, else $XDG_RUNTIME_DIR/geofence.sock"
}

/// The policy file: which users are `restricted` (they can never be granted access from the CLI).
/// `$GEOFENCE_POLICY`, else `/etc/geofence/policy.json`. `{"restricted": ["alice", 1001]}`.
enum PolicyFile {
    static func path(environment: [String: String]) -> String {
        environment["GEOFENCE_POLICY"] ?? "/etc/geofence/policy.json"
    }

    static func restricted(environment: [String: String]) throws -> Set<UInt32> {
        let path = path(environment: environment)
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        guard case .object(let o)? = try? JSON.parse([UInt8](data)) else {
            throw CommandFailure("the policy file \(path) is not a JSON object", exitCode: .config)
        }
        var uids = Set<UInt32>()
        for item in o["restricted"]?.arrayValue ?? [] {
            if let n = item.intValue, let uid = UInt32(exactly: n) {
                uids.insert(uid)
            } else if let name = item.stringValue, let uid = try? ControlHandler.resolveUser(name) {
                uids.insert(uid)
            }
        }
        return uids
    }
}

extension CommandContext {
    var me: ControlPeer { ControlPeer(pid: getpid(), uid: getuid(), gid: getgid()) }

    /// The running engine's socket, if one answers.
    func engineSocket() -> String? {
        ControlSocket.candidates(option: arguments.value("--socket"), environment: environment).first {
            ControlClient.isListening($0)
        }
    }

    /// The same handler the engine runs, on the store, in this process (no engine is running).
    func localHandler() throws -> ControlHandler {
        ControlHandler(
            store: try openStore(),
            policy: AccessPolicy(daemonUID: getuid(), restricted: try PolicyFile.restricted(environment: environment)))
    }

    /// Runs requests through the engine when it runs, else in-process on the store. Returns the results in
    /// order, or throws the first error as a one-line CLI failure.
    func call(_ requests: [ControlRequest]) throws -> [JSONValue] {
        let responses: [ControlResponse]
        if let path = engineSocket() {
            do {
                responses = try ControlClient(path: path).call(requests)
            } catch {
                throw CommandFailure(error.message, exitCode: ExitCode(rawValue: error.exitStatus) ?? .unavailable)
            }
        } else {
            let handler = try localHandler()
            var local: [ControlResponse] = []
            for request in requests {
                guard let response = handler.handle(request, peer: me, connection: nil) else { continue }
                local.append(response)
                if case .failure = response.result { break }
            }
            responses = local
        }
        return try responses.map { response in
            switch response.result {
            case .success(let value): return value
            case .failure(let error):
                throw CommandFailure(error.message, exitCode: ExitCode(rawValue: error.exitStatus) ?? .failure)
            }
        }
    }

    func call(_ method: ControlMethod, _ params: JSONObject = [:]) throws -> JSONValue {
        try call([ControlRequest(method: method, params: params)]).last ?? .null
    }
}
