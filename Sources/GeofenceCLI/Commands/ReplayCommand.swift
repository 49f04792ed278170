import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence replay`: recorded gpsd JSON through the same pipeline as the daemon.
struct ReplayCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "replay",
        abstract: "Run recorded gpsd JSON reports through the filter and the monitor.",
        discussion: """
            Reads the lines `gpspipe -w` prints (one JSON report per line; non-TPV reports are skipped), \
            runs every TPV through the fix filter and the region monitor against the stored regions, and \
            stores state and events exactly as `geofence run` does. Each event is printed as one JSON \
            line on stdout once it is stored. Decisions use the fixes' own time, so a recording behaves \
            as it did live.
            """,
        options: [
            .flag(
                "--stats", help: "Print the filter's counts (accepted, duplicate, no fix, ...) on stderr at the end."),
            .flag("--trace", help: "Print the filter's verdict on every TPV as a JSON line on stderr."),
            .value(
                "--subject", valueName: "name",
                help: "Subject for reports that name no device.", default: "gpsd"),
            .flag(
                "--hooks",
                help: """
                    Run the hooks of the events in the outbox (these, as they are stored, and any earlier ones \
                    waiting); at the end, wait for them, retrying failures for up to a minute, and report on \
                    stderr (see Docs/hooks.md).
                    """),
        ] + CommandTree.hookOptions,
        arguments: [.required("file", help: "The recording, or - for standard input.")],
        examples: [
            Example("A recording:", "geofence replay --stats drive.json"),
            Example("Live from gpsd:", "gpspipe -w | geofence replay -"),
        ])

    let file: String
    let subject: String
    /// How hooks run, with `--hooks`; nil without.
    let hooks: HookConfiguration?
    let trace: Bool
    let stats: Bool

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        file = try a.required("file")
        subject = a.value("--subject") ?? "gpsd"
        // Read before anything is stored, so a bad option changes nothing.
        hooks = a.flag("--hooks") ? try HookOptions.configuration(a, c) : nil
        trace = a.flag("--trace")
        stats = a.flag("--stats")
    }

    func run(_ c: CommandContext) throws {
        let fd: Int32
        switch JSONLines.open(file) {
        case .success(let opened): fd = opened
        case .failure(let failure): throw CommandFailure("cannot read \(file): \(failure.reason)", exitCode: .noInput)
        }
        defer { if fd != 0 { close(fd) } }

        let store = try c.openStore()
        let pipeline = FixPipeline(store: store)
        try pipeline.load()
        // Hooks run while the input is read (so `gpspipe -w | geofence replay --hooks -` fires them live), and
        // what is left is drained at the end.
        let replayHooks = hooks.map { ReplayHooks(c, store: store, configuration: $0) }
        var hooksFinished = false
        // A failed replay still lets its hooks finish (and says how they did) before the error is reported.
        defer { if !hooksFinished { replayHooks?.finish() } }
        var lines = JSONLines(fd: fd, defaultSubject: subject, skipsBlankLines: true)
        var tpv = 0
        var other = 0
        var malformed = 0
        var events = 0
        let name = file == "-" ? "stdin" : file

        func emit(_ committed: [RegionEvent]) {
            for event in committed {
                c.console.print(JSONValue.object(event.json).serialized())
            }
            events += committed.count
            if !committed.isEmpty { replayHooks?.runner.wake() }
        }

        // Without `--trace`, the fixes of the lines already read go in one batch (as `geofence run` takes a
        // source's): one commit a batch, not one an event; a live pipe's line is a batch of its own.
        var batch: [Fix] = []
        while let report = try lines.next() {
            switch report {
            case .tpv(let fix):
                tpv += 1
                if trace {
                    let step = try pipeline.process(fix)
                    for d in step.decisions { c.console.message(Self.traceLine(d.fix, d.verdict)) }
                    emit(step.events)
                } else {
                    batch.append(fix)
                }
            case .other:
                other += 1
            case .malformed(let reason):
                malformed += 1
                if malformed <= 10 {
                    c.console.message("warning: \(name):\(lines.lineNumber): skipped: \(reason)")
                } else if malformed == 11 {
                    c.console.message("warning: further malformed lines are counted, not shown")
                }
            }
            if !batch.isEmpty && (batch.count >= Self.batchSize || !lines.hasBufferedLine) {
                emit(try pipeline.processForEvents(batch: batch))
                batch.removeAll(keepingCapacity: true)
            }
        }
        if !batch.isEmpty { emit(try pipeline.processForEvents(batch: batch)) }
        let last = try pipeline.finish()
        if trace { for d in last.decisions { c.console.message(Self.traceLine(d.fix, d.verdict)) } }
        emit(last.events)
        replayHooks?.finish()
        hooksFinished = true

        guard stats else { return }
        Self.printStats(
            c, pipeline: pipeline, lines: lines.lineNumber, tpv: tpv, other: other,
            malformed: malformed, events: events)
    }

    /// Fixes a commit at most, as the daemon's JSON lines source hands them over (`JSONLineSource.maximumBatch`).
    static let batchSize = 512

    /// One JSON line per TPV on stderr: what the filter made of it.
    static func traceLine(_ fix: Fix, _ verdict: FixVerdict) -> String {
        var o: JSONObject = ["subject": .string(fix.subject)]
        if let time = fix.time { o["time"] = .string(TimestampParser.format(time)) }
        o["mode"] = .number(Double(fix.mode.rawValue))
        if let lat = fix.latitude { o["lat"] = .number(lat) }
        if let lon = fix.longitude { o["lon"] = .number(lon) }
        if let accuracy = fix.horizontalAccuracy { o["accuracy"] = .number(accuracy) }
        switch verdict {
        case .accepted: o["verdict"] = "accepted"
        case .rejected(let reason): o["verdict"] = .string(reason.rawValue)
        }
        return JSONValue.object(o).serialized()
    }

    static func printStats(
        _ c: CommandContext, pipeline: FixPipeline, lines lineNumber: Int, tpv: Int, other: Int, malformed: Int,
        events: Int
    ) {
        let stats = pipeline.filter.statistics
        if c.json {
            var rejected = JSONObject()
            for reason in FixRejection.allCases { rejected[reason.rawValue] = .number(Double(stats[reason])) }
            let o: JSONObject = [
                "lines": .number(Double(lineNumber)), "tpv": .number(Double(tpv)), "other": .number(Double(other)),
                "malformed": .number(Double(malformed)),
                "accepted": .number(Double(stats.accepted)), "resynchronized": .number(Double(stats.resynchronized)),
                "rejected": .object(rejected), "events": .number(Double(events)),
                "outliers": .number(Double(pipeline.monitor.outliers)),
                "motionResynchronized": .number(Double(pipeline.monitor.resynchronized)),
            ]
            c.console.message(JSONValue.object(o).serialized())
            return
        }
        var rows: [(String, Int)] = [
            ("reports", lineNumber), ("  TPV", tpv), ("  other classes", other),
            ("  malformed", malformed), ("accepted", stats.accepted),
            ("  after resynchronizing", stats.resynchronized),
        ]
        for reason in FixRejection.allCases { rows.append(("rejected: \(reason.label)", stats[reason])) }
        rows.append(("outliers (against the motion)", pipeline.monitor.outliers))
        rows.append(("  motion started over", pipeline.monitor.resynchronized))
        rows.append(("events", events))
        let width = rows.map(\.0.count).max() ?? 0
        for (label, count) in rows {
            c.console.message(label.padding(toLength: width + 2, withPad: " ", startingAt: 0) + String(count))
        }
    }
}

/// `replay --hooks`: a hook runner delivering while the input is read, drained at its end, with a report on
/// stderr. SIGINT and SIGTERM stop the running hooks (whose process groups a terminal's Ctrl-C does not reach)
/// and leave their deliveries for the next run.
private final class ReplayHooks: @unchecked Sendable {
    // @unchecked: `summary` is written by the drain task before it signals `done`, and read only after a wait
    // on `done`; everything else is immutable.
    let runner: HookRunner
    private let console: Console
    private let json: Bool
    private let done = DispatchSemaphore(value: 0)
    private var summary: HookDrainSummary?
    private var sources: [any DispatchSourceSignal] = []

    init(_ c: CommandContext, store: StateStore, configuration: HookConfiguration) {
        runner = HookRunner(
            store: store, configuration: configuration, logger: Logger(minimum: .info, environment: c.environment))
        console = c.console
        json = c.json
        let task = Task { [runner, done] in
            let result = await runner.drainAfterInput()
            self.summary = result
            done.signal()
        }
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [self] in
                task.cancel()
                waitForDrain()
                report()
                exit(128 + number)
            }
            source.resume()
            sources.append(source)
        }
    }

    /// The input is over: drains, then reports.
    func finish() {
        runner.inputEnded()
        waitForDrain()
        for source in sources { source.cancel() }
        report()
    }

    private func waitForDrain() {
        // Passed on, so that a signal arriving while `finish` waits does not wait forever.
        done.wait()
        done.signal()
    }

    private func report() {
        let summary = summary ?? HookDrainSummary()
        if summary.busy {
            console.message(
                "hooks: another geofence (the engine) runs this state directory's hooks; it delivers these events")
        } else if json {
            console.message(
                JSONValue.object([
                    "hooks": [
                        "delivered": .number(Double(summary.delivered)),
                        "failedAttempts": .number(Double(summary.failedAttempts)),
                        "dead": .number(Double(summary.dead)), "pending": .number(Double(summary.pending)),
                    ]
                ]).serialized())
        } else {
            var text =
                "hooks: \(summary.delivered) delivered, \(summary.failedAttempts) failed attempts, "
                + "\(summary.dead) dead, \(summary.pending) pending"
            if summary.pending > 0 { text += " (they run at the next geofence run or replay --hooks)" }
            if summary.dead > 0 { text += "; see geofence events --dead" }
            console.message(text)
        }
    }
}
