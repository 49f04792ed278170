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
    public private(set) var oversizedLines = 0
    private var buffer: [UInt8]
    private var start = 0
    private var end = 0
    private var skipping = false
    private var eof = false

    public init(fd: Int32, maximumLength: Int = 64 * 1024) {
        self.fd = fd
        self.maximumLength = maximumLength
        // Starts small and grows only as long lines need: a reader for 64 MiB lines costs 64 KiB until one comes.
        buffer = [UInt8](repeating: 0, count: 65_536)
    }

    /// Whether a whole line is already buffered (so `next()` will not block).
    public var hasBufferedLine: Bool {
        buffer[start..<end].contains(UInt8(ascii: "\n"))
    }

    /// The next line without its newline, or nil at end of input. A final line without a newline counts.
    public mutating func next() throws -> ArraySlice<UInt8>? {
        while true {
            if let newline = buffer[start..<end].firstIndex(of: UInt8(ascii: "\n")) {
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
            let count = System.retryingEINTR {
                buffer.withUnsafeMutableBytes { raw in Glibc.read(fd, raw.baseAddress! + end, raw.count - end) }
            }
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
}
