import Foundation
import GeofenceCore
import GeofenceStore

/// What `--metrics` answers: `/metrics` (Prometheus text), `/healthz` (200 `ok`, or 503 and what is wrong),
/// and `/` (where the two are). Runs on the HTTP server's thread: it reads the monitor's published values
/// (never the monitor itself) and the store (a scrape's few counts, read like `status` reads them).
struct MetricsEndpoints: Sendable {
    let store: StateStore
    let metrics: EngineMetrics
    let hooks: HookRunner
    let sinks: SinkSupervisor
    let source: any LocationSource
    let version: String
    let started: Date

    func respond(_ path: String) -> MetricsServer.Response {
        switch path {
        case "/metrics":
            return MetricsServer.Response(
                status: 200, contentType: PrometheusText.contentType, body: PrometheusText.render(report()))
        case "/healthz":
            let health = metrics.health()
            return MetricsServer.Response(
                status: health.ok ? 200 : 503, contentType: "text/plain; charset=utf-8",
                body: health.ok ? "ok\n" : (["unhealthy"] + health.problems).joined(separator: "\n") + "\n")
        case "/":
            return MetricsServer.Response(
                status: 200, contentType: "text/plain; charset=utf-8",
                body: "geofence \(version): /metrics (Prometheus), /healthz (200 while it works)\n")
        default:
            return MetricsServer.Response(
                status: 404, contentType: "text/plain; charset=utf-8", body: "not found: /metrics or /healthz\n")
        }
    }

    func report() -> MetricsReport {
        let snapshot = metrics.snapshot
        var r = MetricsReport(
            version: version, started: started, engine: snapshot, health: metrics.health())
        r.source = source.status
        r.hooks = hooks.statistics
        let health = sinks.health
        do {
            r.regions = try store.regions.countsByStatus()
            r.outboxEvents = try store.outbox.count()
            for (status, n) in try store.deliveries.countsByStatus() { r.deliveries[status.rawValue] = n }
            r.sinks = try store.sinks.progress().map { p in
                (p.sink.id, health[p.sink.id]?["connected"]?.boolValue ?? false, p.waiting)
            }
        } catch {
            r.storeError = "\(error)"
        }
        return r
    }
}
