import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A program that embeds `GeofenceMonitor` with the SQLite store (`geofence-embed-probe`), killed with SIGKILL
/// mid-drive and started again from the last event id it printed: every committed event reaches it, none
/// skipped.
@Suite(.serialized) struct EmbeddedCrashTests {
    static var probePath: String {
        URL(fileURLWithPath: GeofenceBinary.path).deletingLastPathComponent().appendingPathComponent(
            "GeofenceEmbedProbe"
        ).path
    }

    /// The probe's standard output, line by line as it comes.
    final class Probe: @unchecked Sendable {
        let process = Process()
        private let lines = Mutex<[String]>([])
        private let partial = Mutex("")

        init(arguments: [String]) throws {
            process.executableURL = URL(fileURLWithPath: EmbeddedCrashTests.probePath)
            process.arguments = arguments
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = FileHandle.nullDevice
            pipe.fileHandleForReading.readabilityHandler = { [self] handle in
                let data = handle.availableData
                guard !data.isEmpty else {
                    handle.readabilityHandler = nil
                    return
                }
                let text = self.partial.withLock { p -> String in
                    p += String(decoding: data, as: UTF8.self)
                    guard let cut = p.lastIndex(of: "\n") else { return "" }
                    defer { p = String(p[p.index(after: cut)...]) }
                    return String(p[...cut])
                }
                let complete = text.split(separator: "\n").map(String.init)
                self.lines.withLock { $0 += complete }
            }
            try process.run()
        }

        var output: [String] { lines.withLock { $0 } }
        /// The ids of the events printed so far.
        var ids: [String] { output.filter { $0.contains(" ") }.map { String($0.split(separator: " ")[0]) } }

        func waitFor(timeout: Double, _ condition: ([String]) -> Bool) async -> Bool {
            await Wait.until(timeout: timeout) { condition(output) }
        }
    }

    @Test func resumesAfterKill9WithEveryCommittedEvent() async throws {
        signal(SIGPIPE, SIG_IGN)
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let state = dir.file("state")
        let drive = DecisionScenarios.motorway(passes: 24)
        do {
            let store = try StateStore(directory: state)
            try store.regions.addAll(drive.regions)
        }
        let lines = drive.tpvLines.split(separator: "\n").map { $0 + "\n" }
        let fifo = dir.file("fixes")
        #expect(mkfifo(fifo, 0o600) == 0)

        var printed: [String] = []
        /// Each run's `--after` id and what it printed.
        var runs: [(after: String?, ids: [String])] = []
        var after: String?
        var written = 0
        var kills = 0
        // Three runs killed mid-drive, each resumed from the last id the one before printed.
        for round in 0..<3 {
            let probe = try Probe(
                arguments: ["--state-dir", state, "--source", fifo] + (after.map { ["--after", $0] } ?? []))
            #expect(await probe.waitFor(timeout: 20) { $0.contains("ready") }, "round \(round): \(probe.output)")
            // Non-blocking until the probe has opened its end: a probe that died must fail the test, not hang it.
            var writer: Int32 = -1
            let deadline = Date().addingTimeInterval(20)
            _ = await Wait.until(timeout: deadline.timeIntervalSinceNow) {
                writer = open(fifo, O_WRONLY | O_NONBLOCK)
                return writer >= 0 || !probe.process.isRunning
            }
            try #require(writer >= 0, "round \(round): the probe never opened the FIFO: \(probe.output)")
            _ = fcntl(writer, F_SETFL, fcntl(writer, F_GETFL) & ~O_NONBLOCK)
            let before = probe.ids.count
            // Fixes a slice at a time until the run has printed a few new events, then SIGKILL.
            while written < lines.count {
                let slice = lines[written..<min(lines.count, written + 20)].joined()
                _ = slice.withCString { write(writer, $0, strlen($0)) }
                written = min(lines.count, written + 20)
                // The feed's pace, so that the kill lands mid-run: the events printed are checked just after.
                try await Task.sleep(for: .milliseconds(15))
                if probe.ids.count >= before + 4 { break }
            }
            kill(probe.process.processIdentifier, SIGKILL)
            probe.process.waitUntilExit()
            close(writer)
            kills += 1
            let ids = probe.ids
            printed += ids
            runs.append((after, ids))
            // The next run resumes from an event in the middle of this one's: what came after it is yielded
            // again (at least once), and must come complete and in order.
            if !ids.isEmpty { after = ids[ids.count / 2] }
        }
        #expect(kills == 3 && written < lines.count, "each run was killed before the drive's end")

        // A last run on an empty source: what was committed after the last printed id, then the end.
        let empty = dir.file("empty.jsonl")
        #expect(FileManager.default.createFile(atPath: empty, contents: Data()))
        let last = try Probe(
            arguments: ["--state-dir", state, "--source", empty] + (after.map { ["--after", $0] } ?? []))
        #expect(await last.waitFor(timeout: 20) { $0.contains("end") }, "\(last.output)")
        last.process.waitUntilExit()
        printed += last.ids
        runs.append((after, last.ids))

        let store = try StateStore(directory: state)
        let stored = try store.outbox.events(after: 0, limit: 100_000).map(\.id)
        #expect(stored.count >= 9, "the runs made events (at least three new ones each)")
        #expect(Set(printed).isSubset(of: Set(stored)), "nothing printed that was not committed")
        // Each run started after the last id printed before it: nothing committed is missing from the union.
        // (The first run started from `nil`, only new events: the outbox held none.)
        let missing = stored.filter { !Set(printed).contains($0) }
        #expect(missing.isEmpty, "\(missing.count) committed events never reached the embedder")
        // Each run yielded exactly the outbox from just after its `--after` id, with nothing skipped or reordered.
        for (k, run) in runs.enumerated() {
            let start = run.after.flatMap { stored.firstIndex(of: $0) }.map { $0 + 1 } ?? 0
            let expected = Array(stored[start..<min(stored.count, start + run.ids.count)])
            #expect(run.ids == expected, "run \(k) after \(run.after ?? "nothing")")
            if k > 0 { #expect(!run.ids.isEmpty, "run \(k) resumed with the events after its id") }
        }
    }
}
