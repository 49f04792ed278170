import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A group of long-running processes (the cluster's engines) that a test starts, SIGKILLs and restarts on
/// demand or on a schedule (`startKilling`), with each member's standard output and error appended to one
/// log of its own across every start (a marker line before each), and a record of what happened when.
///
/// Members are numbered from 0 in the order `add` made them. Every method may be called from any thread.
package final class ProcessSupervisor: @unchecked Sendable {
    // @unchecked: everything mutable is under `lock`.

    /// What happened to a member.
    package enum Happening: Equatable, Sendable {
        case started(pid: Int32)
        /// The supervisor sent this signal.
        case signalled(Int32)
        /// The process ended: `status` as `Process` gives it (an exit status, or the signal's number when
        /// `bySignal`); `expected` when the supervisor had signalled it, false when it ended on its own.
        case exited(status: Int32, bySignal: Bool, expected: Bool)
    }

    package struct Record: Sendable {
        package let time: Date
        package let member: Int
        package let happening: Happening

        package var isExit: Bool {
            if case .exited = happening { return true }
            return false
        }
    }

    private struct Member {
        let name: String
        let executable: String
        let arguments: [String]
        let environment: [String: String]
        let logPath: String
        var process: Process?
        var starts = 0
        var signalled = false
    }

    package let logDirectory: String
    private let lock = NSCondition()
    private var members: [Member] = []
    private var history: [Record] = []

    /// Logs go to `logDirectory/NAME.log` (the directory must exist).
    package init(logDirectory: String) {
        self.logDirectory = logDirectory
    }

    deinit {
        for member in members {
            if let process = member.process, process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        }
    }

    /// A member that runs `executable` (the built `geofence` unless given) with `arguments`, the test's
    /// environment plus `environment`; its number. Not started yet.
    @discardableResult
    package func add(
        name: String, executable: String = GeofenceBinary.path, arguments: [String], environment: [String: String] = [:]
    ) -> Int {
        lock.withLock {
            members.append(
                Member(
                    name: name, executable: executable, arguments: arguments, environment: environment,
                    logPath: logDirectory + "/" + name + ".log"))
            return members.count - 1
        }
    }

    package var count: Int { lock.withLock { members.count } }

    /// Starts member `index` (which must not be running); its pid.
    @discardableResult
    package func start(_ index: Int) throws -> Int32 {
        lock.lock()
        defer { lock.unlock() }
        precondition(members.indices.contains(index), "no member \(index)")
        if let running = members[index].process, running.isRunning {
            throw GPSDHarness.Failure.startFailed(
                "\(members[index].name) is already running (pid \(running.processIdentifier))")
        }
        let member = members[index]
        let fd = open(member.logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw GPSDHarness.Failure.system("open \(member.logPath)", errno) }
        let log = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        defer { try? log.close() }
        let marker =
            "--- supervisor: start \(member.starts + 1) of \(member.name) at "
            + "\(ISO8601DateFormatter().string(from: Date())) ---\n"
        try log.write(contentsOf: Data(marker.utf8))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: member.executable)
        process.arguments = member.arguments
        var env = ProcessInfo.processInfo.environment
        env["NOTIFY_SOCKET"] = nil
        env["WATCHDOG_USEC"] = nil
        env["WATCHDOG_PID"] = nil
        env["JOURNAL_STREAM"] = nil
        for (k, v) in member.environment { env[k] = v }
        process.environment = env
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = log
        process.standardError = log
        process.terminationHandler = { [weak self] ended in self?.ended(index, ended) }
        try GPSDHarness.withUnblockedSignals { try process.run() }
        members[index].process = process
        members[index].starts += 1
        members[index].signalled = false
        history.append(Record(time: Date(), member: index, happening: .started(pid: process.processIdentifier)))
        return process.processIdentifier
    }

    /// Starts every member that is not running.
    package func startAll() throws {
        for index in 0..<count where !isRunning(index) { try start(index) }
    }

    private func ended(_ index: Int, _ process: Process) {
        lock.withLock {
            // A process of an earlier start (its handler can run after the next start).
            let current = members[index].process === process
            let bySignal = process.terminationReason == .uncaughtSignal
            history.append(
                Record(
                    time: Date(), member: index,
                    happening: .exited(
                        status: process.terminationStatus, bySignal: bySignal,
                        expected: !current || members[index].signalled)))
            lock.broadcast()
        }
    }

    package func isRunning(_ index: Int) -> Bool { lock.withLock { members[index].process?.isRunning ?? false } }

    /// The pid of member `index`'s current start (nil: never started).
    package func pid(_ index: Int) -> Int32? { lock.withLock { members[index].process?.processIdentifier } }

    /// How often member `index` was started.
    package func starts(_ index: Int) -> Int { lock.withLock { members[index].starts } }

    /// Sends `signal` to member `index` (if it runs) and waits up to `timeout` seconds for its exit, then
    /// SIGKILLs it and waits; whether it ended within the timeout.
    @discardableResult
    package func stop(_ index: Int, signal: Int32 = SIGTERM, timeout: Double = 10) -> Bool {
        guard
            let process = lock.withLock({ () -> Process? in
                guard let process = members[index].process, process.isRunning else { return nil }
                members[index].signalled = true
                history.append(Record(time: Date(), member: index, happening: .signalled(signal)))
                return process
            })
        else { return true }
        Glibc.kill(process.processIdentifier, signal)
        if Wait.blocking(timeout: timeout, every: .milliseconds(5), { !process.isRunning }) {
            process.waitUntilExit()
            return true
        }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        return false
    }

    /// SIGKILLs member `index`, as a crash is, and waits for its exit.
    package func kill(_ index: Int) { stop(index, signal: SIGKILL) }

    /// SIGKILLs member `index` if it runs, then starts it again; the new pid.
    @discardableResult
    package func restart(_ index: Int) throws -> Int32 {
        kill(index)
        return try start(index)
    }

    /// Stops every member (`signal`, then SIGKILL after `timeout`).
    package func stopAll(signal: Int32 = SIGTERM, timeout: Double = 10) {
        for index in 0..<count { stop(index, signal: signal, timeout: timeout) }
    }

    /// Member `index`'s log: every start's output, each after its marker line.
    package func log(_ index: Int) -> String {
        let path = lock.withLock { members[index].logPath }
        return (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }

    package func logPath(_ index: Int) -> String { lock.withLock { members[index].logPath } }

    package func name(_ index: Int) -> String { lock.withLock { members[index].name } }

    /// Everything that happened, in order.
    package var records: [Record] { lock.withLock { history } }

    /// Exits the supervisor did not cause (a member that crashed or gave up by itself).
    package var unexpectedExits: [Record] {
        records.filter {
            if case .exited(_, _, let expected) = $0.happening { return !expected }
            return false
        }
    }

    /// Waits until member `index`'s log holds `text` at least `occurrences` times (counting every start), or
    /// the member is no longer running; whether it does.
    package func waitForLog(_ index: Int, _ text: String, occurrences: Int = 1, timeout: Double) async -> Bool {
        func found() -> Bool { log(index).components(separatedBy: text).count - 1 >= occurrences }
        _ = await Wait.until(timeout: timeout, every: .milliseconds(50)) { found() || !isRunning(index) }
        return found()
    }

    /// One SIGKILL and restart of a schedule.
    package struct Round: Sendable {
        package let member: Int
        package let killedAt: Date
        package let restartedAt: Date
        package let oldPID: Int32
        package let newPID: Int32
    }

    /// Kills the members in turn (`members`, all when nil), one every `interval`, on a thread of its own
    /// until `Killing.stop()`: SIGKILL, `downtime` later a start (a member found not running is just started).
    /// The first kill is `interval` after this call.
    package func startKilling(every interval: Duration, downtime: Duration = .zero, members chosen: [Int]? = nil)
        -> Killing
    {
        let killing = Killing()
        let order = chosen ?? Array(0..<count)
        let thread = Thread { [self] in
            var turn = 0
            while !order.isEmpty, killing.sleep(interval) {
                let index = order[turn % order.count]
                turn += 1
                let old = pid(index) ?? 0
                let killedAt = Date()
                kill(index)
                if downtime > .zero, !killing.sleep(downtime) {
                    _ = try? start(index)
                    break
                }
                do {
                    let new = try start(index)
                    killing.append(
                        Round(member: index, killedAt: killedAt, restartedAt: Date(), oldPID: old, newPID: new))
                } catch {
                    killing.fail("\(name(index)): \(error)")
                }
            }
            killing.finished()
        }
        thread.start()
        return killing
    }

    /// A running kill schedule.
    package final class Killing: @unchecked Sendable {
        // @unchecked: everything mutable is under `condition`.
        private let condition = NSCondition()
        private var stopping = false
        private var done = false
        private var list: [Round] = []
        private var errors: [String] = []

        /// Sleeps for `duration` unless stopped meanwhile; false when stopped.
        fileprivate func sleep(_ duration: Duration) -> Bool {
            let (seconds, attoseconds) = duration.components
            let deadline = Date().addingTimeInterval(Double(seconds) + Double(attoseconds) / 1e18)
            condition.lock()
            defer { condition.unlock() }
            while !stopping, condition.wait(until: deadline) {}
            return !stopping
        }

        fileprivate func append(_ round: Round) { condition.withLock { list.append(round) } }
        fileprivate func fail(_ text: String) { condition.withLock { errors.append(text) } }
        fileprivate func finished() {
            condition.withLock {
                done = true
                condition.broadcast()
            }
        }

        /// The rounds so far.
        package var rounds: [Round] { condition.withLock { list } }
        /// Starts that failed.
        package var failures: [String] { condition.withLock { errors } }

        /// Ends the schedule (a member killed just now is started again first) and waits for its thread; the
        /// rounds it made.
        @discardableResult
        package func stop() -> [Round] {
            condition.lock()
            stopping = true
            condition.broadcast()
            while !done { condition.wait() }
            condition.unlock()
            return rounds
        }
    }
}
