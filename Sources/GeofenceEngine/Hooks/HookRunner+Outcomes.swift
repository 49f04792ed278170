import Foundation
import GeofenceCore
import GeofenceStore

/// What the scheduler thread makes of finished attempts: outcomes (done, a retry with backoff, dead), their
/// commit, and the log lines that tell of them.
extension HookRunner {
    /// Turns finished attempts into outcomes.
    func collect(
        _ finished: [(claim: ClaimedDelivery, result: HookProcessResult)], now: Date, into state: inout LoopState
    ) {
        for (claim, result) in finished {
            state.running[claim.id] = nil
            let outcome = self.outcome(claim, result, now: now)
            state.outcomes.append((claim, outcome))
            switch outcome.status {
            case .done: state.summary.delivered += 1
            case .dead:
                state.summary.dead += 1
                control.gaveUp()
            default: break
            }
            if !result.succeeded && !result.interrupted { state.summary.failedAttempts += 1 }
        }
    }

    /// Commits the outcomes, then moves each key on: a retry keeps its place at its new time; a finished
    /// delivery hands over to the next of its key.
    func record(_ state: inout LoopState, db: StateStore, now: Date) {
        guard !state.outcomes.isEmpty else { return }
        let nextHeads: [DeliveryOrderKey: DeliveryHead]
        do {
            nextHeads = try db.deliveries.recordOutcomes(state.outcomes.map(\.outcome))
        } catch {
            fail(&state, "cannot record deliveries: \(error)")
            return
        }
        for (claim, outcome) in state.outcomes {
            if outcome.status == .pending, let next = outcome.nextAttemptAt {
                state.scheduler.setHead(
                    DeliveryHead(id: claim.id, orderKey: claim.orderKey, nextAttemptAt: next), for: claim.orderKey)
            } else if var next = nextHeads[claim.orderKey] {
                // Queued behind the heads already waiting, so that one region's backlog takes its turn with
                // the others instead of keeping a slot to itself.
                next.nextAttemptAt = max(next.nextAttemptAt, now)
                state.scheduler.setHead(next, for: claim.orderKey)
            } else {
                state.scheduler.setHead(nil, for: claim.orderKey)
            }
        }
        state.outcomes.removeAll(keepingCapacity: true)
    }

    func outcome(_ claim: ClaimedDelivery, _ result: HookProcessResult, now: Date) -> DeliveryOutcome {
        var attempt = DeliveryAttempt(
            number: claim.attempt, startedAt: result.spawnedAt ?? now, duration: result.duration,
            exitCode: result.exitCode, signal: result.signal, timedOut: result.timedOut, error: result.error)
        var status = DeliveryStatus.done
        var next: Date?
        if result.succeeded {
            let level: LogLevel = claim.attempt > 1 ? .info : .debug
            logger.log(
                level, "hooks: \(describe(claim)) delivered" + (claim.attempt > 1 ? " on attempt \(claim.attempt)" : "")
            )
        } else if result.interrupted {
            attempt.error = "interrupted: geofence stopped while the hook ran"
            status = .pending
            next = now
        } else {
            let age = now.timeIntervalSince(claim.queuedAt)
            if configuration.retry.givesUp(afterAttempt: claim.attempt, age: age) {
                status = .dead
                logger.error(
                    "hooks: \(describe(claim)) failed (\(reason(result))), giving up after \(claim.attempt) attempts"
                        + " (see 'geofence events --dead', retry with 'geofence events retry \(claim.id)')"
                        + excerpt(result))
            } else {
                let delay = configuration.retry.delay(afterAttempt: claim.attempt, unit: Double.random(in: 0...1))
                status = .pending
                next = now.addingTimeInterval(delay)
                attempt.retryAt = next
                logger.warning(
                    "hooks: \(describe(claim)) failed on attempt \(claim.attempt) (\(reason(result))), retrying in "
                        + DurationParser.format((delay * 1000).rounded() / 1000) + excerpt(result))
            }
        }
        return DeliveryOutcome(
            id: claim.id, status: status, nextAttemptAt: next, attempt: attempt, stdout: result.stdout,
            stderr: result.stderr, stdoutBytes: result.stdoutBytes, stderrBytes: result.stderrBytes, finishedAt: now)
    }

    func describe(_ claim: ClaimedDelivery) -> String {
        let hook = claim.hook == "region" ? "region hook" : "hook \"\(claim.hook.dropFirst(5))\""
        let region = claim.region.map { " in \(JSONValue.string($0).serialized())" } ?? ""
        return "\(hook) for \(claim.eventType)\(region) (event \(claim.eventID), delivery \(claim.id))"
    }

    func reason(_ result: HookProcessResult) -> String {
        if let error = result.error { return error }
        if result.timedOut { return "timed out after \(DurationParser.format(configuration.timeout)), killed" }
        if let signal = result.signal { return "killed by signal \(signal)" }
        return "exit \(result.exitCode ?? -1)"
    }

    /// The first line of the hook's stderr (else stdout), for the log.
    func excerpt(_ result: HookProcessResult) -> String {
        let bytes = result.stderr.isEmpty ? result.stdout : result.stderr
        guard !bytes.isEmpty else { return "" }
        let text = String(decoding: bytes.prefix(512), as: UTF8.self)
        let line = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        return line.isEmpty ? "" : ": " + String(line.prefix(200))
    }
}
