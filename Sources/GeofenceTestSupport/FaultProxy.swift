import Foundation

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// A TCP proxy on a free loopback port that a test can cut off, as a network cut between a client and its
/// server: point the client at `address` instead of the server (and keep it from going around, for NATS with
/// `ignoreDiscoveredServers`).
///
/// - `cut()`: every connection through it is closed, and new ones are blackholed: accepted, but nothing is
///   forwarded and nothing answered, which is how a cut network looks to a client (its connect and requests
///   time out; no error comes back).
/// - `heal()`: blackholed connections are closed and new ones are forwarded again.
/// - `stop()`: closes everything and ends its threads (which hold the proxy until then: call it).
package final class FaultProxy: @unchecked Sendable {
    // @unchecked: every mutable field is used under `condition`.
    /// The port it listens on (127.0.0.1).
    package let port: UInt16
    private let targetPort: UInt16
    private let listener: Int32
    private let condition = NSCondition()
    private var isCut = false
    private var stopped = false
    /// Forwarding connections (client, server) alive now, and blackholed clients.
    private var forwarding: [Int: (Int32, Int32)] = [:]
    private var blackholed: [Int32] = []
    private var nextID = 0
    private var threads = 0

    /// A proxy to `127.0.0.1:targetPort`, listening on a free loopback port.
    package init(targetPort: UInt16) throws {
        self.targetPort = targetPort
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure.system("socket", errno) }
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            let error = errno
            close(fd)
            throw Failure.system("bind/listen", error)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = UInt16(bigEndian: address.sin_port)
        start { $0.acceptLoop() }
    }

    package enum Failure: Error, CustomStringConvertible {
        case system(String, Int32)
        package var description: String {
            switch self {
            case .system(let call, let error): "fault proxy: \(call): \(String(cString: strerror(error)))"
            }
        }
    }

    /// `127.0.0.1:PORT`.
    package var address: String { "127.0.0.1:\(port)" }

    /// Closes every connection and blackholes new ones until `heal()`. Returns once the old ones are closed.
    package func cut() {
        condition.lock()
        isCut = true
        for (client, server) in forwarding.values {
            shutdown(client, Int32(SHUT_RDWR))
            shutdown(server, Int32(SHUT_RDWR))
        }
        while !forwarding.isEmpty { condition.wait() }
        condition.unlock()
    }

    /// Forwards new connections again; those accepted while cut are closed (their clients see the end and
    /// connect again).
    package func heal() {
        condition.lock()
        isCut = false
        for fd in blackholed { close(fd) }
        blackholed = []
        condition.unlock()
    }

    /// Closes everything and waits for its threads.
    package func stop() {
        condition.lock()
        if !stopped {
            stopped = true
            shutdown(listener, Int32(SHUT_RDWR))
            for (client, server) in forwarding.values {
                shutdown(client, Int32(SHUT_RDWR))
                shutdown(server, Int32(SHUT_RDWR))
            }
            for fd in blackholed { close(fd) }
            blackholed = []
        }
        while threads > 0 { condition.wait() }
        condition.unlock()
    }

    private func start(_ body: @escaping @Sendable (FaultProxy) -> Void) {
        condition.lock()
        threads += 1
        condition.unlock()
        Thread { [self] in
            body(self)
            condition.lock()
            threads -= 1
            condition.broadcast()
            condition.unlock()
        }.start()
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    private func acceptLoop() {
        defer { close(listener) }
        while true {
            var ready = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            let polled = poll(&ready, 1, 100)
            condition.lock()
            let done = stopped
            condition.unlock()
            if done { return }
            guard polled > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            condition.lock()
            if isCut {
                blackholed.append(client)
                condition.unlock()
                continue
            }
            condition.unlock()
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var target = Self.loopback(port: targetPort)
            let connected =
                server >= 0
                && withUnsafePointer(to: &target) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                } == 0
            condition.lock()
            guard connected, !isCut, !stopped else {
                condition.unlock()
                close(client)
                if server >= 0 { close(server) }
                continue
            }
            let id = nextID
            nextID += 1
            forwarding[id] = (client, server)
            condition.unlock()
            start { $0.pump(id: id, client: client, server: server) }
        }
    }

    /// Copies bytes both ways until either side ends or the proxy is cut; then closes both.
    private func pump(id: Int, client: Int32, server: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        var fds = [
            pollfd(fd: client, events: Int16(POLLIN), revents: 0),
            pollfd(fd: server, events: Int16(POLLIN), revents: 0),
        ]
        loop: while true {
            let polled = poll(&fds, 2, 100)
            if polled < 0, errno != EINTR { break }
            condition.lock()
            let end = isCut || stopped
            condition.unlock()
            if end { break }
            for (index, entry) in fds.enumerated() where entry.revents != 0 {
                let from = index == 0 ? client : server
                let to = index == 0 ? server : client
                let count = read(from, &buffer, buffer.count)
                guard count > 0 else { break loop }
                var sent = 0
                while sent < count {
                    let written = buffer.withUnsafeBytes { write(to, $0.baseAddress! + sent, count - sent) }
                    if written < 0, errno == EINTR { continue }
                    guard written > 0 else { break loop }
                    sent += written
                }
            }
        }
        condition.lock()
        close(client)
        close(server)
        forwarding[id] = nil
        condition.broadcast()
        condition.unlock()
    }
}
