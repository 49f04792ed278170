import Foundation
import GeofenceCore
import GeofenceSystem

#if canImport(Glibc)
    import Glibc
#endif

/// What to run for one attempt: a command for `/bin/sh -c`, its environment and its standard input.
struct HookInvocation: Sendable {
    var command: String
    /// `NAME=value` strings: the whole environment of the hook.
    var environment: [String]
    var stdin: [UInt8]
    /// Run as this user instead of the daemon's (issue 5: hooks registered by a client run as that client when
    /// the daemon is root). nil: as the daemon.
    var runAs: uid_t?
}

/// Limits for one attempt.
struct HookLimits: Sendable {
    /// Seconds before the process group gets SIGTERM.
    var timeout: Double
    /// Seconds between SIGTERM and SIGKILL, at a timeout.
    var killGrace: Double
    /// Seconds between SIGTERM and SIGKILL when the runner stops.
    var shutdownGrace: Double
    /// Bytes kept of stdout, and of stderr; the rest is read and dropped.
    var outputLimit: Int
}

/// A hook that could not be started: the attempt's result, with its `error`.
struct HookStartFailure: Error {
    var result: HookProcessResult
}

/// How one attempt ended.
struct HookProcessResult: Sendable {
    var pid: pid_t = 0
    /// Wall-clock time the process was started.
    var spawnedAt: Date?
    var exitCode: Int32?
    var signal: Int32?
    var timedOut = false
    /// Stopped because the runner was stopping, not by its own doing.
    var interrupted = false
    /// The process could not be started (or run as `runAs`).
    var error: String?
    var stdout: [UInt8] = []
    var stderr: [UInt8] = []
    var stdoutBytes = 0
    var stderrBytes = 0
    var duration: Double = 0

    /// Exit 0 in time. A hook that exits 0 while being stopped did deliver: it counts.
    var succeeded: Bool { exitCode == 0 && !timedOut && error == nil }
}

/// Runs one hook process to its end: `posix_spawn` of `/bin/sh -c`, in a process group of its own, with a
/// clean signal state, no inherited descriptors, `/` as working directory; its output read as it comes and
/// capped; the whole group killed at the timeout or when the runner stops; the process reaped.
///
/// `start` is quick (it is on the path from event to hook start); `finish` blocks until the hook is over and
/// runs on a thread of its own, never on Swift concurrency's cooperative pool.
enum HookProcess {
    /// A hook process started, to be seen through by `finish`.
    struct Started: Sendable {
        var child: SpawnedHook
        /// Monotonic seconds before the spawn: the attempt's duration counts from here.
        var startedAt: Double
        var spawnedAt: Date
    }

    /// Starts `invocation`; a result with `error` set when it cannot.
    static func start(_ invocation: HookInvocation, clock: any GeofenceClock) -> Result<Started, HookStartFailure> {
        let started = MonotonicClock.seconds()
        do {
            let child = try spawn(invocation)
            return .success(Started(child: child, startedAt: started, spawnedAt: clock.now()))
        } catch {
            var result = HookProcessResult()
            result.error = "cannot start /bin/sh: \(error)"
            result.duration = MonotonicClock.seconds() - started
            return .failure(HookStartFailure(result: result))
        }
    }

    /// Reads the hook's output, enforces its timeout, stops it when `stopFD` becomes readable (the runner is
    /// stopping), and returns when it has exited and been reaped.
    static func finish(_ started: Started, limits: HookLimits, stopFD: Int32) -> HookProcessResult {
        var result = HookProcessResult()
        var child = started.child
        result.pid = child.pid
        result.spawnedAt = started.spawnedAt
        supervise(&child, limits: limits, stopFD: stopFD, started: started.startedAt, result: &result)
        result.duration = MonotonicClock.seconds() - started.startedAt
        return result
    }

    /// `start`, then `finish`.
    static func run(
        _ invocation: HookInvocation, limits: HookLimits, stopFD: Int32, clock: any GeofenceClock = SystemClock()
    ) -> HookProcessResult {
        switch start(invocation, clock: clock) {
        case .success(let started): finish(started, limits: limits, stopFD: stopFD)
        case .failure(let failure): failure.result
        }
    }

    /// The descriptors of a running hook, on our side.
    struct SpawnedHook: Sendable {
        var pid: pid_t
        var stdout: Int32
        var stderr: Int32
        var pidfd: Int32?
    }

    // MARK: Spawning

