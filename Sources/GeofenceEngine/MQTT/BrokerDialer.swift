import GeofenceSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The TCP connection `NativeMQTTClient` starts each session with: every address of the broker's name in
/// turn, non-blocking, within one deadline, and given up at once when the client stops (its wake-up
/// descriptor becomes readable and `stopped` says so). Runs on the client's I/O thread.
enum BrokerDialer {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// A connected, non-blocking, close-on-exec socket with `TCP_NODELAY`, or why there is none.
    static func dial(
        host: String, port: Int32, timeout: Double, wake: Int32, stopped: () -> Bool
    ) -> Result<Int32, Failure> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let looked = getaddrinfo(host, String(port), &hints, &found)
        guard looked == 0, let found else {
            return .failure(Failure(description: String(cString: gai_strerror(looked))))
        }
        defer { freeaddrinfo(found) }
        var why = "no address for \(host)"
        let deadline = MonotonicClock.seconds() + timeout
        var candidate: UnsafeMutablePointer<addrinfo>? = found
        while let address = candidate {
            candidate = address.pointee.ai_next
            let fd = socket(
                address.pointee.ai_family,
                Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
                    | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else {
                why = String(cString: strerror(errno))
                continue
            }
            var on: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
            // Not retried on EINTR: the connection then goes on in the background, as with EINPROGRESS.
            if connect(fd, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 { return .success(fd) }
            guard errno == EINPROGRESS || errno == EINTR else {
                why = String(cString: strerror(errno))
                close(fd)
                continue
            }
            // Connecting: until writable, the deadline, or a stop.
            var result: Int32 = -1
            while true {
                if stopped() {
                    close(fd)
                    return .failure(Failure(description: "stopped while connecting"))
                }
                let left = deadline - MonotonicClock.seconds()
                if left <= 0 {
                    why = "no answer to the connection within \(Int(timeout)) s"
                    break
                }
                var fds = [
                    pollfd(fd: fd, events: Int16(POLLOUT), revents: 0),
                    pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
                ]
                // A poll that fails is a wait cut short: the loop looks at the stop and the deadline again.
                _ = try? System.poll(&fds, milliseconds: Int32(min(left, 1) * 1000) + 1)
                if fds[1].revents != 0 { drain(wake) }
                if fds[0].revents != 0 {
                    var error: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
                    result = error
                    break
                }
            }
            if result == 0 { return .success(fd) }
            if result > 0 { why = String(cString: strerror(result)) }
            close(fd)
        }
        return .failure(Failure(description: why))
    }

    /// Reads a non-blocking descriptor empty (the wake-up socket pair: how many wake-ups came is no matter).
    static func drain(_ fd: Int32) {
        var bytes = [UInt8](repeating: 0, count: 64)
        while System.retryingEINTR({ read(fd, &bytes, bytes.count) }) > 0 {}
    }
}
