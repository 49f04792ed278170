import Foundation
import GeofenceCore
import GeofenceStore

/// The keys the daemon keeps in the store's settings so `geofence status` can tell what it sees.
package enum DaemonSettings {
    package static let pid = "daemon.pid"
    package static let started = "daemon.started"
    package static let stopped = "daemon.stopped"
    package static let sourceAddress = "source.address"
    /// The gpsd the engine reads (`HOST:PORT[:DEVICE]`), for `status` without `--gpsd`; empty for other sources.
    package static let gpsd = "source.gpsd"
    package static let connection = "source.connection"
    package static let connectionReason = "source.connection.reason"
    package static let liveness = "source.liveness"
    package static let livenessChanged = "source.liveness.changed"
    package static let capabilities = "source.capabilities"
    /// A fleet source's own account of itself (`SourceStatus.json`); absent for gpsd.
    package static let sourceStatus = "source.status"
    /// The sinks' health as the engine last saw it (`SinkSupervisor.health`), JSON.
    package static let sinks = "sinks.status"
}

/// What the engine tells `geofence status` through the store's settings (the four questions as the engine
/// last saw them), written only when a value changed. The engine's actor owns it; `status` reads the keys.
struct StatusRecorder {
    let store: StateStore
    /// What was written last, so an unchanged value costs no read and no write.
    private var written: [String: String] = [:]

    init(store: StateStore) {
        self.store = store
    }

    mutating func connected() throws {
        try record([(DaemonSettings.connection, "connected"), (DaemonSettings.connectionReason, "")])
    }

    mutating func disconnected(_ reason: String) throws {
        try record([(DaemonSettings.connection, "disconnected"), (DaemonSettings.connectionReason, reason)])
    }

    mutating func capabilities(_ snapshot: CapabilitySnapshot) throws {
        try record([(DaemonSettings.capabilities, JSONValue.object(CapabilityJSON.encode(snapshot)).serialized())])
    }

    mutating func liveness(_ liveness: Liveness, at time: Date) throws {
        try record([
            (DaemonSettings.liveness, liveness.rawValue),
            (DaemonSettings.livenessChanged, TimestampParser.format(time)),
        ])
    }

    /// A fleet source's own account of itself.
    mutating func sourceStatus(_ status: SourceStatus) throws {
        try record([(DaemonSettings.sourceStatus, JSONValue.object(status.json).serialized())])
    }

    mutating func stopped(at time: Date) throws {
        try record([(DaemonSettings.stopped, TimestampParser.format(time))])
    }

    private mutating func record(_ pairs: [(String, String)]) throws {
        for (key, value) in pairs where written[key] != value {
            if try store.settings.value(key) != value { try store.settings.set(key, value) }
            written[key] = value
        }
    }
}
