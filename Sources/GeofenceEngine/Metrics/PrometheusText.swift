import Foundation
import GeofenceCore

/// Everything `/metrics` shows at one scrape: the monitor's published counters and what is read from the
/// store and the hook runner at that moment.
package struct MetricsReport: Sendable {
    package var version: String
    package var started: Date
    package var engine: EngineMetrics.Snapshot
    package var health: EngineHealth
    /// A fleet source's own account (lines or messages, unusable ones by reason); nil for gpsd.
    package var source: SourceStatus?
    /// Regions in the store, by status kind (`monitoring`, `pending`, `failed`, ...).
    package var regions: [String: Int] = [:]
    /// Events in the outbox.
    package var outboxEvents: Int?
    /// Each sink: its id, whether it is connected, the events it has still to acknowledge.
    package var sinks: [(id: String, connected: Bool, lag: Int)] = []
    /// The hook runner's counters since start.
    package var hooks = HookRunnerStatistics()
    /// Hook deliveries in the store, by status (`pending`, `running`, `dead`, ...).
    package var deliveries: [String: Int] = [:]
    /// What could not be read from the store at this scrape (the figures from it are then missing).
    package var storeError: String?

    package init(version: String, started: Date, engine: EngineMetrics.Snapshot, health: EngineHealth) {
        self.version = version
        self.started = started
        self.engine = engine
        self.health = health
    }
}

