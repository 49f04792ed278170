import Foundation
import GeofenceCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// gpsd-style JSON lines read from a descriptor and decoded, one at a time: the one read-and-decode loop of
/// the JSON-lines source and of `geofence replay`.
package struct JSONLines {
    private var reader: LineReader
    /// The subject of a TPV without a `device` field.
    package let defaultSubject: String
    /// Whether blank lines are passed over (`replay`) rather than decoded (and counted as malformed).
    package let skipsBlankLines: Bool
    /// Lines read so far, blank ones included: the number of the line `next()` returned last.
    package private(set) var lineNumber = 0

    /// `interrupt`: see `LineReader.init(fd:maximumLength:interrupt:)`.
    package init(fd: Int32, defaultSubject: String, skipsBlankLines: Bool = false, interrupt: Int32 = -1) {
        reader = LineReader(fd: fd, interrupt: interrupt)
        self.defaultSubject = defaultSubject
        self.skipsBlankLines = skipsBlankLines
    }

    /// The next line, decoded; nil at the end of the input.
    /// A line too long for the reader is a `too-long` report like any line too long to decode, so it is counted
    /// as a line and by what became of it, whatever its size.
    package mutating func next() throws -> GPSDJSONReport? {
        while let item = try reader.nextItem() {
            lineNumber += 1
            switch item {
            case .oversized(let bytes):
                return .malformed(.init(.tooLong, "line of \(bytes) bytes is too long"))
            case .line(let line):
                if skipsBlankLines && line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }) {
                    continue
                }
                return GPSDJSON.decode(line, defaultSubject: defaultSubject)
            }
        }
        return nil
    }

    /// Opens `path` for reading (`-`: standard input, descriptor 0); the descriptor, or the system's reason.
    /// With `nonBlockingFIFO`, a FIFO is opened without waiting for a writer (and reads from it do not block:
    /// read it with an interrupt, which polls).
    package static func open(_ path: String, nonBlockingFIFO: Bool = false) -> Result<Int32, SourceOpenError> {
        guard path != "-" else { return .success(0) }
        var info = stat()
        let isFIFO = nonBlockingFIFO && stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFIFO
        let descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC | (isFIFO ? O_NONBLOCK : 0))
        guard descriptor >= 0 else {
            return .failure(SourceOpenError(path: path, reason: String(cString: strerror(errno))))
        }
        return .success(descriptor)
    }

    /// Whether a whole line is already read (a batch can grow without waiting for the producer).
    package var hasBufferedLine: Bool {
        mutating get { reader.hasBufferedLine }
    }

    /// Lines cut off for being longer than the reader takes (each also returned by `next()` as `too-long`).
    package var oversizedLines: Int { reader.oversizedLines }
}

/// Fleet ingest: gpsd-style TPV JSON lines (`gpspipe -w`, `kcat`, any producer) from a file, a FIFO or
/// standard input, one subject per `device` field.
///
/// Fixes carry no receipt time: a fleet stream may lag behind real time (a Kafka backlog), and decisions
/// run on the fixes' own time anyway. A fix from the future (`FixFilterConfiguration.maxFutureSkew` ahead
/// of the clock when it is read; give it the engine's `filter` settings) is counted and not passed on. A
/// regular file or standard input ends the source at its end; a FIFO is opened again when its writer goes
/// away, so producers can come and go.
///
/// Like gpsd's source it has a first-fix deadline and a staleness limit (`SourceLiveness`), watched on a
/// thread of its own, since the reader may wait for good on an idle FIFO: a stream of nothing, or of lines
/// that are no usable fix, is reported `silent` or `lost`, never just quiet. Lines that give no usable fix
/// are counted by reason (`status`), and the first of each kind is logged.
///
/// `stop()` ends the reader at once even on an idle FIFO (the reader waits in `poll` with a stop pipe, and
/// opens a FIFO without waiting for a writer), and hands over the fixes it had already read before the
/// stream ends: nothing taken from the producer is dropped.
public final class JSONLineSource: LocationSource, @unchecked Sendable {
    // @unchecked: the only mutable state is in `intake`, which guards its own.
    /// The file, FIFO or `-` (standard input) the lines are read from.
    public let path: String
    private let intake: FleetIntake
    /// Fixes handed over at most in one report. With `LocationReports.BackPressure.standard`, at most 16 × 512
    /// fixes wait in memory, and a faster producer is held back through the FIFO or pipe.
    public var maximumBatch = 512
    /// The subject of a TPV without a `device` field.
    public let defaultSubject: String
    private let logger: Logger?
    /// Written to by `stop()`: ends the reader's wait for input.
    private let stopPipe: (read: Int32, write: Int32)
    /// Signalled when the reader has handed over its last fixes and closed its descriptor.
    private let readerDone = DispatchSemaphore(value: 0)
    private let started = Atomic(false)

    /// A source reading `path` (`-`: standard input), whose TPVs without a `device` are `defaultSubject`'s
    /// (`fleet` by default); nothing is opened before `start()` (`checkOpenable(_:)` checks the path first).
    public init(
        path: String, defaultSubject: String = "fleet", liveness: SourceLiveness.Configuration = .init(),
        filter: FixFilterConfiguration = .init(), logger: Logger? = nil
    ) {
        self.path = path
        self.defaultSubject = defaultSubject
        self.logger = logger
        intake = FleetIntake(status: SourceStatus(path: path), liveness: liveness, filter: filter, logger: logger)
        do {
            stopPipe = try HookSystem.makePipe()
        } catch {
            logger?.warning("the fleet source has no stop pipe (\(error)): a stop does not wait for its reader")
            stopPipe = (-1, -1)
        }
    }

