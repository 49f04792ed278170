import Foundation
import GeofenceCore
import GeofenceStore

/// The Home Assistant trackers of one MQTT sink, read from the engine's store: what to publish so that the
/// broker's retained discovery configs, states and attributes match the vehicles the store knows, and which
/// vehicles' trackers to clear (pruned, or gone while the engine was stopped).
///
/// The state is read from the store when the sink publishes (the vehicle's regions now, which may be newer
/// than the events of the batch): a retained topic holds one value, and the newest is the one to hold.
/// Used by one `MQTTSink` at a time (its syncs are serialized), hence `@unchecked Sendable`.
package final class HomeAssistantTrackers: @unchecked Sendable {
    let sinkID: String
    let discovery: HomeAssistantDiscovery
    private let stateDirectory: String
    private var store: StateStore?
    /// Per topic, the payload the broker has acknowledged in this session: only changes are published
    /// again. Empty after a start, so a restart publishes every tracker once more (idempotent).
    private var published: [String: [UInt8]] = [:]
    /// The store's `trackerFingerprint` at the last full sync; nil: none yet.
    private(set) var fingerprint: String?

    package init(sinkID: String, discovery: HomeAssistantDiscovery, stateDirectory: String) {
        self.sinkID = sinkID
        self.discovery = discovery
        self.stateDirectory = stateDirectory
    }

    private func openStore() throws -> StateStore {
        if let store { return store }
        let made = try StateStore(directory: stateDirectory, options: .init(synchronous: .normal))
        try? made.retryLocksQuickly()
        store = made
        return made
    }

    /// What a sync publishes: retained messages, the vehicles to record as announced first, and the vehicles
    /// to forget once the messages are acknowledged.
    struct Plan: Sendable {
        var messages: [SinkMessage] = []
        var announce: [String] = []
        var forget: [String] = []
        var fingerprint: String?
    }

    /// The messages for `subjects` (their current state), or, with nil, for every vehicle of the store and
    /// the clearing of every announced vehicle the store no longer knows.
    func plan(_ subjects: [String]?) throws -> Plan {
        let store = try openStore()
        var plan = Plan()
        if subjects == nil { plan.fingerprint = try store.monitorState.trackerFingerprint() }
        let vehicles = try store.monitorState.trackedVehicles(subjects)
        let seqs = Array(Set(vehicles.flatMap { $0.inside.map(\.seq) })).sorted()
        var zones: [Int64: HomeAssistantDiscovery.Zone] = [:]
        for chunk in stride(from: 0, to: seqs.count, by: 500) {
            for stored in try store.regions.find(seqs: Array(seqs[chunk..<min(chunk + 500, seqs.count)])) {
                zones[stored.seq] = HomeAssistantDiscovery.Zone(stored.region)
            }
        }
        for vehicle in vehicles {
            let state = HomeAssistantDiscovery.state(inside: vehicle.inside.compactMap { zones[$0.seq] })
            let messages = discovery.messages(subject: vehicle.subject, state: state, fix: vehicle.lastFix)
            if published[messages[0].topic] == nil { plan.announce.append(vehicle.subject) }
            plan.messages += messages.filter { published[$0.topic] != $0.payload }
        }
        if subjects == nil {
            let known = Set(vehicles.map(\.subject))
            plan.forget = try store.sinks.trackers(sink: sinkID).subtracting(known).sorted()
            for subject in plan.forget { plan.messages += discovery.clearing(subject: subject) }
        }
        return plan
    }

    /// Before publishing: the vehicles about to be announced are recorded, so that a crash cannot leave a
    /// config on the broker that no later start knows to clear.
    func willPublish(_ plan: Plan) throws {
        try openStore().sinks.recordTrackers(sink: sinkID, subjects: plan.announce)
    }

    /// Every message of `plan` was acknowledged by the broker.
    func didPublish(_ plan: Plan) throws {
        for message in plan.messages {
            if message.payload.isEmpty {
                published[message.topic] = nil
            } else {
                published[message.topic] = message.payload
            }
        }
        try openStore().sinks.forgetTrackers(sink: sinkID, subjects: plan.forget)
        if let fingerprint = plan.fingerprint { self.fingerprint = fingerprint }
    }

    /// The store's fingerprint now (a full sync is due when it differs from `fingerprint`).
    func currentFingerprint() throws -> String { try openStore().monitorState.trackerFingerprint() }

    /// The connection was lost: what the broker holds is no longer known for sure; publish all again.
    func forgetPublished() {
        published.removeAll()
        fingerprint = nil
    }
}