/// Prometheus's text exposition format (version 0.0.4) for a `MetricsReport`: one `# HELP` and `# TYPE`
/// per family, label values escaped, names by Prometheus's conventions (`_total` counters, base units).
package enum PrometheusText {
    package static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    package static func render(_ r: MetricsReport) -> String {
        var out = Writer()
        out.family("geofence_build_info", "gauge", "The running engine's version (the value is always 1).")
        out.sample("geofence_build_info", ["version": r.version], 1)
        out.family("geofence_start_time_seconds", "gauge", "When the engine started, seconds since the epoch.")
        out.sample("geofence_start_time_seconds", [:], r.started.timeIntervalSince1970)

        let f = r.engine.fixes
        out.family(
            "geofence_fixes_total", "counter",
            "Fixes judged by the filter since start: accepted, or refused by reason.")
        out.sample("geofence_fixes_total", ["result": "accepted"], Double(f.accepted))
        for reason in FixRejection.allCases {
            out.sample("geofence_fixes_total", ["result": "refused", "reason": reason.rawValue], Double(f[reason]))
        }
        if let source = r.source {
            out.family(
                "geofence_source_messages_total", "counter",
                "Lines (JSON lines) or messages (MQTT) the fleet source read since start.")
            out.sample("geofence_source_messages_total", ["kind": source.kind], Double(source.lines))
            out.family(
                "geofence_source_unusable_total", "counter",
                "Lines or messages that gave no usable fix, by reason (before the filter).")
            for (reason, n) in source.unusable.sorted(by: { $0.key < $1.key }) {
                out.sample("geofence_source_unusable_total", ["reason": reason], Double(n))
            }
        }
        out.family("geofence_events_total", "counter", "Events committed to the outbox since start, by type.")
        var events = r.engine.events
        for type in RegionEventType.allCases.map(\.rawValue) where events[type] == nil { events[type] = 0 }
        for (type, n) in events.sorted(by: { $0.key < $1.key }) {
            out.sample("geofence_events_total", ["type": type], Double(n))
        }
        out.family(
            "geofence_fix_commit_seconds", "histogram",
            "From a fix's receipt to the commit that made its decision durable.")
        for (bound, n) in r.engine.commitLatency.cumulative {
            out.sample("geofence_fix_commit_seconds_bucket", ["le": number(bound)], Double(n))
        }
        out.sample("geofence_fix_commit_seconds_bucket", ["le": "+Inf"], Double(r.engine.commitLatency.count))
        out.sample("geofence_fix_commit_seconds_sum", [:], r.engine.commitLatency.sum)
        out.sample("geofence_fix_commit_seconds_count", [:], Double(r.engine.commitLatency.count))

        out.family("geofence_vehicles", "gauge", "Vehicles (subjects) the engine holds in memory.")
        out.sample("geofence_vehicles", [:], Double(r.engine.vehicles))
        out.family("geofence_regions_monitored", "gauge", "Regions in the monitor's active set.")
        out.sample("geofence_regions_monitored", [:], Double(r.engine.monitoredRegions))
        if !r.regions.isEmpty {
            out.family("geofence_regions", "gauge", "Regions in the store, by status.")
            for (status, n) in r.regions.sorted(by: { $0.key < $1.key }) {
                out.sample("geofence_regions", ["status": status], Double(n))
            }
        }
        if let outbox = r.outboxEvents {
            out.family("geofence_outbox_events", "gauge", "Events in the outbox (kept until pruned).")
            out.sample("geofence_outbox_events", [:], Double(outbox))
        }
        out.family(
            "geofence_uncommitted_events", "gauge",
            "Events decided but not yet committed (non-zero only while the store refuses writes).")
        out.sample("geofence_uncommitted_events", [:], Double(r.engine.uncommittedEvents))
        if !r.sinks.isEmpty {
            out.family("geofence_sink_lag_events", "gauge", "Events a sink has still to acknowledge.")
            for sink in r.sinks { out.sample("geofence_sink_lag_events", ["sink": sink.id], Double(sink.lag)) }
            out.family("geofence_sink_connected", "gauge", "1 while a sink is connected to its receiver.")
            for sink in r.sinks {
                out.sample("geofence_sink_connected", ["sink": sink.id], sink.connected ? 1 : 0)
            }
        }
        out.family("geofence_hook_deliveries_total", "counter", "Hook runs since start, by result.")
        out.sample("geofence_hook_deliveries_total", ["result": "delivered"], Double(r.hooks.delivered))
        out.sample("geofence_hook_deliveries_total", ["result": "failed"], Double(r.hooks.failed))
        out.sample("geofence_hook_deliveries_total", ["result": "dead"], Double(r.hooks.dead))
        out.family("geofence_hooks_running", "gauge", "Hook processes running now.")
        out.sample("geofence_hooks_running", [:], Double(r.hooks.running))
        if !r.deliveries.isEmpty {
            out.family("geofence_hook_deliveries", "gauge", "Hook deliveries in the store, by status (the backlog).")
            for (status, n) in r.deliveries.sorted(by: { $0.key < $1.key }) {
                out.sample("geofence_hook_deliveries", ["status": status], Double(n))
            }
        }
        out.family("geofence_source_up", "gauge", "1 while the source delivers usable fixes.")
        out.sample(
            "geofence_source_up", [:], r.engine.sourceConnected != false && r.engine.liveness == .receiving ? 1 : 0)
        out.family(
            "geofence_source_liveness", "gauge",
            "The source's liveness: 1 for its current state (awaiting-first-fix, receiving, silent, lost).")
        for state in Liveness.allCases {
            out.sample("geofence_source_liveness", ["state": state.rawValue], r.engine.liveness == state ? 1 : 0)
        }
        out.family("geofence_services_on", "gauge", "1 while Location Services are on.")
        out.sample("geofence_services_on", [:], r.engine.servicesOn ? 1 : 0)
        out.family("geofence_store_writable", "gauge", "1 while the store takes the engine's writes.")
        out.sample("geofence_store_writable", [:], r.engine.storeProblem == nil ? 1 : 0)
        out.family("geofence_healthy", "gauge", "1 while /healthz answers 200: monitor, store and source all work.")
        out.sample("geofence_healthy", [:], r.health.ok ? 1 : 0)
        if r.storeError != nil {
            out.family("geofence_scrape_store_errors", "gauge", "1 when this scrape could not read the store.")
            out.sample("geofence_scrape_store_errors", [:], 1)
        }
        return out.text
    }

    /// A number as Prometheus reads it: integers without a fraction, others in full precision.
    static func number(_ v: Double) -> String {
        if v.isNaN { return "NaN" }
        if v.isInfinite { return v > 0 ? "+Inf" : "-Inf" }
        if v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) }
        return "\(v)"
    }

    /// A label value with `\`, `"` and newlines escaped, as the format asks.
    static func escape(_ value: String) -> String {
        var out = ""
        out.reserveCapacity(value.utf8.count)
        for c in value.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    private struct Writer {
        var text = ""

        mutating func family(_ name: String, _ type: String, _ help: String) {
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }

        mutating func sample(_ name: String, _ labels: [String: String], _ value: Double) {
            text += name
            if !labels.isEmpty {
                // `le` last, as Prometheus writes it; the others in name order.
                let ordered = labels.sorted { ($0.key == "le" ? 1 : 0, $0.key) < ($1.key == "le" ? 1 : 0, $1.key) }
                text +=
                    "{" + ordered.map { "\($0.key)=\"\(PrometheusText.escape($0.value))\"" }.joined(separator: ",")
                    + "}"
            }
            text += " " + PrometheusText.number(value) + "\n"
        }
    }
}
