import Foundation
import GeofenceCore
import GeofenceGPSD
import GeofenceTestSupport
import Synchronization
import Testing

/// Collects a source's reports in the background so a test can wait for conditions on them.
final class ReportRecorder: Sendable {
    struct TimedOut: Error, CustomStringConvertible {
        var description: String
    }

    private let storage: Storage
    private let task: Task<Void, Never>

    private final class Storage: Sendable {
        let reports = Mutex<[GPSDReport]>([])
    }

    init(_ source: GPSDSource) {
        let storage = Storage()
        self.storage = storage
        task = Task {
            for await report in source.reports {
                storage.reports.withLock { $0.append(report) }
            }
        }
    }

    deinit { task.cancel() }

    var reports: [GPSDReport] { storage.reports.withLock { $0 } }

    var fixes: [Fix] {
        reports.compactMap { report in
            if case .fix(let fix) = report { return fix }
            return nil
        }
    }

    var disconnections: [GPSDDisconnection] {
        reports.compactMap { report in
            if case .disconnected(let disconnection) = report { return disconnection }
            return nil
        }
    }

    var transitions: [SourceLiveness.Transition] {
        reports.compactMap { report in
            if case .liveness(let transition) = report { return transition }
            return nil
        }
    }

    var snapshots: [CapabilitySnapshot] {
        reports.compactMap { report in
            if case .capabilities(let snapshot) = report { return snapshot }
            return nil
        }
    }

    var connectionCount: Int { reports.filter { $0 == .connected }.count }

    /// Waits until `condition` holds for the reports so far; throws after `timeout`.
    func wait(
        for what: String,
        timeout: Duration = .seconds(10),
        until condition: ([GPSDReport]) -> Bool
    ) async throws {
        let (seconds, attoseconds) = timeout.components
        let timeoutSeconds = Double(seconds) + Double(attoseconds) / 1e18
        if await Wait.until(timeout: timeoutSeconds, every: .milliseconds(5), { condition(self.reports) }) { return }
        let tail = reports.suffix(8).map { "\($0)".prefix(160) }.joined(separator: "\n  ")
        throw TimedOut(description: "timed out after \(timeout) waiting for \(what); last reports:\n  \(tail)")
    }
}

/// Runs `body` with a started source and its recorder, and always stops the source
/// (checking that stopping takes under a second, whatever state the source is in).
func withSource<Result>(
    _ configuration: GPSDSource.Configuration,
    random: @escaping @Sendable () -> Double = { Double.random(in: 0...1) },
    _ body: (GPSDSource, ReportRecorder) async throws -> Result
) async throws -> Result {
    let source = GPSDSource(configuration: configuration, random: random)
    let recorder = ReportRecorder(source)
    source.start()
    func stop() async {
        let elapsed = await ContinuousClock().measure { await source.stop() }
        #expect(elapsed < .seconds(1), "stop() took \(elapsed)")
    }
    do {
        let result = try await body(source, recorder)
        await stop()
        return result
    } catch {
        await stop()
        throw error
    }
}
