import Foundation
import GeofenceCore

/// What the engine knows of its source's health (the first and fourth questions), as `status`, the metrics
/// and `GeofenceMonitor.status()` show it.
package struct SourceCondition: Sendable, Equatable {
    /// Whether the source reached what it reads from (nil: it has not said).
    package var connected: Bool?
    /// Why it is not connected.
    package var reason: String?
    package var liveness = Liveness.awaitingFirstFix
    /// Why fixes are not arriving, in the source's terms.
    package var livenessReason: String?
}

/// Turns what the source says of itself (connected or not, why, its devices, whether usable fixes arrive)
/// and the fix filter's verdicts (fixes that arrive and are all refused) into the engine's account of its
/// source: the log lines, the state events, whether location is available (for the reconciler) and what
/// `status` reads. No I/O: the monitor does what the `Effects` say, in their order.
package struct SourceHealth: Sendable {
    /// A state event without its id (the monitor's generator gives ids in order) and time.
    package struct Draft: Sendable, Equatable {
        package var type: StateEvent.Kind
        package var state: String
        package var subject: String?
        package var reason: String?

        package init(type: StateEvent.Kind, state: String, subject: String? = nil, reason: String? = nil) {
            self.type = type
            self.state = state
            self.subject = subject
            self.reason = reason
        }
    }

    /// What `status` reads, kept in the store's settings (`StatusRecorder`).
    package enum Record: Sendable, Equatable {
        case connected
        case disconnected(String)
        case capabilities(CapabilitySnapshot)
        case liveness(Liveness)
    }

    /// What a report means, to be done in this order: the log lines, the state events (the cause), then the
    /// reconciliation a change of `locationAvailable` makes (its effects), then the records for `status`.
    package struct Effects: Sendable {
        package var log: [(level: LogLevel, line: String)] = []
        package var events: [Draft] = []
        package var locationAvailable: Bool?
        package var records: [Record] = []
    }

    /// Where fixes come from, for the log.
    let label: String
    /// A fleet source's account of itself (nil for gpsd), for the reasons of `source` events.
    private let sourceStatus: @Sendable () -> SourceStatus?
    package private(set) var condition = SourceCondition()
    /// The capability snapshot the source sent last (nil: none, or a source that cannot tell).
    package private(set) var capabilities: CapabilitySnapshot?
    private var lastDisconnection: String?
    /// Fixes that arrive and are all refused, told apart from a silent source (`checkRefusals`).
    private var refusals: RefusalWatch

    package init(
        label: String, sourceStatus: @escaping @Sendable () -> SourceStatus?,
        liveness: SourceLiveness.Configuration, startedAt: Date
    ) {
        self.label = label
        self.sourceStatus = sourceStatus
        refusals = RefusalWatch(liveness: liveness, startedAt: startedAt)
    }

    /// A fleet source's account of itself, now.
    var status: SourceStatus? { sourceStatus() }

    /// A report other than fixes (those go to the pipeline; see `fixesArrived`).
    package mutating func report(_ report: LocationReport) -> Effects {
        var effects = Effects()
        switch report {
        case .fix, .fixes:
            break
        case .up:
            condition.connected = true
            condition.reason = nil
            lastDisconnection = nil
            effects.log.append((.info, "connected to \(label)"))
            effects.records.append(.connected)
        case .down(let d):
            condition.connected = false
            condition.reason = d.reason
            let text = d.reason
            if text != lastDisconnection {
                effects.log.append((.warning, "\(text); retrying in \(Self.format(d.retryIn))"))
            } else {
                effects.log.append((.debug, "\(text); retry \(d.attempt) in \(Self.format(d.retryIn))"))
            }
            lastDisconnection = text
            effects.records.append(.disconnected(text))
        case .capabilities(let new):
            deviceChanges(from: capabilities, to: new, into: &effects)
            capabilities = new
            effects.records.append(.capabilities(new))
        case .liveness(let transition):
            let reason: String
            let level: LogLevel
            // What is known, in the source's own terms: a gpsd that cannot be reached is not a receiver
            // without sky, and a stream of unusable lines is neither.
            let status = sourceStatus()
            switch transition {
            case .silent:
                if let status {
                    reason = "no usable fix since the source started: " + status.silenceReason
                } else if let lastDisconnection {
                    reason = "no usable fix since the source started: \(lastDisconnection)"
                } else {
                    reason = "no usable fix since the source started: the receiver may have no view of the sky"
                }
                level = .warning
            case .lost:
                reason =
                    status.map { "usable fixes stopped arriving: " + $0.lostReason } ?? "usable fixes stopped arriving"
                level = .warning
            case .restored:
                reason = "usable fixes are arriving again"
                level = .notice
            }
            effects.log.append((level, "source \(transition.rawValue): \(reason)"))
            let liveness = Liveness(after: transition)
            condition.liveness = liveness
            condition.livenessReason = transition == .restored ? nil : reason
            effects.events.append(Draft(type: .source, state: transition.rawValue, reason: reason))
            effects.locationAvailable = transition == .restored
            effects.records.append(.liveness(liveness))
        case .warning(let message):
            effects.log.append((.warning, message))
        }
        return effects
    }

    /// Fixes arrived (whether or not the filter accepts them).
    package mutating func fixesArrived(_ fixes: [Fix]) {
        if condition.liveness == .awaitingFirstFix,
            fixes.contains(where: { FixFilter.classify($0, now: nil, configuration: .init()).isUsable })
        {
            condition.liveness = .receiving
        }
        if let last = fixes.last, let received = last.receivedAt, let time = last.time {
            refusals.lastAge = received.timeIntervalSince(time)
        }
    }

    /// Fixes that arrive while none is accepted: the source is `receiving` by its own lights (gpsd sends
    /// positions), yet nothing reaches the monitor. At the first-fix deadline (or, once fixes were used, the
    /// staleness limit) that is said as the source's `silent` (`lost`) with the reason in an operator's words
    /// (`fixes arrive but are 15 days old: ...`), as a state event; the next accepted fix restores it.
    package mutating func checkRefusals(_ statistics: FixFilterStatistics, at time: Date) -> Effects {
        // Only fixes the source itself calls usable (a position) and the filter refuses are this watch's to
        // report; a source without them says so itself (`silent`: no sky, unusable lines, no gpsd).
        let quiet = !refusals.refusing && condition.liveness != .receiving
        var effects = Effects()
        switch refusals.advance(statistics, at: time, sourceQuiet: quiet) {
        case .none:
            break
        case .refusing(let transition, let advice):
            let reason =
                (transition == .silent ? "no usable fix since the source started: " : "usable fixes stopped: ")
                + advice.text
            effects.log.append((.warning, "source \(transition.rawValue): \(reason)"))
            condition.liveness = Liveness(after: transition)
            condition.livenessReason = reason
            effects.events.append(Draft(type: .source, state: transition.rawValue, reason: reason))
            effects.locationAvailable = false
            effects.records.append(.liveness(condition.liveness))
        case .accepting:
            let reason = "usable fixes are arriving again"
            effects.log.append((.notice, "source restored: \(reason)"))
            condition.liveness = .receiving
            condition.livenessReason = nil
            effects.events.append(Draft(type: .source, state: "restored", reason: reason))
            effects.locationAvailable = true
            effects.records.append(.liveness(.receiving))
        }
        return effects
    }

    private func deviceChanges(from old: CapabilitySnapshot?, to new: CapabilitySnapshot, into effects: inout Effects) {
        let before = Set(old?.devices.map(\.path) ?? [])
        let after = Set(new.devices.map(\.path))
        for path in after.subtracting(before).sorted() {
            let device = new.device(at: path)
            effects.log.append((.info, "device added: \(path)" + (device?.driver.map { " (\($0))" } ?? "")))
            if old != nil { effects.events.append(Draft(type: .device, state: "added", subject: path)) }
        }
        for path in before.subtracting(after).sorted() {
            effects.log.append((.warning, "device removed: \(path)"))
            effects.events.append(Draft(type: .device, state: "removed", subject: path))
        }
    }

    private static func format(_ d: Duration) -> String {
        let seconds = Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
        return String(format: "%.1f s", seconds)
    }
}

