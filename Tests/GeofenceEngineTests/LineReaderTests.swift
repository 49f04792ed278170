import Foundation
import GeofenceEngine
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `LineReader` remembers where it found the next newline (`hasBufferedLine` looks for it after each line, and
/// `nextItem()` takes it from there): the memory must never outlive a move of the buffer.
@Suite struct LineReaderTests {
    @Test("lines of every length across refills and moves of the buffer, asked for in between: each whole, in order")
    func linesAcrossRefills() throws {
        let dir = try TemporaryDirectory("geofence-line-reader")
        defer { dir.remove() }
        var random = SeededGenerator(seed: 7)
        // Short lines and long ones (past the first buffer of 64 KiB), some ending in "\r\n", some empty.
        var lines: [String] = []
        var text = ""
        for number in 0..<3000 {
            let length =
                Int.random(in: 0..<10, using: &random) == 0
                ? Int.random(in: 20_000..<90_000, using: &random) : Int.random(in: 0..<300, using: &random)
            let fill = Character(UnicodeScalar(UInt8(ascii: "a") + UInt8(number % 26)))
            let line = "\(number):" + String(repeating: fill, count: length)
            lines.append(line)
            text += line + (number % 7 == 0 ? "\r\n" : "\n")
        }
        let path = dir.file("lines")
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        #expect(fd >= 0)
        defer { close(fd) }

        var reader = LineReader(fd: fd, maximumLength: 200_000)
        var read: [String] = []
        var asked = 0
        while let line = try reader.next() {
            read.append(String(decoding: line, as: UTF8.self))
            // Asked once, twice or not at all between lines, as the sources and `replay` ask.
            for _ in 0..<(read.count % 3) where reader.hasBufferedLine { asked += 1 }
        }
        #expect(read.count == lines.count)
        let firstDifference = zip(read, lines).enumerated().first { $1.0 != $1.1 }?.offset
        #expect(read == lines, "first difference at line \(firstDifference ?? -1)")
        #expect(asked > 1000)
        #expect(reader.oversizedLines == 0)
    }

    @Test("a line too long is skipped and counted while the lines around it are read whole")
    func oversizedBetweenLines() throws {
        let dir = try TemporaryDirectory("geofence-line-reader")
        defer { dir.remove() }
        let lines = ["first", String(repeating: "x", count: 150_000), "third", "", "fifth"]
        let path = dir.file("lines")
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: false, encoding: .utf8)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        #expect(fd >= 0)
        defer { close(fd) }
        var reader = LineReader(fd: fd, maximumLength: 65_536)
        var read: [String] = []
        while let line = try reader.next() {
            read.append(String(decoding: line, as: UTF8.self))
            _ = reader.hasBufferedLine
        }
        #expect(read == ["first", "third", "", "fifth"])
        #expect(reader.oversizedLines == 1)
    }
}
