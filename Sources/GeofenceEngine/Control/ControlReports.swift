import Foundation
import GeofenceCore
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

/// The running engine as `hello` tells it: which store it serves, so that a client given a state directory
/// can tell whether this engine is the one to ask.
package struct EngineIdentity: Sendable {
    /// Canonical (`realpath`).
    package var stateDirectory: String
    package var pid: Int32
    package var version: String
    package var started: Date
    package var source: String
    /// The engine's counters and health, for `status` (what `/metrics` shows too).
    package var metrics: EngineMetrics?

    package init(stateDirectory: String, pid: Int32, version: String, started: Date, source: String) {
        self.stateDirectory = stateDirectory
        self.pid = pid
        self.version = version
        self.started = started
        self.source = source
    }

    package var json: JSONObject {
        [
            "stateDirectory": .string(stateDirectory), "pid": .number(Double(pid)), "version": .string(version),
            "started": .string(TimestampParser.format(started)), "source": .string(source),
        ]
    }
}

/// The canonical path of an existing directory (symbolic links and `..` resolved), or nil when there is
/// none: two state directories are the same only when both exist and this is equal.
package func canonicalDirectory(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    var info = stat()
    guard stat(resolved, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { return nil }
    return String(cString: resolved)
}

/// A global hook as `hook list --json` and the control socket show it.
package enum HookReport {
    package static func json(_ hook: GlobalHook, counts: [DeliveryStatus: Int]) -> JSONObject {
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
package enum RegionReport {
    package static func json(_ s: StoredRegion) -> JSONObject {
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
