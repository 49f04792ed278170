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
}

extension FixSource {
    public func consumed() {}
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
    /// Lines that were not TPV or not JSON at all.
    public private(set) var skipped = 0

    public init(path: String) {
        self.path = path
        (reports, continuation) = AsyncStream.makeStream(of: GPSDReport.self)
    }

    public var label: String { path == "-" ? "JSON lines on standard input" : "JSON lines from \(path)" }

    public func start() {
        let thread = Thread { self.readLoop() }
        thread.name = "geofence.json-source"
        thread.start()
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

    private func readLoop() {
        defer { continuation.finish() }
        while !isStopped {
            let descriptor: Int32
            if path == "-" {
                descriptor = 0
            } else {
                descriptor = open(path, O_RDONLY | O_CLOEXEC)
                guard descriptor >= 0 else {
                    send(.gpsdError("cannot open \(path): \(String(cString: strerror(errno)))"))
                    return
                }
            }
            send(.connected)
            var reader = LineReader(fd: descriptor)
            // Lines already read go over in one batch (up to `maximumBatch`): one hand-over to the engine per batch.
            var batch: [Fix] = []
            while !isStopped, let line = try? reader.next() {
                switch GPSDJSON.decode(line, defaultSubject: "fleet") {
                case .tpv(let fix): batch.append(fix)
                case .other: break
                case .malformed:
                    lock.withLock { skipped += 1 }
                }
                if !batch.isEmpty && (batch.count >= maximumBatch || !reader.hasBufferedLine) {
                    send(.fixes(batch))
                    batch.removeAll(keepingCapacity: true)
                }
            }
            if !batch.isEmpty { send(.fixes(batch)) }
            var info = stat()
            let isFIFO = fstat(descriptor, &info) == 0 && (info.st_mode & S_IFMT) == S_IFIFO && path != "-"
            if descriptor > 2 { close(descriptor) }
            guard isFIFO else { return }
        }
    }
}
