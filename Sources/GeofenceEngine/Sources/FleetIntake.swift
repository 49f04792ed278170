import Foundation
import GeofenceCore
import GeofenceGPSD
import GeofenceSystem

/// What every fleet source (JSON lines, MQTT) does the same way, written once: the report stream with
/// back-pressure, the first-fix deadline and staleness watchdog, and the counting of what arrives (usable
/// fixes, the unusable by reason, the first of each kind logged, then a summary at most once a minute).
///
/// A source feeds it decoded reports from its own thread (`take`, `send`) and says whether it is open or
/// connected (`update`); `status` is its answer for `geofence status`.
final class FleetIntake: @unchecked Sendable {
    // @unchecked: the mutable fields are only touched under `lock`.
    /// The reports, with back-pressure: `send` waits while `BackPressure.standard`'s sixteen wait, so a producer
    /// faster than the engine is held back (through the pipe, or the broker's in-flight window) instead of
    /// filling memory with an unbounded buffer.
    let reports: LocationReports
    private let lock = NSLock()
    private var stopped = false
    private var liveness: SourceLiveness
    private var counts: SourceStatus
    private let logger: Logger?
    private let clock = MonotonicClock()
    /// When unusable reports were last summed up in the log, and how many there were then.
    private var lastSummary = -Double.infinity
    private var unusableAtSummary = 0
    /// The classes (`SKY`, `OwnTracks waypoint`, ...) already said once in the log, at most 100 of them.
    private var ignoredClasses: Set<String> = []

    /// The filter's settings, for its judgement of each fix at receipt (`FixFilter.classify`).
    private let filter: FixFilterConfiguration

    init(
        status: SourceStatus, liveness: SourceLiveness.Configuration, filter: FixFilterConfiguration, logger: Logger?,
        backPressure: LocationReports.BackPressure = .standard
    ) {
        self.filter = filter
        reports = LocationReports(backPressure: backPressure)
        counts = status
        self.logger = logger
        self.liveness = SourceLiveness(configuration: liveness, startedAt: clock.now)
    }

    var label: String { lock.withLock { counts.label } }

    var status: SourceStatus {
        lock.withLock {
            var status = counts
            status.liveness = liveness.state.liveness
            return status
        }
    }

    var isStopped: Bool { lock.withLock { stopped } }

    /// Changes the source's own facts (open or connected, and why not); returns what `body` returns.
    func update<T>(_ body: (inout SourceStatus) -> T) -> T { lock.withLock { body(&counts) } }

    /// Restarts the deadlines and watches them every 0.1 s, on a thread of its own: the source's thread may
    /// be blocked for good (in `open` or `read` on an idle FIFO, or in libmosquitto's loop).
    func startWatchdog(name: String) {
        lock.withLock { liveness.restart(at: clock.now) }
        let watchdog = Thread { [self] in
            while !isStopped {
                let transition = lock.withLock { liveness.advance(to: clock.now) }
                if let transition { sendNow(.liveness(transition)) }
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
        watchdog.name = name
        watchdog.start()
    }

    /// No more waiting for room; the watchdog ends. The stream stays open until `finish`.
    func stop() {
        lock.withLock { stopped = true }
        reports.stopWaiting()
    }

    func finish() { reports.finish() }

    /// Hands a report over once there is room for it.
    func send(_ report: LocationReport) { reports.send(report) }

    /// Hands a report over without waiting for room: liveness and connection news never wait behind fixes.
    func sendNow(_ report: LocationReport) { reports.sendNow(report) }

    /// Counts one decoded line or message; returns the fix to pass on, if it is one (usable or not: the
    /// filter counts its own refusals; only one from the future is held back). `context` goes into the log
    /// line after the unit (` on "topic"`); it is made only for that line, not for every message.
    /// Counts a message that is handled elsewhere (an OwnTracks waypoint made a region): received, no fix.
    func countMessage() {
        lock.withLock { counts.lines += 1 }
    }

    func take(_ report: GPSDJSONReport, context: @autoclosure () -> String = "") -> Fix? {
        let unusable: (kind: String, why: String)?
        var fix: Fix?
        // The wall clock at receipt, read once: for the future check and the last fix's time read.
        let read = Date()
        switch report {
        case .tpv(let decoded):
            // The filter's own judgement, at the receipt time. The filter sees a fleet's fixes without one (a
            // backlog is rightly old), so a fix from the future (a device whose clock is wrong, a payload that
            // lies) is refused here: passed on, it would hold its vehicle's true fixes back as out of order
            // until the clock caught up with it, and could open its track with a false event.
            let verdict = FixFilter.classify(decoded, now: read, configuration: filter)
            unusable = FixUsability.reason(verdict, configuration: filter)
            if case .future = verdict {} else { fix = decoded }
        case .other(let name):
            let (first, label, unit) = lock.withLock {
                counts.lines += 1
                counts.ignored += 1
                let first = ignoredClasses.count < 100 && ignoredClasses.insert(name).inserted
                return (first, counts.label, counts.unit)
            }
            // Not an error (gpsd and OwnTracks send other classes on the same stream): said once, at info.
            if first {
                logger?.info(
                    "\(label): ignored a \(unit)\(context()) of class \(name) (not a fix); further ones are counted")
            }
            return nil
        case .malformed(let problem):
            unusable = (problem.kind.rawValue, problem.description)
        }
        let now = clock.now
        var restored: SourceLiveness.Transition?
        var first = false
        var summary: String?
        var label = ""
        var unit = ""
        lock.withLock {
            counts.lines += 1
            if let unusable {
                // Only a line that may be logged needs the source's words (`label` is built on each call).
                label = counts.label
                unit = counts.unit
                first = counts.unusable[unusable.kind] == nil
                counts.unusable[unusable.kind, default: 0] += 1
                // After the first of each kind, at most one line a minute sums up what came since.
                let total = counts.unusableTotal
                if !first, now - lastSummary >= 60, total > unusableAtSummary + 1 {
                    summary = "\(total) \(unit)(s) from \(label) gave no usable fix so far: \(counts.unusableSummary)"
                    lastSummary = now
                    unusableAtSummary = total
                }
                if first { lastSummary = now }
            } else if let fix {
                counts.usableFixes += 1
                counts.lastFixTime = fix.time
                counts.lastFixRead = read
                restored = liveness.usableFix(at: now)
            }
        }
        if let unusable, first {
            logger?.warning(
                "\(label): skipped a \(unit)\(context()) (\(unusable.kind)): \(unusable.why); further ones are counted")
        }
        if let summary { logger?.warning(summary) }
        // `restored` before the fix that ended the outage, as gpsd's source sends it.
        if let restored { sendNow(.liveness(restored)) }
        // A refused vehicle name never reaches the pipeline; other fixes do, and the filter judges them.
        return fix
    }
}
