import Foundation
import GeofenceCore
import GeofenceGPSD

#if canImport(Glibc)
    import Glibc
#endif

/// Where the daemon's fixes come from: gpsd, or a stream of gpsd-style JSON lines for a fleet.
public protocol FixSource: AnyObject, Sendable {
    /// Everything the source has to say; ends after `stop()` (or, for a file, at its end).
    var reports: AsyncStream<GPSDReport> { get }
    func start()
    func stop() async
    /// For logs and `status`: where the fixes come from.
    var label: String { get }
    /// The consumer has taken one report off `reports`: a source that can wait (a file, a FIFO) uses this
    /// to read no further ahead than a bounded number of reports.
    func consumed()
    /// What the source knows of itself in its own terms, for `status` (nil: gpsd, which `status` asks itself).
    var status: SourceStatus? { get }
}

extension FixSource {
    public func consumed() {}
    public var status: SourceStatus? { nil }
}

extension GPSDSource: FixSource {
    public var label: String { "gpsd at \(configuration.address)" }
}

/// Fleet ingest: gpsd-style TPV JSON lines (`gpspipe -w`, `kcat`, any producer) from a file, a FIFO or
/// standard input, one subject per `device` field.
///
/// Fixes carry no receipt time: a fleet stream may lag behind real time (a Kafka backlog), and decisions
/// run on the fixes' own time anyway. A regular file or standard input ends the source at its end; a FIFO
/// is opened again when its writer goes away, so producers can come and go.
///
/// Like gpsd's source it has a first-fix deadline and a staleness limit (`SourceLiveness`), watched on a
/// thread of its own, since the reader may block for good in `open` or `read` on an idle FIFO: a stream of
/// nothing, or of lines that are no usable fix, is reported `silent` or `lost`, never just quiet. Lines
/// that give no usable fix are counted by reason (`status`), and the first of each kind is logged.
public final class JSONLineSource: FixSource, @unchecked Sendable {
    // @unchecked: the mutable fields are only touched under `lock`.
    public let path: String
    public let reports: AsyncStream<GPSDReport>
    private let continuation: AsyncStream<GPSDReport>.Continuation
    private let lock = NSLock()
    private var stopped = false
    /// Reports yielded but not yet taken by the consumer. The reader waits at `maximumInFlight`, so a
    /// producer faster than the engine is held back through the FIFO or pipe (back-pressure), instead of
    /// filling memory with an unbounded buffer. A report is a batch of at most `maximumBatch` fixes, so at
    /// most 16 × 512 fixes wait in memory.
    private var inFlight = 0
    private let room = NSCondition()
    public var maximumInFlight = 16
    public var maximumBatch = 512
    private var liveness: SourceLiveness
    private var counts: SourceStatus
    private let logger: Logger?
    private let clock = MonotonicClock()
    /// When unusable lines were last summed up in the log, and how many there were then.
    private var lastSummary = -Double.infinity
    private var unusableAtSummary = 0

    public init(path: String, liveness: SourceLiveness.Configuration = .init(), logger: Logger? = nil) {
        self.path = path
        self.logger = logger
        self.liveness = SourceLiveness(configuration: liveness, startedAt: clock.now)
        counts = SourceStatus(path: path)
        (reports, continuation) = AsyncStream.makeStream(of: GPSDReport.self)
    }

    public var label: String { counts.label }

    /// Lines that were not JSON, not TPV, or no usable fix.
    public var skipped: Int { lock.withLock { counts.unusableTotal } }

    public var status: SourceStatus? {
        lock.withLock {
            var status = counts
            switch liveness.state {
            case .awaitingFirstFix: status.liveness = "awaiting-first-fix"
            case .receiving: status.liveness = "receiving"
            case .silent: status.liveness = "silent"
            case .lost: status.liveness = "lost"
            }
            return status
        }
    }

