import GeofenceSystem

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Musl)
    @preconcurrency import Musl
#endif

/// A TCP connect to gpsd's address made before `gps_open()`, for two things libgps can't give:
///
/// - a reason: `gps_open()` overwrites `errno` with its own code (`NL_NOCONNECT`, "can't connect
///   to host/port pair"), so "connection refused" and "no route to host" look the same;
/// - a bound: libgps connects with a blocking `connect()`, which can hang for minutes on an
///   address that drops packets. Here the connect is non-blocking, waited for in short slices
///   (so a stop request is noticed), and given up after a timeout.
///
/// Name resolution (`getaddrinfo`) still blocks; for names served from /etc/hosts or IP
/// literals that is immediate.
enum ConnectProbe {
    enum Failure: Error, Equatable {
        /// The name did not resolve; the resolver's reason.
        case hostNotFound(String)
        /// Every address refused or failed; the last address's error.
        case unreachable(SystemError)
        case timedOut
        case stopped
    }

    static func probe(
        host: String,
        port: UInt16,
        timeout: Double,
        now: () -> Double,
        shouldStop: () -> Bool
    ) -> Failure? {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            let reason =
                status == EAI_SYSTEM
                ? SystemError(call: "getaddrinfo", errno: errno).reason
                : String(cString: gai_strerror(status))
            return .hostNotFound(reason.prefix(1).lowercased() + reason.dropFirst())
        }
        defer { freeaddrinfo(list) }

        let deadline = now() + timeout
        var failure = Failure.timedOut
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let address = entry {
            entry = address.pointee.ai_next
            switch connect(address.pointee, deadline: deadline, now: now, shouldStop: shouldStop) {
            case nil: return nil
            case .stopped: return .stopped
            case let other?: failure = other
            }
        }
        return failure
    }

    private static func connect(
        _ address: addrinfo,
        deadline: Double,
        now: () -> Double,
        shouldStop: () -> Bool
    ) -> Failure? {
        let socketType = Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue)
        let descriptor: Int32
        do throws(SystemError) {
            descriptor = try System.call("socket") { socket(address.ai_family, socketType, address.ai_protocol) }
        } catch {
            return .unreachable(error)
        }
        defer { close(descriptor) }

        do throws(SystemError) {
            try System.call("connect") { Glibc.connect(descriptor, address.ai_addr, address.ai_addrlen) }
            return nil
        } catch  where error.errno == EINPROGRESS {
            // Connecting in the background; wait below.
        } catch {
            return .unreachable(error)
        }

        while true {
            if shouldStop() { return .stopped }
            let remaining = deadline - now()
            if remaining <= 0 { return .timedOut }
            do throws(SystemError) {
                let events = try System.poll(descriptor, events: Int16(POLLOUT), timeout: min(remaining, 0.1))
                if events == 0 { continue }
                var error: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                try System.call("getsockopt") { getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length) }
                return error == 0 ? nil : .unreachable(SystemError(call: "connect", errno: error))
            } catch {
                return .unreachable(error)
            }
        }
    }
}
