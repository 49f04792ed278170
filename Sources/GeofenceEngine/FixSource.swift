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
    // @unchecked: the only mutable state is in `intake`, which guards its own.
    public let path: String
    private let intake: FleetIntake
    /// Reports read ahead at most (each a batch of at most `maximumBatch` fixes): at most 16 × 512 fixes
    /// wait in memory, and a faster producer is held back through the FIFO or pipe.
    public var maximumInFlight: Int {
        get { intake.maximumInFlight }
        set { intake.maximumInFlight = newValue }
    }
    public var maximumBatch = 512
    private let logger: Logger?

    public init(path: String, liveness: SourceLiveness.Configuration = .init(), logger: Logger? = nil) {
        self.path = path
        self.logger = logger
        intake = FleetIntake(status: SourceStatus(path: path), liveness: liveness, logger: logger)
    }

    public var reports: AsyncStream<GPSDReport> { intake.reports }

    public var label: String { intake.label }

    /// Lines that were not JSON, not TPV, or no usable fix.
    public var skipped: Int { intake.status.unusableTotal }

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
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { throw SourceOpenError(path: path, reason: String(cString: strerror(errno))) }
        close(descriptor)
    }

    public func start() {
        intake.startWatchdog(name: "geofence.json-watchdog")
        let thread = Thread { self.readLoop() }
        thread.name = "geofence.json-source"
        thread.start()
    }

    public func stop() async {
        // A read blocked on an idle FIFO stays blocked; the thread notices the flag at the next line,
        // and the stream is finished now, which is what the daemon waits for.
        intake.stop()
        intake.finish()
    }

    private var isStopped: Bool { intake.isStopped }

    public func consumed() { intake.consumed() }

    private func readLoop() {
        defer { intake.finish() }
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
                    intake.update {
                        $0.open = false
                        $0.problem = reason
                    }
                    if openFailures == 0 { logger?.warning("\(reason); retrying every second") }
                    openFailures += 1
                    Thread.sleep(forTimeInterval: 1)
                    continue
                }
            }
            if openFailures > 0 { logger?.notice("\(path) is open again") }
            openFailures = 0
            intake.update {
                $0.open = true
                $0.problem = nil
            }
            intake.send(.connected)
            var reader = LineReader(fd: descriptor)
            // Lines already read go over in one batch (up to `maximumBatch`): one hand-over to the engine per batch.
            var batch: [Fix] = []
            while !isStopped, let line = try? reader.next() {
                if let fix = intake.take(GPSDJSON.decode(line, defaultSubject: "fleet")) { batch.append(fix) }
                if !batch.isEmpty && (batch.count >= maximumBatch || !reader.hasBufferedLine) {
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
    public var path: String
    public var reason: String
    public var description: String { "cannot open the fleet source \(path): \(reason)" }
}