    /// Checks, before the engine starts, that the source can be opened at all: a missing file is a
    /// mistake to say at once (exit 66), not a source that stays quiet. A FIFO is only looked at, never
    /// opened here: a reader that came and went would let a waiting writer in, only to die of SIGPIPE.
    public static func checkOpenable(_ path: String) throws(SourceOpenError) {
        guard path != "-" else { return }
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw SourceOpenError(path: path, reason: String(cString: strerror(errno)))
        }
        if (info.st_mode & S_IFMT) == S_IFIFO {
            guard access(path, R_OK) == 0 else {
                throw SourceOpenError(path: path, reason: String(cString: strerror(errno)))
            }
            return
        }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { throw SourceOpenError(path: path, reason: String(cString: strerror(errno))) }
        close(descriptor)
    }

    public func start() {
        lock.withLock { liveness.restart(at: clock.now) }
        let thread = Thread { self.readLoop() }
        thread.name = "geofence.json-source"
        thread.start()
        let watchdog = Thread { self.watch() }
        watchdog.name = "geofence.json-watchdog"
        watchdog.start()
    }

    public func stop() async {
        // A read blocked on an idle FIFO stays blocked; the thread notices the flag at the next line,
        // and the stream is finished now, which is what the daemon waits for.
        lock.withLock { stopped = true }
        wakeReader()
        continuation.finish()
    }

    private var isStopped: Bool { lock.withLock { stopped } }

    public func consumed() {
        room.lock()
        inFlight -= 1
        if inFlight < maximumInFlight / 2 { room.signal() }
        room.unlock()
    }

    private func wakeReader() {
        room.lock()
        room.broadcast()
        room.unlock()
    }

    /// Yields a report once there is room for it (every yield is matched by one `consumed()`).
    private func send(_ report: GPSDReport) {
        room.lock()
        while inFlight >= maximumInFlight && !isStopped { _ = room.wait(until: Date().addingTimeInterval(0.2)) }
        inFlight += 1
        room.unlock()
        continuation.yield(report)
    }

    /// Yields a liveness report without waiting for room: the watchdog must never block behind fixes.
    private func sendNow(_ report: GPSDReport) {
        room.lock()
        inFlight += 1
        room.unlock()
        continuation.yield(report)
    }

    /// The deadlines, checked every 0.1 s (a thread of its own: the reader may be blocked in `open`/`read`).
    private func watch() {
        while !isStopped {
            let transition = lock.withLock { liveness.advance(to: clock.now) }
            if let transition { sendNow(.liveness(transition)) }
            Thread.sleep(forTimeInterval: 0.1)
        }
    }

    private func readLoop() {
        defer { continuation.finish() }
        var openFailures = 0
        while !isStopped {
            let descriptor: Int32
            if path == "-" {
                descriptor = 0
            } else {
                descriptor = open(path, O_RDONLY | O_CLOEXEC)
                guard descriptor >= 0 else {
                    // Checked at start, so this is a FIFO removed or made unreadable since: say so once, and
                    // keep trying (every second) with the state visible in `status`.
                    let reason = "cannot open \(path): \(String(cString: strerror(errno)))"
                    lock.withLock {
                        counts.open = false
                        counts.problem = reason
                    }
                    if openFailures == 0 { logger?.warning("\(reason); retrying every second") }
                    openFailures += 1
                    Thread.sleep(forTimeInterval: 1)
                    continue
                }
            }
            if openFailures > 0 { logger?.notice("\(path) is open again") }
            openFailures = 0
            lock.withLock {
                counts.open = true
                counts.problem = nil
            }
            send(.connected)
            var reader = LineReader(fd: descriptor)
            // Lines already read go over in one batch (up to `maximumBatch`): one hand-over to the engine per batch.
            var batch: [Fix] = []
            while !isStopped, let line = try? reader.next() {
                if let fix = take(line) { batch.append(fix) }
                if !batch.isEmpty && (batch.count >= maximumBatch || !reader.hasBufferedLine) {
                    send(.fixes(batch))
                    batch.removeAll(keepingCapacity: true)
                }
            }
            if !batch.isEmpty { send(.fixes(batch)) }
            var info = stat()
            let isFIFO = fstat(descriptor, &info) == 0 && (info.st_mode & S_IFMT) == S_IFIFO && path != "-"
            if descriptor > 2 { close(descriptor) }
            lock.withLock { counts.open = false }
            guard isFIFO else { return }
        }
    }

    /// Counts one line; the fix to pass on, if it is a TPV (usable or not: the filter counts its own refusals).
    private func take(_ line: ArraySlice<UInt8>) -> Fix? {
        let unusable: (kind: String, why: String)?
        var fix: Fix?
        switch GPSDJSON.decode(line, defaultSubject: "fleet") {
        case .tpv(let tpv):
            fix = tpv
            unusable = SourceStatus.Unusable.reason(tpv)
        case .other:
            lock.withLock {
                counts.lines += 1
                counts.ignored += 1
            }
            return nil
        case .malformed(let problem):
            unusable = (problem.kind.rawValue, problem.description)
        }
        let now = clock.now
        var restored: SourceLiveness.Transition?
        var first = false
        var summary: String?
        lock.withLock {
            counts.lines += 1
            if let unusable {
                first = counts.unusable[unusable.kind] == nil
                counts.unusable[unusable.kind, default: 0] += 1
                // After the first of each kind, at most one line a minute sums up what came since.
                let total = counts.unusableTotal
                if !first, now - lastSummary >= 60, total > unusableAtSummary + 1 {
                    summary = "\(total) line(s) from \(label) gave no usable fix so far: \(counts.unusableSummary)"
                    lastSummary = now
                    unusableAtSummary = total
                }
                if first { lastSummary = now }
            } else if let fix {
                counts.usableFixes += 1
                counts.lastFixTime = fix.time
                counts.lastFixRead = Date()
                restored = liveness.usableFix(at: now)
            }
        }
        if let unusable, first {
            logger?.warning("\(label): skipped a line (\(unusable.kind)): \(unusable.why); further ones are counted")
        }
        if let summary { logger?.warning(summary) }
        // `restored` before the fix that ended the outage, as gpsd's source sends it.
        if let restored { sendNow(.liveness(restored)) }
        // A refused vehicle name never reaches the pipeline; other TPVs do, and the filter judges them.
        return fix
    }
}

/// A fleet source that cannot be opened when the engine starts.
public struct SourceOpenError: Error, CustomStringConvertible {
    public var path: String
    public var reason: String
    public var description: String { "cannot open the fleet source \(path): \(reason)" }
}