    static func spawn(_ invocation: HookInvocation) throws(HookSpawnError) -> SpawnedHook {
        var argv = ["/bin/sh", "-c", invocation.command]
        if let uid = invocation.runAs, uid != geteuid() {
            argv = try switchUser(uid) + argv
        }
        let stdin = try HookSystem.makePipe()
        defer { HookSystem.closeIgnoringErrors(stdin.read) }
        do {
            // The event is small; it goes into the pipe before the hook starts, so we never block on a hook that
            // does not read its stdin, and never get SIGPIPE from one that exits first.
            try fill(stdin.write, with: invocation.stdin)
        } catch {
            HookSystem.closeIgnoringErrors(stdin.write)
            throw error
        }
        HookSystem.closeIgnoringErrors(stdin.write)
        let stdout = try HookSystem.makePipe()
        let stderr: (read: Int32, write: Int32)
        do {
            stderr = try HookSystem.makePipe()
        } catch {
            HookSystem.closeIgnoringErrors(stdout.read)
            HookSystem.closeIgnoringErrors(stdout.write)
            throw error
        }
        defer {
            HookSystem.closeIgnoringErrors(stdout.write)
            HookSystem.closeIgnoringErrors(stderr.write)
        }
        var pid: pid_t = 0
        do {
            pid = try posixSpawn(
                argv: argv, environment: invocation.environment, stdio: (stdin.read, stdout.write, stderr.write))
        } catch {
            HookSystem.closeIgnoringErrors(stdout.read)
            HookSystem.closeIgnoringErrors(stderr.read)
            throw error
        }
        HookSystem.setNonBlocking(stdout.read)
        HookSystem.setNonBlocking(stderr.read)
        return SpawnedHook(pid: pid, stdout: stdout.read, stderr: stderr.read, pidfd: HookSystem.pidfd(pid))
    }

    /// `setpriv` in front of the shell: posix_spawn cannot change the user itself.
    private static func switchUser(_ uid: uid_t) throws(HookSpawnError) -> [String] {
        guard geteuid() == 0 else { throw HookSpawnError("run as uid \(uid) (geofence is not root)", EPERM) }
        var entry = passwd()
        var buffer = [CChar](repeating: 0, count: 16_384)
        var found: UnsafeMutablePointer<passwd>?
        let rc = getpwuid_r(uid, &entry, &buffer, buffer.count, &found)
        guard rc == 0, found != nil else {
            // A client with no account here (a container's uid): its own uid as the group, no other groups.
            guard rc == 0 else { throw HookSpawnError("run as uid \(uid): cannot read the user database", rc) }
            return ["/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--"]
        }
        return ["/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(entry.pw_gid)", "--init-groups", "--"]
    }

    private static func fill(_ fd: Int32, with bytes: [UInt8]) throws(HookSpawnError) {
        guard !bytes.isEmpty else { return }
        if bytes.count > 65_536 {
            // Linux pipes hold 64 KiB unless asked for more (up to /proc/sys/fs/pipe-max-size, 1 MiB by default).
            _ = fcntl(fd, HookSystem.setPipeSize, Int32(clamping: bytes.count))
        }
        HookSystem.setNonBlocking(fd)
        do {
            try System.writeAll(fd, bytes)
        } catch {
            throw HookSpawnError("writing the event (\(bytes.count) bytes) to the hook's stdin", error.errno)
        }
    }

    private static func posixSpawn(
        argv: [String], environment: [String], stdio: (Int32, Int32, Int32)
    ) throws(HookSpawnError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        // Our pipe ends are never 0, 1 or 2 unless the daemon runs with a standard descriptor closed; then a dup2
        // could clobber another end, so move them up first.
        let sources = [stdio.0, stdio.1, stdio.2].map { fd in fd > 2 ? fd : fcntl(fd, F_DUPFD_CLOEXEC, 3) }
        defer { for (i, fd) in sources.enumerated() where fd != [stdio.0, stdio.1, stdio.2][i] { close(fd) } }
        for (target, source) in sources.enumerated() {
            guard source >= 0 else { throw HookSpawnError("dup", errno) }
            posix_spawn_file_actions_adddup2(&actions, source, Int32(target))
        }
        // Every other descriptor of the daemon (the database, the control socket, other hooks' pipes) stays out.
        // Ours are all close-on-exec; this also catches any a library opened without it.
        _ = HookSystem.addCloseFrom(&actions, 3)
        _ = HookSystem.addChdir(&actions, "/")

        // A process group of its own, so a timeout can kill the hook and everything it started; every signal at
        // its default and none blocked, whatever the daemon ignores or blocks (SIGPIPE, SIGTERM for its signal
        // handling): the reason for posix_spawn rather than Foundation's Process, which passes on the spawning
        // thread's mask (swift-corelibs-foundation#4772).
        posix_spawnattr_setpgroup(&attributes, 0)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var pid: pid_t = 0
        let rc = withCStrings(argv) { cArgv in
            withCStrings(environment) { cEnv in
                posix_spawn(&pid, argv[0], &actions, &attributes, cArgv, cEnv)
            }
        }
        guard rc == 0 else { throw HookSpawnError("posix_spawn \(argv[0])", rc) }
        return pid
    }

