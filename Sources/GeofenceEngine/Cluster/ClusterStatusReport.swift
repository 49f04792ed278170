import Foundation
import GeofenceCore

/// What `geofence status --nats` says of a cluster: the engines (each one's own status, which it writes to
/// the status bucket every two seconds), which partitions each owns, the lag and the last checkpoint of each,
/// take-overs and fenced publishes, the fix stream's retention against the oldest checkpoint, and the problems,
/// each with what to do. Read from JetStream alone: it works from any machine that reaches the cluster.
package struct ClusterStatusReport: Sendable {
    package var engines: [JSONObject] = []
    /// The partition count the engines report (nil: no engine reports).
    package var partitions: Int?
    /// Partitions no live engine reports owning.
    package var orphaned: [Int] = []
    /// The fix stream: first and last sequence kept, and its age limit in seconds (0: none).
    package var fixFirst: UInt64 = 0
    package var fixLast: UInt64 = 0
    package var fixStreamExists = false
    package var events: UInt64 = 0
    package var problems: [String] = []
    /// What holds now and will not if nothing is done: a fix that a take-over of a partition needs (from its
    /// checkpoint on) which the fix stream drops soon, by its age limit.
    package var warnings: [String] = []
    /// The fixes a take-over needs are warned of once the stream drops them within this share of its max age.
    package static let retentionWarningShare = 0.25

    /// An engine that has not updated its status for this long is taken to be gone.
    package static let staleAfter = 10.0
    /// A partition whose last fix came longer ago than this is silent; a cluster all of whose partitions are
    /// is a problem (nothing arrives), never a healthy engine.
    package static let silentAfter = 60.0
    /// Partitions owned whose last fix is older than `silentAfter`, or that had none since they were taken.
    package var silent: [Int] = []

    /// Reads the report. **Blocks** for a few JetStream requests. Throws `NATSError` when the cluster cannot
    /// be reached.
    package static func read(_ connection: NATSConnection, prefix: String = "geofence", now: Date = Date()) throws
        -> ClusterStatusReport
    {
        var report = ClusterStatusReport()
        let layout = ClusterLayout(partitions: 1, prefix: prefix)
        var maxAge: Duration?
        if let fixes = try connection.streamInfo(name: layout.fixStream) {
            maxAge = fixes.maxAge
            report.fixStreamExists = true
            report.fixFirst = fixes.firstSequence
            report.fixLast = fixes.lastSequence
        } else {
            report.problems.append(
                "the fix stream \(layout.fixStream) does not exist: no engine has joined yet (geofence run --source nats://...)"
            )
        }
        report.events = try connection.streamInfo(name: layout.eventStream)?.messages ?? 0
        let bucket = try connection.ensureKeyValue(bucket: layout.statusBucket, replicas: 1, ttl: .seconds(60))
        let watcher = try bucket.watch()
        defer { watcher.stop() }
        var entries: [NATSKeyValue.Entry] = []
        while case .entry(let entry)? = try watcher.next(timeout: connection.requestTimeout) { entries.append(entry) }
        for entry in entries {
            guard entry.operation == .put, case .object(let status)? = try? JSON.parse(entry.value) else { continue }
            if case .string(let updated)? = status["updated"], let time = try? TimestampParser.parse(updated),
                now.timeIntervalSince(time) > staleAfter
            {
                continue
            }
            report.engines.append(status)
            if case .number(let p)? = status["partitions_total"], p >= 1, p <= 4096 { report.partitions = Int(p) }
        }
        report.engines.sort { (Self.text($0["engine"]) ?? "") < (Self.text($1["engine"]) ?? "") }
        let settings = Dictionary(grouping: report.engines) { Self.text($0["settings"]) ?? "?" }
        if settings.count > 1 {
            let groups = settings.sorted { $0.key < $1.key }.map { fingerprint, engines in
                "\(engines.compactMap { Self.text($0["engine"]) }.joined(separator: ", ")): \(fingerprint)"
            }
            report.problems.append(
                "the engines judge with different settings (\(groups.joined(separator: "; "))): a partition "
                    + "taken over by another engine would be judged differently; give every engine the same "
                    + "filter and monitor settings and partition count")
        }
        if let partitions = report.partitions {
            // The first fix a take-over of each partition would replay: after the checkpoint its owner reports,
            // or after the last checkpoint stored for a partition no engine owns (from the stream's first fix
            // without one).
            var needed: [Int: UInt64] = [:]
            var owned = Set<Int>()
            for engine in report.engines {
                guard case .array(let list)? = engine["partitions"] else { continue }
                for case .object(let p) in list {
                    guard case .number(let n)? = p["partition"], n >= 0, n < Double(partitions) else { continue }
                    owned.insert(Int(n))
                    if let checkpoint = Self.text(p["checkpoint"]).flatMap(UInt64.init), checkpoint < UInt64.max {
                        needed[Int(n)] = checkpoint + 1
                    }
                    let age: Double? = if case .number(let a)? = p["last_fix_age"] { a } else { nil }
                    if (age ?? .infinity) > silentAfter { report.silent.append(Int(n)) }
                    if let checkpoint = Self.text(p["checkpoint"]).flatMap(UInt64.init), report.fixStreamExists,
                        report.fixFirst > 1, checkpoint + 1 < report.fixFirst
                    {
                        report.problems.append(
                            "partition \(Int(n)): its checkpoint (fix \(checkpoint)) is older than the first fix the "
                                + "stream keeps (\(report.fixFirst)): a take-over cannot replay what it missed; "
                                + "raise the fix stream's max age")
                    }
                }
            }
            report.orphaned = (0..<partitions).filter { !owned.contains($0) }
            if let maxAge, report.fixStreamExists {
                let checkpoints = CheckpointLog(connection: connection, layout: layout)
                for partition in report.orphaned {
                    let covered = (try? checkpoints.covered(partition: partition)) ?? nil
                    needed[partition] = covered.map { $0 < UInt64.max ? $0 + 1 : $0 } ?? report.fixFirst
                }
                report.warnings = retentionWarnings(
                    connection, layout: layout, needed: needed, maxAge: maxAge, first: report.fixFirst,
                    last: report.fixLast, now: now)
            }
            report.silent.sort()
            if !owned.isEmpty && report.silent.count == owned.count {
                report.problems.append(
                    "silent: no partition has had a fix for \(Int(silentAfter)) s (are producers publishing to "
                        + "\(prefix).fix.VEHICLE, and does the servers' mapping put them on \(prefix).fixp.*.*?)")
            }
            if !report.orphaned.isEmpty {
                report.problems.append(
                    "partitions \(report.orphaned.map(String.init).joined(separator: ",")) have no engine: their "
                        + "fixes wait in the stream (an engine takes them within its lease time; start one if none runs)"
                )
            }
        } else if report.fixStreamExists {
            report.problems.append("no engine reports: every partition waits (geofence run --source nats://...)")
        }
        return report
    }

    /// The partitions whose take-over needs a fix the stream drops within `retentionWarningShare` of its max
    /// age, oldest first, each with what to do. A fix's storage time grows with its sequence, so the lookups
    /// stop at the first partition that is safe.
    static func retentionWarnings(
        _ connection: NATSConnection, layout: ClusterLayout, needed: [Int: UInt64], maxAge: Duration,
        first: UInt64, last: UInt64, now: Date
    ) -> [String] {
        let age = Double(maxAge.components.seconds) + Double(maxAge.components.attoseconds) / 1e18
        guard age > 0 else { return [] }
        var warnings: [String] = []
        for (partition, sequence) in needed.sorted(by: { ($0.value, $0.key) < ($1.value, $1.key) }) {
            // Beyond the last fix: nothing stored is needed. Before the first: already lost (a problem above).
            guard sequence <= last, sequence >= max(first, 1) else { continue }
            // A fix that cannot be read now (deleted, or no answer) says nothing of the retention: no warning.
            guard let message = (try? connection.message(stream: layout.fixStream, sequence: sequence)) ?? nil,
                let stored = message.stored
            else { continue }
            let left = stored.timeIntervalSince(now) + age
            guard left < age * retentionWarningShare else { break }
            warnings.append(
                "partition \(partition): a take-over needs the fixes from \(sequence) on, stored "
                    + "\(TimestampParser.format(stored)); the fix stream drops them in "
                    + "\(DurationParser.format(max(0, left.rounded()))) (its max age is \(DurationParser.format(age.rounded()))): let an "
                    + "engine own the partition and catch up, or raise the stream's max age")
        }
        return warnings
    }

    static func text(_ value: JSONValue?) -> String? {
        if case .string(let s)? = value { return s }
        return nil
    }

    /// The report as `--json` prints it.
    package var json: JSONObject {
        [
            "engines": .array(engines.map { .object($0) }),
            "partitions": partitions.map { .number(Double($0)) } ?? .null,
            "orphaned": .array(orphaned.map { .number(Double($0)) }),
            "silent": .array(silent.map { .number(Double($0)) }),
            "fix_stream": .object([
                "exists": .bool(fixStreamExists), "first": .string(String(fixFirst)), "last": .string(String(fixLast)),
            ]),
            "events": .number(Double(events)),
            "problems": .array(problems.map { .string($0) }),
            "warnings": .array(warnings.map { .string($0) }),
            "ready": .bool(problems.isEmpty && !engines.isEmpty),
        ]
    }
}
