import Foundation
import GeofenceCore
import GeofenceEngine

/// `geofence status --nats URLS`: a cluster's report (`ClusterStatusReport`) as text or JSON.
enum ClusterStatusOutput {
    static func run(_ c: CommandContext, servers: NATSServers, wait: Double) throws {
        let report: ClusterStatusReport
        do {
            let connection = try NATSConnection(
                servers, name: "geofence status", connectTimeout: .milliseconds(Int(min(wait, 30) * 1000)),
                requestTimeout: .milliseconds(Int(min(wait, 30) * 1000)))
            report = try ClusterStatusReport.read(connection)
        } catch let error as NATSError {
            throw CommandFailure(
                "cannot read the cluster's status at \(servers.urls): \(error)", exitCode: .unavailable)
        }
        if c.json {
            c.console.print(JSONValue.object(report.json).serialized())
        } else {
            print(report, to: c)
        }
        if !(report.problems.isEmpty && !report.engines.isEmpty) { throw CommandFailure.quiet(.notReady) }
    }

    static func number(_ value: JSONValue?) -> Double? {
        if case .number(let n)? = value { return n }
        return nil
    }

    static func text(_ value: JSONValue?) -> String {
        switch value {
        case .string(let s)?: s
        case .number(let n)?: n == n.rounded() && abs(n) < 1e15 ? String(Int64(n)) : String(n)
        default: "-"
        }
    }

    static func print(_ report: ClusterStatusReport, to c: CommandContext) {
        let partitions = report.partitions.map(String.init) ?? "?"
        c.console.print(
            "cluster: \(report.engines.count) engine(s), \(partitions) partitions, fix stream "
                + (report.fixStreamExists ? "\(report.fixFirst)-\(report.fixLast)" : "missing")
                + ", \(report.events) events stored")
        for engine in report.engines {
            c.console.print(
                "engine \(text(engine["engine"])): fixes \(text(engine["fixes"])), events \(text(engine["events"])) "
                    + "(+\(text(engine["duplicates"])) duplicates dropped), take-overs \(text(engine["take_overs"])), "
                    + "fenced \(text(engine["fenced"])), checkpoints \(text(engine["checkpoints"])), "
                    + "regions \(text(engine["regions"]))")
            guard case .array(let list)? = engine["partitions"] else { continue }
            for case .object(let p) in list {
                c.console.print(
                    "  partition \(text(p["partition"])): lag \(text(p["lag"])), at fix \(text(p["covered"])), "
                        + "checkpoint \(text(p["checkpoint"])) (\(text(p["checkpoint_age"])) s ago), "
                        + "last fix \(text(p["last_fix_age"])) s ago, \(text(p["vehicles"])) vehicles, "
                        + "taken in \(text(p["take_over_ms"])) ms, "
                        + "\(text(p["attempted"])) publishes attempted in term \(text(p["term"]))")
            }
            // The terms this engine gave up lately, with the last publish it attempted in each: what shows that a
            // stale owner stopped before another took over, whatever the stream kept.
            guard case .array(let released)? = engine["released"] else { continue }
            for case .object(let r) in released.suffix(12) {
                c.console.print(
                    "  gave up partition \(text(r["partition"])) term \(text(r["term"])) at \(text(r["given_up"])): "
                        + "\(text(r["attempted"])) publishes attempted, the last at \(text(r["last_attempt"]))")
            }
        }
        if !report.silent.isEmpty {
            c.console.print(
                "silent (no fix for \(Int(ClusterStatusReport.silentAfter)) s): partitions "
                    + report.silent.map(String.init).joined(separator: ","))
        }
        for problem in report.problems { c.console.print("problem: \(problem)") }
        for warning in report.warnings { c.console.print("warning: \(warning)") }
        if report.problems.isEmpty && !report.engines.isEmpty { c.console.print("ready") }
    }
}
