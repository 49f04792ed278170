import Foundation
import GeofenceSystem

/// A serial executor that runs its jobs on one dedicated thread.
///
/// The monitor's actor runs here because its work blocks: SQLite commits wait for fsync, and loading a
/// million regions takes seconds. On Swift concurrency's cooperative pool (one thread per core, two here)
/// that would stall every other task; on its own thread it stalls nobody.
package final class ThreadExecutor: SerialExecutor, @unchecked Sendable {
    // @unchecked: every mutable field is only touched under `condition`'s lock.
    private let condition = NSCondition()
    private let name: String
    private var jobs: [UnownedJob] = []
    private var finished = false
    private var threadRunning = false

    package init(name: String) {
        self.name = name
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        condition.lock()
        jobs.append(unowned)
        if !threadRunning {
            // First job, or a job after `finish()`: one thread at a time runs the queue, so jobs stay serial.
            threadRunning = true
            finished = false
            let thread = Thread { self.loop() }
            thread.name = name
            thread.start()
        }
        condition.signal()
        condition.unlock()
    }

    package func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Lets the thread end once the queue is empty (a later job starts a new one).
    package func finish() {
        condition.lock()
        finished = true
        condition.signal()
        condition.unlock()
    }

    private func loop() {
        nameThisThread(name)
        while true {
            condition.lock()
            while jobs.isEmpty && !finished { condition.wait() }
            if jobs.isEmpty {
                threadRunning = false
                condition.unlock()
                return
            }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            condition.unlock()
            for job in batch { job.runSynchronously(on: asUnownedSerialExecutor()) }
        }
    }
}
