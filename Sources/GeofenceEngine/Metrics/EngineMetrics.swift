import Foundation
import GeofenceCore
import Synchronization

/// A cumulative histogram of seconds with Prometheus's fixed buckets: counting a value costs a few
/// comparisons and no allocation, so the fix path can afford one per fix.
package struct LatencyHistogram: Sendable, Equatable {
    /// Upper bounds, seconds: from 100 µs (a fix committed at once) to 10 s (a store that waits on a disk).
    package static let bounds: [Double] = [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    ]
    /// Observations at or below each bound (not cumulative; `cumulative` adds them up).
    package private(set) var counts = [Int](repeating: 0, count: LatencyHistogram.bounds.count)
    /// Observations above the last bound.
    package private(set) var overflow = 0
    package private(set) var sum = 0.0

    package init() {}

    package var count: Int { counts.reduce(overflow, +) }

    /// Counts one duration. A value that is not a finite, non-negative number (a receipt stamped by a clock
    /// that stepped back) counts as 0, so it neither traps nor poisons the sum.
    package mutating func observe(_ seconds: Double) {
        let value = seconds.isFinite && seconds > 0 ? seconds : 0
        sum += value
        for (i, bound) in Self.bounds.enumerated() where value <= bound {
            counts[i] += 1
            return
        }
        overflow += 1
    }

    package mutating func merge(_ other: LatencyHistogram) {
        for i in counts.indices { counts[i] += other.counts[i] }
        overflow += other.overflow
        sum += other.sum
    }

    /// `(bound, observations at or below it)`, as Prometheus's `_bucket` series want them.
    package var cumulative: [(bound: Double, count: Int)] {
        var total = 0
        return zip(Self.bounds, counts).map { bound, n in
            total += n
            return (bound, total)
        }
    }
}

/// What the engine counts for an operator, published by the monitor's own loop and read by `/metrics`,
/// `/healthz` and `status`: one value behind one lock, so a scrape never waits on the monitor and the fix
/// path takes no lock at all (the monitor counts in its own copy and publishes it every tick).
package final class EngineMetrics: Sendable {
    /// The engine's counters and health as its monitor last published them.
    package struct Snapshot: Sendable {
        /// The filter's verdicts since the engine started, by reason.
        package var fixes = FixFilterStatistics()
        /// Events committed since the engine started, by type (`enter`, `exit`, ..., `source`, `services`).
        package var events: [String: Int] = [:]
        /// From a fix's receipt to the commit that made its decision durable.
        package var commitLatency = LatencyHistogram()
        /// Vehicles (subjects) held in memory.
        package var vehicles = 0
        /// Regions in the monitor's active set.
        package var monitoredRegions = 0
        /// Events made but not yet committed (non-zero only while the store refuses writes).
        package var uncommittedEvents = 0
        /// Whether the source reached what it reads from (nil: it has not said).
        package var sourceConnected: Bool?
        package var sourceProblem: String?
        package var liveness = Liveness.awaitingFirstFix
        package var livenessReason: String?
        /// Why the store refuses writes, while it does.
        package var storeProblem: String?
        /// Whether Location Services are on.
        package var servicesOn = true
        /// When the monitor's loop last ran (monotonic seconds); nil before it first did.
        package var lastBeat: Double?

        package init() {}
    }

    private let state = Mutex(Snapshot())
    /// How long the monitor's loop may go without a beat before the engine is called stuck, seconds.
    package let stallLimit: Double
    private let monotonic: @Sendable () -> Double

    package init(stallLimit: Double = 5, monotonic: @escaping @Sendable () -> Double = FixPipeline.uptime) {
        self.stallLimit = stallLimit
        self.monotonic = monotonic
    }

    package var snapshot: Snapshot { state.withLock { $0 } }

    package func publish(_ update: (inout Snapshot) -> Void) {
        state.withLock { update(&$0) }
    }

    /// The monitor's loop is alive: it calls this every time round, from the thread that does the work, so a
    /// monitor stuck in a call (a store that hangs, a loop that does not return) stops the beats.
    package func beat() {
        let now = monotonic()
        state.withLock { $0.lastBeat = now }
    }

    /// Whether the engine works: its monitor beats, its store takes writes, its source delivers. What is
    /// wrong, in words, when not. The same answer feeds `/healthz` and the systemd watchdog's view of the
    /// monitor.
    package func health() -> EngineHealth {
        EngineHealth(snapshot, now: monotonic(), stallLimit: stallLimit)
    }
}

/// The engine's health as an operator's probe sees it: the three working parts, each with what is wrong.
package struct EngineHealth: Sendable, Equatable {
    /// The monitor's loop beats (a systemd watchdog cares about this part alone: a silent receiver is no
    /// reason to restart an engine).
    package var monitorOK: Bool
    package var problems: [String]

    package var ok: Bool { problems.isEmpty }

    package init(_ s: EngineMetrics.Snapshot, now: Double, stallLimit: Double) {
        var problems: [String] = []
        if let beat = s.lastBeat {
            let quiet = now - beat
            monitorOK = quiet <= stallLimit
            if !monitorOK {
                problems.append(String(format: "monitor: its loop has not run for %.1f s", quiet))
            }
        } else {
            monitorOK = false
            problems.append("monitor: not started")
        }
        if let problem = s.storeProblem { problems.append("store: refuses writes (\(problem))") }
        if s.sourceConnected == false {
            problems.append("source: not connected" + (s.sourceProblem.map { " (\($0))" } ?? ""))
        } else if s.liveness.isOutage {
            problems.append("source: \(s.liveness.rawValue)" + (s.livenessReason.map { " (\($0))" } ?? ""))
        }
        self.problems = problems
    }
}

extension EngineMetrics {
    /// The counters as `status --json` shows them, under the names `/metrics` uses: `fixes` (accepted, refused
    /// by reason), `events` committed since start by type, `health` (ok, and what is wrong).
    package var statusJSON: JSONObject {
        let s = snapshot
        let health = health()
        var refused = JSONObject()
        for (reason, n) in s.fixes.rejected.sorted(by: { $0.key.rawValue < $1.key.rawValue }) where n > 0 {
            refused[reason.rawValue] = .number(Double(n))
        }
        return [
            "fixes": [
                "accepted": .number(Double(s.fixes.accepted)),
                "refused": .object(refused),
                "refusedTotal": .number(Double(s.fixes.total - s.fixes.accepted)),
            ],
            "eventsSinceStart": .object(
                JSONObject(
                    uniqueKeysWithValues: s.events.sorted(by: { $0.key < $1.key }).map {
                        ($0.key, .number(Double($0.value)))
                    }
                )),
            "vehicles": .number(Double(s.vehicles)),
            "health": ["ok": .bool(health.ok), "problems": .array(health.problems.map { .string($0) })],
        ]
    }
}