    private static func withCStrings<R>(
        _ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R
    ) -> R {
        // NUL bytes cannot cross exec; the environment builder has removed them already.
        var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
        pointers.append(nil)
        defer { for p in pointers { free(p) } }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

    // MARK: Supervising

    private enum Phase {
        case running
        /// SIGTERM sent; SIGKILL at this (monotonic) time.
        case terminating(killAt: Double)
        case killed
    }

    private static func supervise(
        _ child: inout SpawnedHook, limits: HookLimits, stopFD: Int32, started: Double, result: inout HookProcessResult
    ) {
        let deadline = started + limits.timeout
        var phase = Phase.running
        var exited = false
        var reaped = false
        var status: Int32 = 0
        var exitedAt = 0.0
        var watchStop = stopFD >= 0
        var stdoutOpen = true
        var stderrOpen = true
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 16)
        defer { buffer.deallocate() }

        func signalGroup(_ signal: Int32) {
            // While the leader is unreaped its pid cannot be reused, so this never hits a stranger's group.
            if !reaped { kill(-child.pid, signal) }
        }

        while true {
            let now = MonotonicClock.seconds()
            if exited && (!stdoutOpen && !stderrOpen || now - exitedAt >= 0.1) {
                // Output written after the shell exited (by something it left running) is not waited for
                // beyond a moment: the hook is over when its shell is.
                break
            }
            switch phase {
            case .running:
                if !exited && now >= deadline {
                    result.timedOut = true
                    signalGroup(SIGTERM)
                    phase = .terminating(killAt: now + limits.killGrace)
                }
            case .terminating(let killAt):
                if exited || now >= killAt {
                    // Also after the shell died of SIGTERM: what it started may ignore SIGTERM.
                    signalGroup(SIGKILL)
                    phase = .killed
                }
            case .killed:
                break
            }

            var wakeAt = exited ? exitedAt + 0.1 : .infinity
            switch phase {
            case .running: wakeAt = min(wakeAt, deadline)
            case .terminating(let killAt): wakeAt = min(wakeAt, killAt)
            case .killed: break
            }
            if child.pidfd == nil && !exited { wakeAt = min(wakeAt, now + 0.01) }
            let timeout = wakeAt.isFinite ? Int32(clamping: Int(max(0, (wakeAt - now) * 1000).rounded(.up))) : -1

            var fds: [pollfd] = []
            if stdoutOpen { fds.append(pollfd(fd: child.stdout, events: Int16(POLLIN), revents: 0)) }
            if stderrOpen { fds.append(pollfd(fd: child.stderr, events: Int16(POLLIN), revents: 0)) }
            if let pidfd = child.pidfd, !exited { fds.append(pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)) }
            if watchStop { fds.append(pollfd(fd: stopFD, events: Int16(POLLIN), revents: 0)) }
            guard (try? System.poll(&fds, milliseconds: timeout)) != nil else { break }

            for entry in fds where entry.revents != 0 {
                if entry.fd == child.stdout {
                    stdoutOpen = drain(
                        entry.fd, into: &result.stdout, count: &result.stdoutBytes, limit: limits.outputLimit, buffer)
                } else if entry.fd == child.stderr {
                    stderrOpen = drain(
                        entry.fd, into: &result.stderr, count: &result.stderrBytes, limit: limits.outputLimit, buffer)
                } else if entry.fd == stopFD {
                    watchStop = false
                    if case .running = phase, !exited {
                        result.interrupted = true
                        signalGroup(SIGTERM)
                        phase = .terminating(killAt: MonotonicClock.seconds() + limits.shutdownGrace)
                    }
                } else if !exited {
                    exited = true
                    exitedAt = MonotonicClock.seconds()
                }
            }
            if child.pidfd == nil && !exited {
                let rc = waitpid(child.pid, &status, WNOHANG)
                if rc == child.pid {
                    exited = true
                    reaped = true
                    exitedAt = MonotonicClock.seconds()
                }
            }
            if !stdoutOpen && child.stdout >= 0 {
                HookSystem.closeIgnoringErrors(child.stdout)
                child.stdout = -1
            }
            if !stderrOpen && child.stderr >= 0 {
                HookSystem.closeIgnoringErrors(child.stderr)
                child.stderr = -1
            }
        }
        if case .terminating = phase { signalGroup(SIGKILL) }
        // Closing our ends makes anything the hook left behind get SIGPIPE if it still writes.
        HookSystem.closeIgnoringErrors(child.stdout)
        HookSystem.closeIgnoringErrors(child.stderr)
        if let pidfd = child.pidfd { HookSystem.closeIgnoringErrors(pidfd) }
        if !reaped {
            System.retryingEINTR { waitpid(child.pid, &status, 0) }
        }
        let decoded = HookSystem.decodeWaitStatus(status)
        result.exitCode = decoded.exitCode
        result.signal = decoded.signal
    }

    /// Reads what is there, up to 1 MiB at a time (so a hook that writes without pause cannot keep us from
    /// its timeout); keeps up to `limit` bytes in all. Returns false at end of file.
    private static func drain(
        _ fd: Int32, into kept: inout [UInt8], count: inout Int, limit: Int, _ buffer: UnsafeMutableRawBufferPointer
    ) -> Bool {
        for _ in 0..<16 {
            let n = System.retryingEINTR { read(fd, buffer.baseAddress, buffer.count) }
            if n > 0 {
                count += n
                if kept.count < limit {
                    let take = min(n, limit - kept.count)
                    kept.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[0..<take]))
                }
                continue
            }
            if n == 0 { return false }
            return errno == EAGAIN || errno == EWOULDBLOCK
        }
        return true
    }
}
