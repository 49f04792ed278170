import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore
import GeofenceSystem
import GeofenceTestSupport

/// Webhook throughput (issue 28): `n` events already committed, delivered to one local receiver
/// (`Scripts/webhook-receiver.py`, Python's http.server, which verifies each signature and logs each request)
/// three ways in the same run: the HTTP sink (libcurl, one keep-alive connection, one signed request an event),
/// the HTTP sink with `--batch 100`, and a global hook running Docs/hooks.md's `curl` recipe, a process per
/// event. Each is timed from the runner's start to the last acknowledgement (the sink's `delivered`, the
/// hooks' `done` deliveries), in a store of its own, with the daemon's own objects.
///
/// The receiver is the same for all three and is itself a bound: one Python thread a connection.
/// Returns false when a run did not finish or a signature failed.
func runWebhooks(events n: Int, report: Report) throws -> Bool {
    let section = "webhooks, \(sizeName(n)) events to one local receiver (Python http.server)"
    guard WebhookReceiver.isAvailable else {
        report.add(section, "skipped", "-", WebhookReceiver.unavailableReason)
        return true
    }
    let curl = "/usr/bin/curl"
    let directory = TemporaryDirectory("webhooks")
    defer { directory.remove() }
    let secret = directory.path + "/secret"
    try "whsec-bench\n".write(toFile: secret, atomically: true, encoding: .utf8)
    let receiver = try WebhookReceiver(directory: directory.path, secretFile: secret)
    defer { receiver.stop() }
    let logger = Logger(minimum: .warning)

    /// A store of its own, holding the `n` events.
    func filledStore(_ name: String) throws -> StateStore {
        let path = directory.path + "/" + name
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let store = try StateStore(directory: path)
        let kinds = StateEvent.Kind.allCases
        let now = Date()
        let events = (0..<n).map { i in
            StateEvent(id: "bench-\(name)-\(i)", type: kinds[i % kinds.count], time: now, state: "bench", subject: "b")
        }
        try store.outbox.append(events, now: now)
        return store
    }

    /// Seconds until `done()` says all were acknowledged (nil: a minute without progress).
    func timed(_ done: () throws -> Int, start: () -> Void) rethrows -> Double? {
        let begin = MonotonicClock.nanoseconds()
        start()
        var last = 0
        var lastProgress = begin
        while true {
            let now = try done()
            if now >= n { return Double(MonotonicClock.nanoseconds() - begin) / 1e9 }
            if now > last {
                last = now
                lastProgress = MonotonicClock.nanoseconds()
            }
            if MonotonicClock.nanoseconds() - lastProgress > 60_000_000_000 { return nil }
            usleep(2_000)
        }
    }

    func sinkRun(batch: Int?) throws -> Double? {
        let name = batch.map { "batch\($0)" } ?? "sink"
        progress("\(section): HTTP sink\(batch.map { ", batch \($0)" } ?? "")")
        let store = try filledStore(name)
        var params: JSONObject = ["url": .string(receiver.url), "secretFile": .string(secret), "id": .string(name)]
        if let batch { params["batch"] = .number(Double(batch)) }
        let definition = try HTTPSinkKind.definition(params)
        let sink = try HTTPSinkKind.makeSink(
            definition, context: SinkContext(stateDirectory: store.directory, environment: [:], logger: logger))
        let runner = SinkRunner(sink: sink, store: store, logger: logger)
        var task: Task<Void, Never>?
        let seconds = timed(
            { runner.statistics.delivered },
            start: { task = Task.detached { await runner.run() } })
        task?.cancel()
        return seconds
    }

    func hookRun() throws -> Double? {
        progress("\(section): a curl hook per event")
        let store = try filledStore("hook")
        let command =
            "\(curl) --fail --silent --show-error --max-time 10 --connect-timeout 5 -H 'Content-Type: application/json'"
            + " -H \"Idempotency-Key: $GEOFENCE_EVENT_ID\" --data-binary @- \(receiver.url)"
        _ = try store.deliveries.addHook(GlobalHook(id: "curl", events: [], command: command, createdAt: Date()))
        let runner = HookRunner(store: store, logger: logger)
        let finished = DispatchSemaphore(value: 0)
        let seconds = try timed(
            { (try store.deliveries.countsByStatus()[.done]) ?? 0 },
            start: {
                Task.detached {
                    await runner.run()
                    finished.signal()
                }
                runner.wake()
            })
        runner.finish()
        finished.wait()
        return seconds
    }

    let sinkSeconds = try sinkRun(batch: nil)
    let batchSeconds = try sinkRun(batch: 100)
    // The sink's requests are signed; the curl hook's are not (its recipe has no signature).
    let signed = receiver.requests()
    let unverified = signed.filter { $0.verified == false }.count
    let hookSeconds: Double?
    if FileManager.default.isExecutableFile(atPath: curl) {
        hookSeconds = try hookRun()
    } else {
        hookSeconds = nil
        report.add(section, "curl hook, a process an event", "skipped", "\(curl) is not installed")
    }
    func rate(_ seconds: Double?) -> String {
        seconds.map { "\(grouped(Double(n) / $0)) events/s" } ?? "FAILED"
    }
    report.add(
        section, "HTTP sink, keep-alive, a request an event", rate(sinkSeconds),
        "\(signed.count) requests by the sink in all, \(unverified) of them failed their signature")
    report.add(section, "HTTP sink, --batch 100", rate(batchSeconds), "")
    if FileManager.default.isExecutableFile(atPath: curl) {
        let ratio = zip(sinkSeconds, hookSeconds).map { "\(grouped($1 / $0, decimals: 1))x the curl hook" } ?? ""
        report.add(section, "curl hook, a process an event", rate(hookSeconds), "HTTP sink: \(ratio)")
    }
    return sinkSeconds != nil && batchSeconds != nil && unverified == 0
}

private func zip(_ a: Double?, _ b: Double?) -> (Double, Double)? {
    guard let a, let b else { return nil }
    return (a, b)
}
