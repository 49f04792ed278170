import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceGPSD
import GeofenceSystem
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence locate`: one location within an accuracy-and-time budget (`LocationBudget`).
struct LocateCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "locate",
        abstract: "Get one location within an accuracy and time budget.",
        discussion: """
            Waits for the first fix at least as accurate as --accuracy and prints it (exit 0). If none comes \
            before --timeout, prints the best fix seen, labelled coarse (exit 2). If no usable fix came at \
            all (gpsd unreachable, no receiver, no sky view), says so (exit 3). Fixes older than --max-age \
            when received do not count.
            """,
        options: [
            CommandTree.gpsd,
            .value("--accuracy", valueName: "metres", help: "Target horizontal accuracy.", default: "50"),
            .value("--timeout", valueName: "duration", help: "How long to wait at most.", default: "30s"),
            .value("--max-age", valueName: "duration", help: "Oldest usable fix, at receipt.", default: "5s"),
        ],
        examples: [
            Example("Where am I, to 10 m, within 20 s:", "geofence locate --accuracy 10 --timeout 20s"),
            Example("For a script:", "geofence locate --json || echo \"no location: exit $?\""),
        ])

    struct Outcome: Sendable {
        var outcome: LocationBudget.Outcome
        var waited: Double
        var reason: String?
    }

    let address: GPSDAddress
    let target: Double
    let timeout: Double
    let maxAge: Double

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        address = try c.gpsdAddress()
        target = try c.positiveNumber("--accuracy", default: 50)
        timeout = try c.positiveDuration("--timeout", default: 30)
        maxAge = try c.positiveDuration("--max-age", default: 5)
    }

    func run(_ c: CommandContext) throws {
        let (address, target, timeout, maxAge) = (self.address, self.target, self.timeout, self.maxAge)
        let result = try waitFor {
            await Self.locate(address: address, target: target, timeout: timeout, maxAge: maxAge)
        }
        try Self.report(c, result, target: target, timeout: timeout)
    }

    static func locate(address: GPSDAddress, target: Double, timeout: Double, maxAge: Double) async -> Outcome {
        let start = MonotonicClock.seconds()
        let source = GPSDSource(
            configuration: .init(
                address: address, liveness: .init(firstFixDeadline: timeout, stalenessLimit: timeout),
                backoff: ReconnectBackoff(base: 0.2, cap: 1), connectTimeout: min(timeout, 5)))
        source.start()
        // The deadline ends the stream; the loop below then settles the budget.
        let deadline = Task {
            try? await Task.sleep(for: .seconds(timeout))
            await source.stop()
        }
        var filter = FixFilter()
        var assembler = EpochAssembler()
        var budget = LocationBudget(targetAccuracy: target, timeout: timeout, maxAge: maxAge, start: start)
        var reason: String?
        var sawFix = false
        /// Offers one epoch's report to the budget; true when the wait is over.
        func consider(_ fix: Fix) -> Bool {
            switch filter.evaluate(fix) {
            case .accepted(let weighted):
                return budget.offer(weighted, now: MonotonicClock.seconds()) != nil
            case .rejected(let why):
                reason = "the receiver's fixes were refused (\(why.label))"
                return false
            }
        }
        loop: for await report in source.reports {
            switch report {
            case .fix(let fix):
                sawFix = true
                let now = MonotonicClock.seconds()
                for case .ready(let ready) in assembler.offer(fix, now: now) where consider(ready) {
                    break loop
                }
                for ready in assembler.due(now: MonotonicClock.seconds()) where consider(ready) { break loop }
            case .disconnected(let d):
                reason = d.description
            case .connected:
                reason = "gpsd answered, but sent no usable fix"
            case .liveness(.silent):
                reason = sawFix ? reason : "gpsd has no fix to give: is a receiver attached, with a view of the sky?"
            default:
                break
            }
        }
        deadline.cancel()
        await source.stop()
        if budget.outcome == nil, MonotonicClock.seconds() < budget.deadline {
            for ready in assembler.flush() where consider(ready) { break }
        }
        let now = MonotonicClock.seconds()
        let outcome = budget.outcome ?? budget.expire(now: max(now, budget.deadline)) ?? .silent
        return Outcome(outcome: outcome, waited: now - start, reason: reason)
    }

    static func report(_ c: CommandContext, _ r: Outcome, target: Double, timeout: Double) throws {
        func fixJSON(_ w: WeightedFix) -> JSONObject {
            var o: JSONObject = [
                "lat": .number(w.coordinate.latitude), "lon": .number(w.coordinate.longitude),
                "accuracy": .number(w.accuracy), "mode": .number(Double(w.fix.mode.rawValue)),
                "time": .string(TimestampParser.format(w.time)), "subject": .string(w.subject),
            ]
            if w.accuracyEstimated { o["accuracyEstimated"] = .bool(true) }
            if let alt = w.fix.altitudeMSL { o["altitude"] = .number(alt) }
            if let speed = w.fix.speed { o["speed"] = .number(speed) }
            if let course = w.fix.course { o["course"] = .number(course) }
            if let received = w.fix.receivedAt { o["age"] = .number(received.timeIntervalSince(w.time)) }
            return o
        }
        func line(_ w: WeightedFix) -> String {
            String(
                format: "%.6f, %.6f ±%.1f m (%@, %@, %@)", w.coordinate.latitude, w.coordinate.longitude, w.accuracy,
                w.fix.mode == .threeD ? "3D" : "2D", w.subject, TimestampParser.format(w.time))
        }
        let waited = (r.waited * 100).rounded() / 100
        switch r.outcome {
        case .met(let w):
            if c.json {
                var o = fixJSON(w)
                o["outcome"] = "met"
                o["waited"] = .number(waited)
                c.console.print(JSONValue.object(o).serialized())
            } else {
                c.console.print(line(w))
            }
        case .coarse(let w):
            if c.json {
                var o = fixJSON(w)
                o["outcome"] = "coarse"
                o["waited"] = .number(waited)
                o["target"] = .number(target)
                c.console.print(JSONValue.object(o).serialized())
            } else {
                c.console.print(line(w) + " coarse")
                c.console.message(
                    "coarse: the target of \(RegionOutput.metres(target)) was not met within "
                        + "\(DurationParser.format(timeout)); this is the best fix seen")
            }
            throw CommandFailure.quiet(.coarse)
        case .silent:
            let why = r.reason ?? "no fix arrived"
            if c.json {
                c.console.print(
                    JSONValue.object(["outcome": "silent", "waited": .number(waited), "reason": .string(why)])
                        .serialized())
                throw CommandFailure.quiet(.silent)
            }
            throw CommandFailure(
                "no usable fix within \(DurationParser.format(timeout)): \(why)", exitCode: .silent)
        }
    }
}

extension CommandFailure {
    /// An exit status with no message (the output already said everything).
    static func quiet(_ code: ExitCode) -> CommandFailure {
        CommandFailure("", exitCode: code)
    }
}
