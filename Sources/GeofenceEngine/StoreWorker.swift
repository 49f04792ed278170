import Foundation

/// An actor on a thread of its own (`ThreadExecutor`) where async code does its blocking SQLite: a read or a
/// commit waits there, never on Swift concurrency's cooperative pool (one thread per core), which it would
/// stall for every other task.
///
/// The sink runners (each its own), the sink supervisor and the hooks' dispatch use one each. Its thread
/// starts with the first job and ends at `finish()` once the queue is empty (a later job starts another).
package actor StoreWorker {
    private let executor: ThreadExecutor
    package nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// `name` names the thread (`ps -L`, a debugger).
    package init(name: String) {
        executor = ThreadExecutor(name: name)
    }

    /// Runs `work` on the worker's thread and returns what it returned.
    package func run<T: Sendable>(_ work: @Sendable () throws -> T) throws -> T {
        try work()
    }

    /// Runs `work`, which cannot fail, on the worker's thread.
    package func run<T: Sendable>(_ work: @Sendable () -> T) -> T {
        work()
    }

    /// Lets the thread end once its queue is empty.
    package nonisolated func finish() { executor.finish() }
}