/// Watches the filter's verdicts for fixes that keep arriving while none is accepted (see
/// `SourceHealth.checkRefusals`): a pure state machine on the wall clock it is given.
package struct RefusalWatch: Sendable {
    package enum Change: Sendable, Equatable {
        case none
        /// None accepted for the deadline while fixes were refused: `silent` (none ever) or `lost`.
        case refusing(SourceLiveness.Transition, RefusalAdvice)
        /// A fix accepted again after `refusing`.
        case accepting
    }

    package let liveness: SourceLiveness.Configuration
    /// When the last fix was accepted (or the engine started, before the first).
    private var since: Date
    private var everAccepted = false
    /// The verdicts when the last fix was accepted: what came after is `current - baseline`.
    private var baseline = FixFilterStatistics()
    package private(set) var refusing = false
    /// The last fix's receipt minus its own time (for words like "15 days old").
    package var lastAge: Double?

    package init(liveness: SourceLiveness.Configuration, startedAt: Date) {
        self.liveness = liveness
        since = startedAt
    }

    package mutating func advance(_ current: FixFilterStatistics, at time: Date, sourceQuiet: Bool = false) -> Change {
        if current.accepted != baseline.accepted {
            since = time
            everAccepted = true
            baseline = current
            if refusing {
                refusing = false
                return .accepting
            }
            return .none
        }
        guard !refusing, !sourceQuiet,
            time.timeIntervalSince(since) >= (everAccepted ? liveness.stalenessLimit : liveness.firstFixDeadline)
        else { return .none }
        var refused: [FixRejection: Int] = [:]
        for (reason, n) in current.rejected where n > baseline[reason] { refused[reason] = n - baseline[reason] }
        guard let advice = RefusalAdvice(refused: refused, age: lastAge) else { return .none }
        refusing = true
        return .refusing(everAccepted ? .lost : .silent, advice)
    }
}
