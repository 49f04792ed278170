import Foundation
import GeofenceCore
import GeofenceStore
import Synchronization

/// The engine's sinks: one `SinkRunner` per sink in the store, started and stopped as sinks are added and
/// removed (`reload()` after a change through the control socket; the store is also looked at every
/// second), and their health written for `geofence status` (`DaemonSettings.sinks`).
///
/// Its own store work (reading the sinks, writing their health) runs on a `StoreWorker` thread
/// (`geofence.sinks`); each runner has its own (`geofence.sink`).
package final class SinkSupervisor: Sendable {
    /// Makes a sink from its definition; throws when it cannot (a password file that cannot be read).
    package typealias Factory = @Sendable (SinkDefinition) throws -> any EventSink

    private let store: StateStore
    private let logger: Logger
    private let factory: Factory
    private let bell = Doorbell()
    private let state = Mutex(State())
    private let worker = StoreWorker(name: "geofence.sinks")

    private struct Running {
        var definition: SinkDefinition
        var runner: SinkRunner
        var task: Task<Void, Never>
    }

    private struct State {
        var running: [String: Running] = [:]
        /// Sinks that could not be made, and why (retried at every look).
        var broken: [String: String] = [:]
        var paused = false
        var lastStatus = ""
    }

    package init(store: StateStore, logger: Logger, factory: @escaping Factory) {
        self.logger = logger
        self.factory = factory
        // A connection of its own, as the hook runner has: its reads and cursor writes never wait behind the
        // monitor's transaction on a shared one. A lost cursor write (power cut) only repeats deliveries.
        if let own = try? StateStore(directory: store.directory, options: .init(synchronous: .normal)) {
            try? own.retryLocksQuickly()
            self.store = own
        } else {
            self.store = store
        }
    }

    /// The sinks of a daemon on `stateDirectory`, each made by the kind its definition names
    /// (`SinkKinds.all`); a kind this engine does not know is the sink's problem, said in `status`.
    package static func factory(stateDirectory: String, environment: [String: String], logger: Logger) -> Factory {
        let context = SinkContext(stateDirectory: stateDirectory, environment: environment, logger: logger)
        return { definition in
            guard let kind = SinkKinds.kind(named: definition.kind) else {
                throw SinkUnavailable(SinkKinds.unknown(definition.kind))
            }
            return try kind.makeSink(definition, context: context)
        }
    }

    /// Runs the sinks until the task is cancelled; then stops each (an MQTT sink says `offline`).
    package func run() async {
        defer { worker.finish() }
        while !Task.isCancelled {
            await worker.run {
                self.reconcile()
                self.recordStatus()
            }
            await bell.wait(seconds: 1)
        }
        let all = state.withLock { s in
            defer { s.running.removeAll() }
            return Array(s.running.values)
        }
        for running in all { running.task.cancel() }
        for running in all { await running.task.value }
        await worker.run { self.recordStatus(stopped: true) }
    }

    /// Sinks were added or removed: look at the store now.
    package func reload() { bell.ring() }

    /// New events were committed.
    package func wake() {
        for runner in state.withLock({ $0.running.values.map(\.runner) }) { runner.wake() }
    }

    package func setLocationPaused(_ on: Bool) {
        let runners = state.withLock { s in
            s.paused = on
            return s.running.values.map(\.runner)
        }
        for runner in runners { runner.setLocationPaused(on) }
    }

    private func reconcile() {
        let definitions: [SinkDefinition]
        do {
            definitions = try store.sinks.all()
        } catch {
            logger.error("sinks: cannot read them from the store: \(error)")
            return
        }
        let wanted = Dictionary(definitions.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        let gone = state.withLock { s -> [Running] in
            let ids = s.running.keys.filter { wanted[$0] != s.running[$0]?.definition }
            s.broken = s.broken.filter { wanted[$0.key] != nil }
            return ids.compactMap { s.running.removeValue(forKey: $0) }
        }
        for running in gone {
            running.task.cancel()
            logger.notice("sink \(running.definition.id): stopped (removed)")
        }
        for definition in definitions where state.withLock({ $0.running[definition.id] == nil }) {
            let sink: any EventSink
            do {
                sink = try factory(definition)
            } catch {
                let why = "\(error)"
                let first = state.withLock { s in
                    defer { s.broken[definition.id] = why }
                    return s.broken[definition.id] != why
                }
                if first { logger.error("sink \(definition.id): \(why); trying again every second") }
                continue
            }
            let runner = SinkRunner(sink: sink, store: store, logger: logger, batchSize: sink.batchSize)
            let paused = state.withLock { s in
                s.broken[definition.id] = nil
                return s.paused
            }
            runner.setLocationPaused(paused)
            let task = Task { await runner.run() }
            state.withLock { $0.running[definition.id] = Running(definition: definition, runner: runner, task: task) }
            let topic = definition.topic.isEmpty ? "" : " (\(definition.topic))"
            logger.info("sink \(definition.id): delivering to \(definition.url)\(topic)")
        }
    }

    /// Each sink's health, for `status` and `sink list`: `{id: {connected, problem, delivered, address}}`.
    package var health: JSONObject {
        let (running, broken) = state.withLock { ($0.running, $0.broken) }
        var o = JSONObject()
        for (id, r) in running.sorted(by: { $0.key < $1.key }) {
            let h = r.runner.sink.health
            let stats = r.runner.statistics
            var entry: JSONObject = [
                "connected": .bool(h.connected), "address": .string(h.address),
                "delivered": .number(Double(stats.delivered)),
            ]
            if let problem = h.problem ?? stats.lastError { entry["problem"] = .string(problem) }
            o[id] = .object(entry)
        }
        for (id, why) in broken.sorted(by: { $0.key < $1.key }) {
            o[id] = ["connected": false, "problem": .string(why)]
        }
        return o
    }

    private func recordStatus(stopped: Bool = false) {
        var o = health
        if stopped {
            for (key, value) in o {
                guard case .object(var entry) = value else { continue }
                entry["connected"] = false
                entry["problem"] = "the engine stopped"
                o[key] = .object(entry)
            }
        }
        let text = JSONValue.object(o).serialized()
        guard state.withLock({ $0.lastStatus != text }) else { return }
        do {
            try store.settings.set(DaemonSettings.sinks, text)
            state.withLock { $0.lastStatus = text }
        } catch {
            logger.warning("sinks: cannot record their status: \(error)")
        }
    }
}
