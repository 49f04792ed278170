import Foundation
import GeofenceCore
import GeofenceGPSD
import GeofenceStore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// What `geofence run` is told.
package struct DaemonConfiguration: Sendable {
    package var stateDirectory: String
    /// Where the fixes come from: one of `SourceKinds.all` (SourceKinds/).
    package var source: any SourceKind = GPSDSourceKind()
    package var liveness = SourceLiveness.Configuration()
    package var filter = FixFilterConfiguration()
    package var monitor = MonitorConfiguration()
    /// How often the daemon looks for regions added or removed by the CLI, seconds.
    package var regionSyncInterval = 0.5
    /// The control socket's path; nil runs without one (tests of the pipeline alone).
    package var socketPath: String?
    /// Users the policy file restricts.
    package var restricted: Set<UInt32> = []
    /// The hook runner's settings (timeouts, retries, concurrency).
    package var hooks = HookConfiguration()
    /// At most this many regions are monitored; the others are `pending: limit` (nil: no limit).
    package var maxRegions: Int?
    /// A vehicle not heard from for this long (seconds) is dropped from memory, its state kept in the store
    /// until its next fix (`FixPipeline.idleLimit`); nil keeps every vehicle in memory.
    package var idleLimit: Double? = 86_400
    /// Fault injection, for the watchdog's test: while a file is at this path, the monitor's loop blocks on
    /// its own thread, as a monitor stuck in its work would (the CLI sets it only in debug builds, from
    /// `GEOFENCE_TEST_STALL_MONITOR`). nil: never.
    package var stallMonitorWhile: String?
    /// The subject of a gpsd source's fixes and events (`run --subject`), instead of gpsd's device path.
    package var subject: String?
    /// Where to serve `/metrics` and `/healthz` (nil: nowhere, the default).
    package var metrics: MetricsAddress?
    /// Serve the HTTP API (`/v1/`, Docs/http.md) on the server of `metrics` too (`run --api`).
    package var api = false
    /// Serve HTTPS with this certificate and key (PEM files): `run --tls-cert --tls-key`.
    package var tlsCertificateFile: String?
    package var tlsKeyFile: String?
    /// The live map's tile server (`run --map-tiles`); nil: none, a graticule.
    package var mapTiles: MapTiles?

    package init(stateDirectory: String) {
        self.stateDirectory = stateDirectory
    }
}

/// The signal that stopped the engine, for the log.
private final class SignalName: Sendable {
    private let value = Mutex<String?>(nil)
    func set(_ name: String) { value.withLock { $0 = name } }
    var name: String? { value.withLock { $0 } }
}

