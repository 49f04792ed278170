import Foundation

/// One part of the engine that runs until it is done or stopped: the source's consumer, the monitor's ticks,
/// the hook runner, the signal handler (swift-service-lifecycle's shape, in a few lines).
package protocol Service: Sendable {
    /// For the log: "source", "hooks".
    var name: String { get }
    /// Runs until the part is done, or returns soon after `stop()`; cancellation stops it at once.
    func run() async throws
    /// Whether the part stops gracefully when asked (`stop()`); a part that does not is cancelled at once when
    /// the group stops.
    var isGraceful: Bool { get }
    /// Asks the part to stop gracefully: finish what is under way (within its own grace), then return from
    /// `run()`.
    func stop() async
}

extension Service {
    package var isGraceful: Bool { false }
    package func stop() async {}
}

/// A service made of closures, for the parts that are a loop and a flag.
package struct ClosureService: Service {
    package let name: String
    private let body: @Sendable () async throws -> Void
    private let stopping: (@Sendable () async -> Void)?

    /// - Parameter stop: how to stop gracefully; nil: by cancellation.
    package init(
        _ name: String, run: @escaping @Sendable () async throws -> Void,
        stop: (@Sendable () async -> Void)? = nil
    ) {
        self.name = name
        body = run
        stopping = stop
    }

    package var isGraceful: Bool { stopping != nil }
    package func run() async throws { try await body() }
    package func stop() async { await stopping?() }
}

/// Runs services together: starts them in order; when one of them returns (or throws), stops the others
/// gracefully in reverse order, under one deadline for all, and cancels those still running at the deadline.
/// A graceful stop is distinct from cancellation: a part asked to stop finishes what it does (the hook runner
/// lets running hooks end within their grace); a cancelled one stops at once.
package final class ServiceGroup: Sendable {
    package let services: [any Service]
    /// How long the graceful stop of all of them may take before what remains is cancelled.
    package let deadline: Duration

    package init(_ services: [any Service], deadline: Duration) {
        self.services = services
        self.deadline = deadline
    }

    /// Why the group stopped: which service returned first (or threw, and what).
    package struct Ending: Sendable {
        package var service: String
        /// What it threw, if it threw.
        package var error: String?
        /// Services that did not stop gracefully within the deadline and were cancelled.
        package var cancelled: [String]
    }

    /// Runs every service until one ends, then stops the rest. `stopping` is called with the first ending
    /// before the others are stopped (to log why). Cancelling the calling task cancels every service.
    package func run(stopping: @Sendable (Ending) async -> Void = { _ in }) async -> Ending {
        let (ends, endsContinuation) = AsyncStream.makeStream(of: (Int, String?).self)
        var tasks: [Task<Void, Never>] = []
        for (index, service) in services.enumerated() {
            tasks.append(
                Task {
                    do {
                        try await service.run()
                        endsContinuation.yield((index, nil))
                    } catch {
                        endsContinuation.yield((index, "\(error)"))
                    }
                })
        }
        let all = tasks
        return await withTaskCancellationHandler {
            var first: (Int, String?)?
            for await end in ends {
                first = end
                break
            }
            guard let first else {
                // The caller was cancelled: so is every service, and the group ends when they have.
                for task in all { await task.value }
                return Ending(service: "cancelled", error: nil, cancelled: services.map(\.name))
            }
            var ending = Ending(service: services[first.0].name, error: first.1, cancelled: [])
            await stopping(ending)
            // Every step below, a service's `stop()` included, counts against the one deadline.
            let end = ContinuousClock.now.advanced(by: deadline)
            for index in services.indices.reversed() {
                let service = services[index]
                if index == first.0 {
                    // Ended by itself; a graceful one is still told, to let go of what it holds (a file
                    // source's watchdog), within the deadline.
                    if service.isGraceful { _ = await Self.wait(for: Task { await service.stop() }, until: end) }
                    continue
                }
                guard service.isGraceful else {
                    all[index].cancel()
                    if await !Self.wait(for: all[index], until: end) { ending.cancelled.append(service.name) }
                    continue
                }
                _ = await Self.wait(for: Task { await service.stop() }, until: end)
                if await !Self.wait(for: all[index], until: end) { ending.cancelled.append(service.name) }
            }
            endsContinuation.finish()
            return ending
        } onCancel: {
            for task in all { task.cancel() }
        }
    }

    /// Waits for `task` to end; at `end`, cancels it and waits for that (every part stops on cancellation).
    /// Returns whether it ended by itself.
    private static func wait(for task: Task<Void, Never>, until end: ContinuousClock.Instant) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await task.value
                return true
            }
            group.addTask {
                guard (try? await Task.sleep(until: end, clock: .continuous)) != nil else { return true }
                task.cancel()
                return false
            }
            let byItself = await group.next() ?? true
            group.cancelAll()
            await group.waitForAll()
            return byItself
        }
    }
}
