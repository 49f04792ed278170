import Foundation
import GeofenceCore
import GeofenceSystem
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Where a command's output goes: stdout for data, stderr for messages and progress.
///
/// Commands write through this, never to the process's streams directly, so tests can run them in-process
/// and read what they printed.
package final class Console: @unchecked Sendable {
    // @unchecked: the closures are set once at creation and the standard ones only call thread-safe stdio;
    // a capturing console guards its buffers with a lock.
    private let writeOut: @Sendable (String) -> Void
    private let writeErr: @Sendable (String) -> Void
    /// Whether stderr is a terminal (progress bars are drawn only then).
    package let stderrIsTerminal: Bool
    private let stdoutRefused: Flag?

    package init(
        out: @escaping @Sendable (String) -> Void, err: @escaping @Sendable (String) -> Void,
        stderrIsTerminal: Bool = false
    ) {
        writeOut = out
        writeErr = err
        self.stderrIsTerminal = stderrIsTerminal
        stdoutRefused = nil
    }

    private init(standardWithTerminal stderrIsTerminal: Bool) {
        let refused = Flag()
        stdoutRefused = refused
        writeOut = { if !Console.writeAll(1, $0) { refused.value.store(true, ordering: .relaxed) } }
        writeErr = { _ = Console.writeAll(2, $0) }
        self.stderrIsTerminal = stderrIsTerminal
    }

    /// The process's stdout and stderr.
    package static func standard() -> Console {
        Console(standardWithTerminal: isatty(2) == 1)
    }

    /// Whether a write to stdout failed: its reader went away (`geofence watch | head -n 1`), so a command
    /// that streams can stop. Always false for a console made of closures.
    package var outputClosed: Bool { stdoutRefused?.value.load(ordering: .relaxed) ?? false }

    private final class Flag: Sendable {
        let value = Atomic(false)
    }

    /// Writes all of `text` to a descriptor, unbuffered, so every line is out before the next step (a
    /// `replay` killed mid-stream has printed exactly what it stored). A closed pipe ends the writing;
    /// returns false then.
    private static func writeAll(_ fd: Int32, _ text: String) -> Bool {
        (try? System.writeAll(fd, Array(text.utf8))) != nil
    }

    // Everything written goes through `PrintableText.escaped`, the one escaping of outside text: a region name,
    // a vehicle, a hook's output or an error quoting its input never writes ESC, CR or U+202E to an operator's
    // terminal. Line breaks and tabs stay (blocks and tables); JSON output is unchanged in meaning, since the
    // escapes are JSON's own.

    /// Writes `text` and a newline to stdout.
    package func print(_ text: String) { writeOut(PrintableText.escaped(text, keepingLineBreaks: true) + "\n") }
    /// Writes `text` to stdout.
    package func write(_ text: String) { writeOut(PrintableText.escaped(text, keepingLineBreaks: true)) }
    /// Writes `text` and a newline to stderr.
    package func message(_ text: String) { writeErr(PrintableText.escaped(text, keepingLineBreaks: true) + "\n") }
    /// Writes `text` to stderr.
    package func writeError(_ text: String) { writeErr(PrintableText.escaped(text, keepingLineBreaks: true)) }
    /// Redraws a progress line on stderr: a carriage return, then `text` escaped.
    package func progress(_ text: String) { writeErr("\r" + PrintableText.escaped(text)) }
}

/// A console that keeps what was written, for tests.
package final class CapturedOutput: Sendable {
    private let text = Mutex((out: "", err: ""))

    package init() {}

    package var stdout: String { text.withLock { $0.out } }
    package var stderr: String { text.withLock { $0.err } }

    package var console: Console {
        Console(
            out: { [self] written in text.withLock { $0.out += written } },
            err: { [self] written in text.withLock { $0.err += written } })
    }
}
