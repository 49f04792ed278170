#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Musl)
    @preconcurrency import Musl
#endif

/// A failed system call: which call, and the `errno` it left, read at once.
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    public var call: String
    public var errno: Int32

    public init(call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    /// The C library's text for the error, starting in lower case ("connection refused").
    public var reason: String {
        let text = String(cString: strerror(errno))
        return text.prefix(1).lowercased() + text.dropFirst()
    }

    public var description: String { "\(call): \(reason)" }
}

/// Every system call goes through here: it retries `EINTR` and turns `-1` into a typed error.
enum System {
    @discardableResult
    static func call<Result: FixedWidthInteger>(
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

    /// Marks a descriptor close-on-exec, so hook processes the engine spawns never inherit it
    /// (libgps opens its socket without `SOCK_CLOEXEC`).
    static func setCloseOnExec(_ descriptor: Int32) throws(SystemError) {
        let flags = try call("fcntl(F_GETFD)") { fcntl(descriptor, F_GETFD) }
        try call("fcntl(F_SETFD)") { fcntl(descriptor, F_SETFD, flags | FD_CLOEXEC) }
    }

    /// Waits up to `timeout` seconds for `events` on `descriptor`; returns the events that
    /// occurred (empty on timeout).
    static func poll(_ descriptor: Int32, events: Int16, timeout: Double) throws(SystemError) -> Int16 {
        var entry = pollfd(fd: descriptor, events: events, revents: 0)
        let milliseconds = Int32(max(0, min(timeout, 3600)) * 1000)
        let ready = try call("poll") { Glibc.poll(&entry, 1, milliseconds) }
        return ready == 0 ? 0 : entry.revents
    }
}
