import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

/// Where the engine's control socket is: `--socket`, else `$GEOFENCE_SOCKET`, else `/run/geofence/geofence.sock`
/// as root (systemd's `RuntimeDirectory=geofence`), else `$XDG_RUNTIME_DIR/geofence.sock` (an engine run by this
/// user) and then the system's engine. A client also looks at `/run/geofence.sock`, where earlier engines
/// listened as root, so a CLI upgraded before its engine restarts still finds it.
enum ControlSocket {
    static let systemDirectory = "/run/geofence"
    static let systemPath = systemDirectory + "/geofence.sock"
    /// Where an engine run as root listened before the unit's RuntimeDirectory= held it (read by clients only).
    static let legacySystemPath = "/run/geofence.sock"

    static func candidates(option: String?, environment: [String: String]) -> [String] {
        if let option { return [option] }
        if let env = environment["GEOFENCE_SOCKET"], !env.isEmpty { return [env] }
        if getuid() == 0 { return [systemPath, legacySystemPath] }
        var paths: [String] = []
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            paths.append(runtime + "/geofence.sock")
        }
        paths.append(systemPath)
        paths.append(legacySystemPath)
        return paths
    }

    /// Where `geofence run` listens.
    static func listenPath(option: String?, environment: [String: String]) -> String {
        candidates(option: option, environment: environment)[0]
    }

    static let helpDefault = "/run/geofence/geofence.sock as root, else $XDG_RUNTIME_DIR/geofence.sock"
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

/// Where a command's requests go: the engine that answers on the socket, when it serves the state directory
/// the command names, else the store itself, in this process.
struct EngineRoute {
    /// The engine's socket; nil: in-process, on the store.
    var socket: String?
    /// What the engine said of itself (`hello`).
    var engine: JSONObject?
    /// An engine that answered but serves another state directory than the one given (`--state-dir` or
    /// `GEOFENCE_STATE_DIR`): its socket and its state directory. The command then acts on its own store.
    var other: (socket: String, stateDirectory: String)?
}

extension CommandContext {
    var me: ControlPeer { ControlPeer(pid: getpid(), uid: getuid(), gid: getgid()) }

    /// The state directory given explicitly (option or environment), not the default.
    var explicitStateDirectory: String? { arguments.value("--state-dir") }

    /// Which engine, if any, this command talks to. An engine answers on the socket with the state directory
    /// it serves (`hello`); when a state directory is given explicitly and it is not the same directory
    /// (canonical paths; one that does not exist is never the same), the command acts on the store it names
    /// in-process, as with no engine, unless an engine holds that store (elsewhere): then it refuses, naming
    /// both. Something that answers on the socket but refuses (`busy`) is that refusal.
    func route() throws -> EngineRoute {
        var other: (socket: String, stateDirectory: String)?
        for path in ControlSocket.candidates(option: arguments.value("--socket"), environment: environment) {
            switch ControlClient.greet(path) {
            case .nobody:
                continue
            case .refused(let error):
                throw CommandFailure(error.message, exitCode: ExitCode(rawValue: error.exitStatus) ?? .unavailable)
            case .engine(let hello):
                let served = hello["stateDirectory"]?.stringValue ?? ""
                guard let given = explicitStateDirectory, canonicalDirectory(given) != served else {
                    return EngineRoute(socket: path, engine: hello)
                }
                if other == nil { other = (path, served) }
            }
        }
        if let other, let given = explicitStateDirectory, let pid = DaemonLock.holder(directory: given) {
            throw CommandFailure(
                "the engine at \(other.socket) serves \(other.stateDirectory), not \(given), which another engine"
                    + (pid > 0 ? " (pid \(pid))" : "") + " serves: give that engine's --socket", exitCode: .unavailable)
        }
        return EngineRoute(other: other)
    }

    /// The running engine's socket, if one answers and serves the state directory given (see `route()`).
    func engineSocket() throws -> String? { try route().socket }

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
        if let path = try engineSocket() {
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

extension CommandContext {
    /// Runs a change. When the engine went away after the request was sent and before it answered (it was
    /// killed, it crashed), says in one line that the change may have been applied, how to check, and the
    /// exact command that retries it safely: this one under the same `requestID` (the engine answers a
    /// change it made from its record, and makes one it did not), or, for a change that is the same made
    /// twice (`requestID` nil: a switch, a status), this one as it was.
    func interruptible<T>(requestID: String?, check: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let failure as CommandFailure where failure.message == ControlClient.noAnswer {
            let how =
                requestID.map {
                    "or retry it safely under the same request id (\($0)), which makes it once whatever happened: "
                } ?? "or run the same command again, which is safe (the same change twice is one change): "
            throw CommandFailure(
                "the engine closed the connection before answering: the change may have been applied. Check with "
                    + "`\(check)`, " + how + retryCommand(requestID: requestID), exitCode: .unavailable)
        }
    }

    /// This command as a shell takes it again, with `--request-id ID` (replacing one given) when there is one.
    func retryCommand(requestID: String?) -> String {
        var words: [String] = []
        var skip = false
        for word in CommandLine.arguments.dropFirst() {
            if skip {
                skip = false
            } else if word == "--request-id" {
                skip = true
            } else if !word.hasPrefix("--request-id=") {
                words.append(word)
            }
        }
        if let requestID { words += ["--request-id", requestID] }
        return (["geofence"] + words.map(Self.shellQuoted)).joined(separator: " ")
    }

    /// `word` as a POSIX shell reads it back: as it is when it holds nothing the shell would change, else in
    /// single quotes.
    static func shellQuoted(_ word: String) -> String {
        let safe = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-".unicodeScalars)
        if !word.isEmpty && word.unicodeScalars.allSatisfy(safe.contains) { return word }
        return "'" + word.replacingOccurrences(of: "'", with: #"'\''"#) + "'"
    }
}
