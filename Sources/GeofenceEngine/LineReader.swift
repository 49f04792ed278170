import Foundation
import GeofenceSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Reads newline-separated lines from a file descriptor as they arrive (a file, a pipe, a FIFO, a socket).
///
/// Lines longer than `maximumLength` are skipped whole and counted, so a hostile or broken producer can
/// never make the reader hold more than one buffer and one maximum line.
public struct LineReader {
    public let fd: Int32
    public let maximumLength: Int
    /// A descriptor that, once readable, ends the wait for input (a stop pipe); -1: none, reads block.
    public let interrupt: Int32
    public private(set) var oversizedLines = 0
    private var buffer: [UInt8]
    private var start = 0
    private var end = 0
    private var skipping = false
    private var eof = false

    /// Thrown by `next()` when `interrupt` became readable while it waited for input.
    public struct Interrupted: Error {}

    /// With an `interrupt` descriptor, `next()` waits for input in `poll` on both, and throws `Interrupted` as
    /// soon as the interrupt is readable: a reader of an idle FIFO can be stopped. `fd` may then be
    /// non-blocking (a FIFO opened with `O_NONBLOCK`, so that the open itself never waits for a writer).
    public init(fd: Int32, maximumLength: Int = 64 * 1024, interrupt: Int32 = -1) {
        self.fd = fd
        self.maximumLength = maximumLength
        self.interrupt = interrupt
        // Starts small and grows only as long lines need: a reader for 64 MiB lines costs 64 KiB until one comes.
        buffer = [UInt8](repeating: 0, count: 65_536)
    }

    /// Whether a whole line is already buffered (so `next()` will not block).
    public var hasBufferedLine: Bool {
        newline() != nil
    }

    /// The position of the first newline buffered, if any (`memchr`: the fleet source looks for the next line
    /// after each one, and a byte-at-a-time search cost more than a tenth of its time per line).
    private func newline() -> Int? {
        guard start < end else { return nil }
        return buffer.withUnsafeBytes { raw in
            guard let base = raw.baseAddress, let found = memchr(base + start, 0x0A, end - start) else { return nil }
            return UnsafeRawPointer(found) - base
        }
    }

    /// The next line without its newline, or nil at end of input. A final line without a newline counts.
    public mutating func next() throws -> ArraySlice<UInt8>? {
        while true {
            if let newline = newline() {
                let line = buffer[start..<newline]
                start = newline + 1
                if skipping {
                    skipping = false
                    continue
                }
                return line.last == UInt8(ascii: "\r") ? line.dropLast() : line
            }
            if eof {
                guard start < end, !skipping else { return nil }
                let line = buffer[start..<end]
                start = end
                return line
            }
            if end - start > maximumLength {
                // Too long: drop what we have and everything up to the next newline.
                if !skipping { oversizedLines += 1 }
                skipping = true
                start = 0
                end = 0
            }
            if start > 0 && end == buffer.count || start == end {
                buffer.replaceSubrange(0..<(end - start), with: buffer[start..<end])
                end -= start
                start = 0
            }
            if end == buffer.count {
                buffer.append(contentsOf: repeatElement(0, count: min(buffer.count, maximumLength + 65_536)))
            }
            if interrupt >= 0 { try waitForInput() }
            let count = System.retryingEINTR {
                buffer.withUnsafeMutableBytes { raw in Glibc.read(fd, raw.baseAddress! + end, raw.count - end) }
            }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && interrupt >= 0 { continue }
            if count < 0 {
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
            if count == 0 {
                eof = true
            } else {
                end += count
            }
        }
    }

    /// Until `fd` has input (or its end) or `interrupt` is readable (then throws `Interrupted`).
    private func waitForInput() throws {
        var entries = [
            pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: interrupt, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            if try System.poll(&entries, milliseconds: -1) > 0 {
                if entries[1].revents != 0 { throw Interrupted() }
                if entries[0].revents != 0 { return }
            }
        }
    }
}
