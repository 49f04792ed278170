import Foundation
import GeofenceSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Reads newline-separated lines from a file descriptor as they arrive (a file, a pipe, a FIFO, a socket).
///
/// Lines longer than `maximumLength` are skipped whole, counted and said (`nextItem()`), so a hostile or broken
/// producer can never make the reader hold more than one buffer and one maximum line, nor make a line vanish.
package struct LineReader {
    package let fd: Int32
    package let maximumLength: Int
    /// A descriptor that, once readable, ends the wait for input (a stop pipe); -1: none, reads block.
    package let interrupt: Int32
    package private(set) var oversizedLines = 0
    private var buffer: [UInt8]
    private var start = 0
    private var end = 0
    private var skipping = false
    /// Bytes of the over-long line being skipped that were dropped so far.
    private var skipped = 0
    private var eof = false
    /// Where the first newline at or after `start` was found, while that is still so (below `start`: not known).
    /// `hasBufferedLine` looks for the line after each one, and `nextItem()` then found it a second time.
    private var knownNewline = -1

    /// Thrown by `next()` when `interrupt` became readable while it waited for input.
    package struct Interrupted: Error {}

    /// With an `interrupt` descriptor, `next()` waits for input in `poll` on both, and throws `Interrupted` as
    /// soon as the interrupt is readable: a reader of an idle FIFO can be stopped. `fd` may then be
    /// non-blocking (a FIFO opened with `O_NONBLOCK`, so that the open itself never waits for a writer).
    package init(fd: Int32, maximumLength: Int = 64 * 1024, interrupt: Int32 = -1) {
        self.fd = fd
        self.maximumLength = maximumLength
        self.interrupt = interrupt
        // Starts small and grows only as long lines need: a reader for 64 MiB lines costs 64 KiB until one comes.
        buffer = [UInt8](repeating: 0, count: 65_536)
    }

    /// Whether a whole line is already buffered (so `next()` will not block).
    package var hasBufferedLine: Bool {
        mutating get { newline() != nil }
    }

    /// The position of the first newline buffered, if any (`memchr`: the fleet source looks for the next line
    /// after each one, and a byte-at-a-time search cost more than a tenth of its time per line).
    private mutating func newline() -> Int? {
        guard start < end else { return nil }
        if knownNewline >= start { return knownNewline }
        let found: Int? = buffer.withUnsafeBytes { raw in
            guard let base = raw.baseAddress, let found = memchr(base + start, 0x0A, end - start) else { return nil }
            return UnsafeRawPointer(found) - base
        }
        if let found { knownNewline = found }
        return found
    }

    /// What `nextItem()` read: a line, or the length of a line too long to keep (skipped, not held).
    package enum Item {
        /// A line without its newline (and without a `\r` before it).
        case line(ArraySlice<UInt8>)
        /// A line longer than `maximumLength`, skipped whole: its length in bytes without the newline.
        case oversized(bytes: Int)
    }

    /// The next line without its newline, or nil at end of input. A final line without a newline counts.
    /// Over-long lines are passed over (counted in `oversizedLines`); `nextItem()` says each of them.
    package mutating func next() throws -> ArraySlice<UInt8>? {
        while let item = try nextItem() {
            if case .line(let line) = item { return line }
        }
        return nil
    }

    /// The next line, or the length of the next line too long to keep; nil at end of input.
    ///
    /// An over-long line is skipped as it arrives: at most one buffer of about `maximumLength` is held
    /// whatever its length (a line of 200 MB costs what one of 70 KB does), and it is said once its end
    /// (its newline, or the end of input) is read, so every line is counted by what became of it.
    package mutating func nextItem() throws -> Item? {
        while true {
            if let newline = newline() {
                let line = buffer[start..<newline]
                start = newline + 1
                if skipping {
                    skipping = false
                    return .oversized(bytes: skipped + line.count)
                }
                return .line(line.last == UInt8(ascii: "\r") ? line.dropLast() : line)
            }
            if eof {
                if skipping {
                    skipping = false
                    let bytes = skipped + (end - start)
                    start = end
                    return .oversized(bytes: bytes)
                }
                guard start < end else { return nil }
                let line = buffer[start..<end]
                start = end
                return .line(line)
            }
            if end - start > maximumLength {
                // Too long: drop what we have and everything up to the next newline, counting its bytes.
                if !skipping {
                    oversizedLines += 1
                    skipped = 0
                }
                skipping = true
                skipped += end - start
                start = 0
                end = 0
                knownNewline = -1
            }
            if start > 0 && end == buffer.count || start == end {
                buffer.replaceSubrange(0..<(end - start), with: buffer[start..<end])
                end -= start
                start = 0
                knownNewline = -1
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
