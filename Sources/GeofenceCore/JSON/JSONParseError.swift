/// Why and where `JSON.parse` rejected its input.
///
/// Positions point at the first byte that made the input invalid (for an unterminated string
/// or a duplicate key: where that string or key starts), so a user can go straight to it.
package struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Zero-based byte offset into the input.
    package var offset: Int
    /// One-based line number; lines end at `\n`.
    package var line: Int
    /// One-based column, counted in Unicode scalars (not bytes) from the start of the line.
    package var column: Int
    /// What is wrong, e.g. `duplicate key "radius"` or `number out of range`.
    package var message: String

    package init(offset: Int, line: Int, column: Int, message: String) {
        self.offset = offset
        self.line = line
        self.column = column
        self.message = message
    }

    /// The error at `offset` in `bytes`, with line and column worked out from the bytes before it.
    ///
    /// Only called on failure, so the O(offset) scan costs nothing on the success path.
    init(_ message: String, at offset: Int, in bytes: UnsafeBufferPointer<UInt8>) {
        var line = 1
        var column = 1
        for byte in bytes.prefix(offset) {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                // Continuation bytes belong to the scalar their lead byte already counted.
                column += 1
            }
        }
        self.init(offset: offset, line: line, column: column, message: message)
    }

    /// `line L, column C (byte offset N): message`.
    package var description: String {
        "line \(line), column \(column) (byte offset \(offset)): \(message)"
    }
}