/// `geofence run`: store → source → monitor → outbox, under one task group, stopped by SIGTERM/SIGINT.
package final class Daemon: Sendable {
    package let configuration: DaemonConfiguration
    private let logger: Logger
    private let version: String

    private static let sourceEnded = "the source ended"

    /// The source the engine was handed (an embedder's own); nil: the one `configuration.source` names.
    private let given: (any LocationSource)?

    package init(
        configuration: DaemonConfiguration, logger: Logger, version: String, source: (any LocationSource)? = nil
    ) {
        given = source
        self.configuration = configuration
        self.logger = logger
        self.version = version
    }

    /// Runs until SIGTERM or SIGINT (or the end of a file source). Throws only for what prevents starting:
    /// another daemon on the same state directory, a store that cannot be opened.
    package func run() async throws {
        // First of all: a SIGTERM (systemd's stop, a Ctrl-C) that comes while the engine opens the store and
        // loads its regions, which can take seconds, then stops it gracefully once it has, instead of
        // killing it half-way.
        let signals = ShutdownSignals()
        let signalStream = signals.signals
        let c = configuration
        // An engine on another state directory may hold the socket: said first, before anything is created in
        // this one (the store, the lock file) or what may be a million regions are loaded only to fail
        // (`ControlServer.start` checks again, for one started meanwhile). An engine already on this state
        // directory is the lock's refusal, which only reads the lock file.
        if let path = c.socketPath, ControlClient.isListening(path) {
            if let pid = DaemonLock.holder(directory: c.stateDirectory) {
                throw DaemonLock.Held(
                    path: (c.stateDirectory as NSString).appendingPathComponent(DaemonLock.fileName),
                    pid: pid > 0 ? pid : nil)
            }
            throw ControlSocketError(description: "another geofence engine is listening on \(path)")
        }
        let store = try StateStore(directory: c.stateDirectory)
        let lock = try DaemonLock(directory: c.stateDirectory)
        defer { withExtendedLifetime(lock) {} }
        // Room for the store on a small disk: a reserve file to give back, a WAL kept small (`StoreSpace`).
        let space = StoreSpace(store: store)
        // Checkpoints on a thread of their own, so that no commit of the engine, its hooks or its sinks waits for
        // one (`WALCheckpointer`); on a small file system the engine's own commits keep the WAL small instead.
        let checkpoints = space.fitWAL() ? nil : try? store.checkpointOnThread()
        defer { checkpoints?.stop() }
        space.makeReserve()

        let source = try given ?? c.source.makeSource(configuration: c, logger: logger)
        let executor = ThreadExecutor(name: "geofence.monitor")
        defer { executor.finish() }
        let watchers = Watchers(store: store, logger: logger)
        let delivery = EventDelivery(store: store, hooks: c.hooks, logger: logger)
        let hooks = delivery.hooks
        let sinks = delivery.sinks
        let pipeline = FixPipeline(store: store, filter: c.filter, monitor: c.monitor)
        pipeline.idleLimit = c.idleLimit
        pipeline.measuresLatency = c.metrics != nil
        // The one event id generator: the pipeline's, shared with the control handler.
        let ids = pipeline.ids
        let metrics = EngineMetrics()
        // Rung with every commit, for the HTTP API's event streams.
        let apiBell = EventBell()
        let service = MonitorService(
            store: store, pipeline: pipeline, logger: logger,
            executor: executor, sourceLabel: source.label, sourceStatus: { source.status },
            policy: AccessPolicy(daemonUID: getuid(), restricted: c.restricted), maxRegions: c.maxRegions,
            onServices: { on in delivery.setLocationPaused(!on) },
            onEvents: {
                watchers.wake()
                delivery.wake()
                apiBell.ring()
            }, metrics: metrics, liveness: c.liveness, space: space,
            commitMark: MQTTSource.commitMark(for: source))
        let started = Date()
        let regions = try await service.load()
        try store.settings.set(DaemonSettings.pid, String(getpid()))
        try store.settings.set(DaemonSettings.started, TimestampParser.format(started))
        try store.settings.set(DaemonSettings.sourceAddress, source.label)
        if let gpsd = c.source as? GPSDSourceKind, given == nil {
            try store.settings.set(DaemonSettings.gpsd, gpsd.address.description)
        } else {
            try store.settings.set(DaemonSettings.gpsd, "")
        }
        // Written now, so `status` never answers for the source of an earlier run.
        try store.settings.set(
            DaemonSettings.sourceStatus, source.status.map { JSONValue.object($0.json).serialized() } ?? "")

        var identity = EngineIdentity(
            stateDirectory: canonicalDirectory(c.stateDirectory) ?? c.stateDirectory, pid: getpid(),
            version: version, started: started, source: source.label)
        identity.metrics = metrics
        let handler = ControlHandler(
            store: store, policy: AccessPolicy(daemonUID: getuid(), restricted: c.restricted),
            changed: { change in
                watchers.wake()
                hooks.wake()
                apiBell.ring()
                if case .sinks = change {
                    sinks.reload()
                    return
                }
                Task { await service.apply(change) }
            },
            subscribe: { watchers.add($0) },
            engine: identity, ids: ids)
        var metricsServer: MetricsServer?
        if let address = c.metrics {
            // A connection of its own, read-only: a scrape never waits behind the monitor's writes (a store
            // that hangs is what `/healthz` must be able to report), and cannot write.
            let reader = try StateStore(
                directory: c.stateDirectory, options: .init(readOnly: true, busyTimeout: .seconds(2)))
            var tls: MetricsServer.TLSIdentity?
            if let certificate = c.tlsCertificateFile, let key = c.tlsKeyFile {
                tls = try MetricsServer.TLSIdentity(certificateFile: certificate, keyFile: key)
            }
            let s = MetricsServer(
                address: address, api: c.api ? HTTPAPI(handler: handler, reader: reader, bell: apiBell) : nil,
                tls: tls, mapTiles: c.mapTiles,
                respond: MetricsEndpoints(
                    store: reader, metrics: metrics, hooks: hooks, sinks: sinks, source: source, version: version,
                    started: started
                ).respond)
            try s.start()
            metricsServer = s
            let shown = MetricsAddress(host: address.host, port: s.port)
            logger.info("metrics at \(s.scheme)://\(shown)/metrics")
            if c.api {
                logger.info("HTTP API at \(s.scheme)://\(shown)/v1/")
                logger.info("map at \(s.scheme)://\(shown)/map#token=TOKEN (a read token: geofence token add NAME)")
                if let missing = MapPage.leafletMissing { logger.warning("\(missing)") }
                if let tiles = c.mapTiles { logger.info("the map's tiles from \(tiles.source) (--map-tiles)") }
                if tls == nil && !["127.0.0.1", "::1"].contains(address.host) {
                    logger.warning(
                        "the HTTP API listens on \(shown) without TLS: its tokens cross the network in clear "
                            + "(give --tls-cert and --tls-key)")
                }
            }
        }
        var server: ControlServer?
        if let path = c.socketPath {
            let s = ControlServer(path: path, logger: logger) { request, connection in
                handler.handle(request, peer: connection.peer, connection: connection)
            }
            s.trust = { handler.trust($0) }
            do {
                try s.start()
            } catch {
                metricsServer?.stop()
                throw error
            }
            server = s
            logger.info("control socket at \(path)")
        }
        // Said once everything that can fail at start has not: the socket answers from now on.
        logger.notice(
            "geofence \(version) running: \(regions) regions from \(c.stateDirectory), fixes from \(source.label)"
                + String(format: " (started in %.2f s)", Date().timeIntervalSince(started)))
        // systemd (Type=notify) calls the engine started only now: the socket listens, the regions are loaded.
        let manager = ServiceManager()
        manager.ready(status: "\(regions) regions monitored; source \(source.label): starting")
        if let every = manager.watchdogInterval {
            logger.info("systemd watchdog: the monitor says it is alive every \(every)")
        }
        watchers.start()
        defer {
            watchers.stop()
            server?.stop()
            metricsServer?.stop()
        }

        source.start()
        let logger = self.logger
        let interval = c.regionSyncInterval
        let signalled = SignalName()
        var stall: (@Sendable () -> Void)?
        if let path = c.stallMonitorWhile {
            stall = {
                while access(path, F_OK) == 0 { usleep(20_000) }
            }
        }
        let heartbeat = MonitorHeartbeat(
            watchdogInterval: manager.watchdogInterval, watchdog: { manager.watchdog() },
            status: { manager.status($0) }, stall: stall)
        let monitor = service.services(source: source, interval: interval, heartbeat: heartbeat)
        // Started in this order, stopped in the reverse one: the signals, then the source (whose reports are all
        // judged), then the monitor's ticks, the sinks, and last the hook runner (running hooks get their grace).
        let group = ServiceGroup(
            delivery.services + [
                monitor.ticks,
                monitor.intake,
                ClosureService("signals") {
                    for await number in signalStream {
                        signalled.set(
                            number == SIGTERM ? "SIGTERM" : number == SIGINT ? "SIGINT" : "signal \(number)")
                        return
                    }
                },
            ],
            // Within systemd's stop timeout (TimeoutStopSec=10 in Packaging/geofence.service), with time left for
            // the last commit after it.
            deadline: .seconds(min(7, c.hooks.shutdownGrace * 2 + 5)))
        let control = server
        let api = c.api ? metricsServer : nil
        let ending = await group.run { ending in
            let why: String
            switch ending.service {
            case "signals": why = signalled.name ?? "signals ended"
            case "source": why = Self.sourceEnded
            case "hooks": why = "the hook runner stopped"
            case "sinks": why = "the sinks stopped"
            default: why = "stopped ticking"
            }
            logger.notice("stopping (\(why))")
            manager.stopping(why)
            // No more requests, and no client keeps the store's write lock (an import in parts rolls back)
            // while the engine commits its last state.
            control?.stop()
            // Nor through the HTTP API.
            api?.stop()
        }
        if !ending.cancelled.isEmpty {
            logger.warning("did not stop in time, cancelled: \(ending.cancelled.joined(separator: ", "))")
        }
        await service.recordSourceStatus()
        let shortfall = await service.shutdown()
        let stats = await service.statistics
        var stopped = "stopped: \(stats.accepted) fixes accepted, \(stats.total - stats.accepted) refused"
        let refusals = await service.refusalSummary
        if !refusals.isEmpty { stopped += " (\(refusals))" }
        if let status = source.status {
            stopped += "; \(status.countText), \(status.usableFixes) usable fixes"
            if status.unusableTotal > 0 { stopped += ", \(status.unusableTotal) unusable (\(status.unusableSummary))" }
        }
        if shortfall != nil { stopped += "; not everything was committed" }
        logger.notice(stopped)
        withExtendedLifetime(signals) {}
        if let shortfall { throw UncommittedAtStop(shortfall, source: source.label) }
    }
}

