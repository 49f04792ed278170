#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Musl)
    @preconcurrency import Musl
#endif

/// A failed system call: which call, and the `errno` it left, read at once.
package struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    package var call: String
    package var errno: Int32

    package init(call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    /// The C library's text for the error, starting in lower case ("connection refused").
    package var reason: String {
        let text = String(cString: strerror(errno))
        return text.prefix(1).lowercased() + text.dropFirst()
    }

    package var description: String { "\(call): \(reason)" }
}

/// Every system call goes through here: it retries `EINTR` and turns `-1` into a typed error.
package enum System {
    @discardableResult
    package static func call<Result: FixedWidthInteger>(
        _ name: String,
        _ body: () -> Result
    ) throws(SystemError) -> Result {
        while true {
            let result = body()
            if result != -1 { return result }
            let error = Glibc.errno
            if error == EINTR { continue }
            throw SystemError(call: name, errno: error)
        }
    }

    /// `body` again for as long as it fails with `EINTR`; its last result, with `errno` as it left it, for
    /// callers that tell other failures apart themselves (`EAGAIN`, `EWOULDBLOCK`).
    @discardableResult
    package static func retryingEINTR<Result: FixedWidthInteger>(_ body: () -> Result) -> Result {
        while true {
            let result = body()
            if result == -1 && Glibc.errno == EINTR { continue }
            return result
        }
    }

    /// Writes all of `bytes` with `write` (which is given what is left and returns what it took, as
    /// `write(2)` and `send(2)` do), however many calls it takes. A call that takes nothing ends it: the other
    /// end takes no more (`EPIPE`).
    package static func writeAll(
        _ bytes: [UInt8], call name: String = "write", _ write: (UnsafeRawBufferPointer) -> Int
    ) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            let n = try call(name) {
                bytes.withUnsafeBytes { write(UnsafeRawBufferPointer(rebasing: $0[offset...])) }
            }
            guard n > 0 else { throw SystemError(call: name, errno: EPIPE) }
            offset += n
        }
    }

    /// Writes all of `bytes` to `descriptor` (`write(2)`).
    package static func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) throws(SystemError) {
        try writeAll(bytes) { Glibc.write(descriptor, $0.baseAddress, $0.count) }
    }

    /// Marks a descriptor close-on-exec, so hook processes the engine spawns never inherit it
    /// (libgps opens its socket without `SOCK_CLOEXEC`).
    package static func setCloseOnExec(_ descriptor: Int32) throws(SystemError) {
        let flags = try call("fcntl(F_GETFD)") { fcntl(descriptor, F_GETFD) }
        try call("fcntl(F_SETFD)") { fcntl(descriptor, F_SETFD, flags | FD_CLOEXEC) }
    }

    /// Waits up to `timeout` seconds for `events` on `descriptor`; returns the events that
    /// occurred (empty on timeout).
    package static func poll(_ descriptor: Int32, events: Int16, timeout: Double) throws(SystemError) -> Int16 {
        var entry = pollfd(fd: descriptor, events: events, revents: 0)
        let milliseconds = Int32(max(0, min(timeout, 3600)) * 1000)
        let ready = try call("poll") { Glibc.poll(&entry, 1, milliseconds) }
        return ready == 0 ? 0 : entry.revents
    }

    /// Waits up to `milliseconds` (-1: without end) for the events of `entries`; returns how many have some
    /// (0 on timeout). An interrupted wait (`EINTR`) also returns 0, as a timeout would, rather than waiting
    /// the whole time again: the caller's loop looks at its deadlines and comes back with what is left.
    package static func poll(_ entries: inout [pollfd], milliseconds: Int32) throws(SystemError) -> Int32 {
        let ready = entries.withUnsafeMutableBufferPointer {
            Glibc.poll($0.baseAddress, nfds_t($0.count), milliseconds)
        }
        if ready >= 0 { return ready }
        let error = Glibc.errno
        if error == EINTR { return 0 }
        throw SystemError(call: "poll", errno: error)
    }
}