    deinit {
        if stopPipe.read >= 0 { close(stopPipe.read) }
        if stopPipe.write >= 0 { close(stopPipe.write) }
    }

    /// The fixes, in batches of up to `maximumBatch`, and news of the input and of liveness; they end at the
    /// end of a regular file or standard input, or after `stop()`.
    public var reports: LocationReports { intake.reports }

    /// `JSON lines from PATH` (or `on standard input`), for logs and `status`.
    public var label: String { intake.label }

    /// Lines that were not JSON, not TPV, or no usable fix.
    public var skipped: Int { intake.status.unusableTotal }

    /// The source's own account: open or not (and why), lines read, usable fixes, the unusable by reason.
    public var status: SourceStatus? { intake.status }

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
        if (info.st_mode & S_IFMT) == S_IFDIR { throw SourceOpenError(path: path, reason: "it is a directory") }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { throw SourceOpenError(path: path, reason: String(cString: strerror(errno))) }
        close(descriptor)
    }

    /// Starts the reader thread and the liveness watchdog; returns at once. A second call does nothing.
    public func start() {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        intake.startWatchdog(name: "geofence.json-watchdog")
        let thread = Thread {
            self.readLoop()
            self.readerDone.signal()
        }
        thread.name = "geofence.json-source"
        thread.start()
    }

    /// Stops reading, waits for the reader to hand over the whole lines it had read (up to 5 s; 0.5 s if it
    /// had no stop pipe), then ends `reports`.
    public func stop() async {
        intake.stop()
        if stopPipe.write >= 0 {
            var byte: UInt8 = 1
            _ = write(stopPipe.write, &byte, 1)
        }
        // The reader hands over what it has read (the sequence no longer waits for room), then ends; one that
        // cannot be interrupted (no stop pipe) is not waited for long.
        if started.load(ordering: .acquiring) {
            let done = readerDone
            let limit: Double = stopPipe.write >= 0 ? 5 : 0.5
            await withCheckedContinuation { (resumed: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async {
                    if done.wait(timeout: .now() + limit) == .success { done.signal() }
                    resumed.resume()
                }
            }
        }
        intake.finish()
    }

    private var isStopped: Bool { intake.isStopped }

    private func readLoop() {
        defer { intake.finish() }
        var openFailures = 0
        while !isStopped {
            let descriptor: Int32
            switch JSONLines.open(path, nonBlockingFIFO: stopPipe.read >= 0) {
            case .success(let opened): descriptor = opened
            case .failure(let failure):
                // Checked at start, so this is a FIFO removed or made unreadable since: say so once, and keep
                // trying (every second) with the state visible in `status`.
                let reason = "cannot open \(path): \(failure.reason)"
                intake.update {
                    $0.open = false
                    $0.problem = reason
                }
                if openFailures == 0 { logger?.warning("\(reason); retrying every second") }
                openFailures += 1
                Thread.sleep(forTimeInterval: 1)
                continue
            }
            if openFailures > 0 { logger?.notice("\(path) is open again") }
            openFailures = 0
            intake.update {
                $0.open = true
                $0.problem = nil
            }
            intake.sendNow(.up)
            var lines = JSONLines(fd: descriptor, defaultSubject: defaultSubject, interrupt: stopPipe.read)
            // Lines already read go over in one batch (up to `maximumBatch`): one hand-over to the engine per batch.
            var batch: [Fix] = []
            // After a stop, the whole lines already read still go (the reader no longer waits for input, nor for
            // room): nothing taken from the producer is dropped but a line it had not finished writing.
            while !isStopped || lines.hasBufferedLine {
                let report: GPSDJSONReport
                do {
                    guard let next = try lines.next() else { break }
                    report = next
                } catch is LineReader.Interrupted {
                    break
                } catch {
                    // A read that fails (EIO, a directory) ends this reading as the end of the input would, but
                    // is said, in the log and in `status`, never taken for a clean end.
                    let why = (error as? POSIXError).map { String(cString: strerror($0.code.rawValue)) } ?? "\(error)"
                    let reason = "cannot read \(path): \(why)"
                    logger?.warning(reason)
                    intake.update { $0.problem = reason }
                    break
                }
                if let fix = intake.take(report) { batch.append(fix) }
                if !batch.isEmpty && (batch.count >= maximumBatch || !lines.hasBufferedLine) {
                    intake.send(.fixes(batch))
                    batch.removeAll(keepingCapacity: true)
                }
            }
            if !batch.isEmpty { intake.send(.fixes(batch)) }
            var info = stat()
            let isFIFO = fstat(descriptor, &info) == 0 && (info.st_mode & S_IFMT) == S_IFIFO && path != "-"
            if descriptor > 2 { close(descriptor) }
            intake.update { $0.open = false }
            guard isFIFO else { return }
        }
    }
}

/// A fleet source that cannot be opened when the engine starts.
public struct SourceOpenError: Error, CustomStringConvertible {
    /// The path as given.
    public var path: String
    /// The system's reason (`strerror`), such as `No such file or directory`.
    public var reason: String
    public var description: String { "cannot open the fleet source \(path): \(reason)" }
}