/// `geofence run` stopped with fixes judged but not committed: the store refused the writes (a full disk).
/// Says exactly what was not committed and what to send again; `geofence run` exits 74 (EX_IOERR).
package struct UncommittedAtStop: Error, CustomStringConvertible, Sendable {
    /// Accepted fixes not committed, per vehicle: how many, and the fix time of the first.
    package let vehicles: [(subject: String, count: Int, first: Date)]
    package let fixes: Int
    package let regionEvents: Int
    package let stateEvents: Int
    package let reason: String
    let source: String

    init(_ s: StopShortfall, source: String) {
        vehicles = s.fixes.vehicles.map { ($0.key, $0.value.count, $0.value.first) }.sorted {
            ($0.first, $0.subject) < ($1.first, $1.subject)
        }
        fixes = s.fixes.count
        regionEvents = s.regionEvents
        stateEvents = s.stateEvents
        reason = s.reason
        self.source = source
    }

    /// The vehicles named in the message, at most; the earliest first.
    static let named = 20

    package var description: String {
        var text = "stopped without committing \(fixes) accepted fix(es) of \(vehicles.count) vehicle(s)"
        text += " and the \(regionEvents) region event(s) they made"
        if stateEvents > 0 { text += ", and \(stateEvents) state event(s)" }
        text += " (\(reason))"
        guard !vehicles.isEmpty else { return text + "; free space on the file system of the state directory" }
        let shown = vehicles.prefix(Self.named).map {
            "\(JSONValue.string($0.subject).serialized()) from \(TimestampParser.format($0.first)) (\($0.count))"
        }
        text += "; send these vehicles' fixes from \(source) again, from these fix times on: "
        text += shown.joined(separator: ", ")
        if vehicles.count > Self.named {
            text +=
                ", and \(vehicles.count - Self.named) more from \(TimestampParser.format(vehicles[Self.named].first)) on"
        }
        text += " (`geofence vehicles` shows each vehicle's last committed fix)"
        return text
    }
}
