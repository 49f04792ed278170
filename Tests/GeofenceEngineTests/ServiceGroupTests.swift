import Foundation
import GeofenceEngine
import GeofenceTestSupport
import Synchronization
import Testing

@Suite("service group") struct ServiceGroupTests {
    final class Journal: Sendable {
        private let lines = Mutex<[String]>([])
        func note(_ line: String) { lines.withLock { $0.append(line) } }
        var all: [String] { lines.withLock { $0 } }
    }

    /// A service that runs until stopped (gracefully, after `lingering` seconds) or cancelled.
    static func worker(_ name: String, _ journal: Journal, lingering: Double = 0) -> ClosureService {
        let stopped = Mutex(false)
        let flag = StopFlag()
        return ClosureService(
            name,
            run: {
                journal.note("start \(name)")
                while !flag.isSet && !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
                if Task.isCancelled {
                    journal.note("cancelled \(name)")
                    return
                }
                // A service that takes this long to stop is the scenario, not a wait.
                try? await Task.sleep(for: .seconds(lingering))
                journal.note(Task.isCancelled ? "cancelled \(name)" : "stopped \(name)")
                _ = stopped
            },
            stop: {
                journal.note("stop \(name)")
                flag.set()
            })
    }

    final class StopFlag: Sendable {
        private let value = Mutex(false)
        func set() { value.withLock { $0 = true } }
        var isSet: Bool { value.withLock { $0 } }
    }

    @Test func oneEndingStopsTheOthersGracefullyInReverseOrder() async throws {
        let journal = Journal()
        let ends = StopFlag()
        let group = ServiceGroup(
            [
                Self.worker("hooks", journal), Self.worker("monitor", journal),
                ClosureService("source") {
                    journal.note("start source")
                    while !ends.isSet { try? await Task.sleep(for: .milliseconds(5)) }
                    journal.note("source ended")
                },
                ClosureService("signals") {
                    journal.note("start signals")
                    while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
                    journal.note("cancelled signals")
                },
            ], deadline: .seconds(5))
        let run = Task { await group.run { journal.note("ending: \($0.service)") } }
        _ = await Wait.until(timeout: 10, every: .milliseconds(5)) {
            journal.all.filter { $0.hasPrefix("start") }.count >= 4
        }
        ends.set()
        let ending = await run.value
        #expect(ending.service == "source" && ending.cancelled.isEmpty)
        let after = journal.all.drop { !$0.hasPrefix("source ended") }
        #expect(
            Array(after) == [
                "source ended", "ending: source", "cancelled signals", "stop monitor", "stopped monitor", "stop hooks",
                "stopped hooks",
            ], "\(journal.all)")
    }

    @Test func whatDoesNotStopByTheDeadlineIsCancelled() async throws {
        let journal = Journal()
        let group = ServiceGroup(
            [Self.worker("slow", journal, lingering: 30), ClosureService("first") {}], deadline: .milliseconds(200))
        let started = ContinuousClock.now
        let ending = await group.run()
        #expect(ending.service == "first")
        #expect(ending.cancelled == ["slow"])
        #expect(journal.all.last == "cancelled slow", "\(journal.all)")
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    @Test func anErrorEndsTheGroupAndIsReported() async throws {
        struct Broken: Error {}
        let journal = Journal()
        let group = ServiceGroup(
            [Self.worker("hooks", journal), ClosureService("store") { throw Broken() }], deadline: .seconds(5))
        let ending = await group.run()
        #expect(ending.service == "store" && ending.error != nil)
        #expect(journal.all.suffix(2) == ["stop hooks", "stopped hooks"])
    }
}
