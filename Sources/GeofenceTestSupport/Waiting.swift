import Foundation

/// Waiting in tests for something they can observe (a socket answering, a log line, an event, a file, a status
/// field) rather than sleeping for a time and hoping it was long enough: the wait ends as soon as the condition
/// holds, and a slow machine only makes it longer, never wrong.
///
/// A test sleeps only where nothing can be observed, such as to show that something does *not* happen within
/// a time; it then says so in a comment.
package enum Wait {
    /// How often a condition is asked again: short enough that no test waits noticeably longer than it must.
    package static let interval: Duration = .milliseconds(10)

    /// Asks `condition` until it holds or `timeout` seconds have passed, without holding a thread of the
    /// cooperative pool; whether it held (asked once more at the end, so a condition that came true just then
    /// counts).
    package static func until(
        timeout: Double, every pause: Duration = interval, _ condition: () async throws -> Bool
    ) async rethrows -> Bool {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try? await Task.sleep(for: pause)
        }
        return try await condition()
    }

    /// The first value `probe` gives (non-nil) within `timeout` seconds, or nil.
    package static func value<T>(
        timeout: Double, every pause: Duration = interval, _ probe: () async throws -> T?
    ) async rethrows -> T? {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while ContinuousClock.now < deadline {
            if let value = try await probe() { return value }
            try? await Task.sleep(for: pause)
        }
        return try await probe()
    }

    /// `until`, blocking the calling thread: for synchronous tests and for threads of their own.
    package static func blocking(
        timeout: Double, every pause: Duration = interval, _ condition: () throws -> Bool
    ) rethrows -> Bool {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while ContinuousClock.now < deadline {
            if try condition() { return true }
            let (seconds, attoseconds) = pause.components
            Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) / 1e18)
        }
        return try condition()
    }
}
