import Foundation
import GeofenceCore
import GeofenceSystem
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Why the control socket could not be set up.
package struct ControlSocketError: Error, Sendable, CustomStringConvertible {
    package var description: String
}

/// How far a client is trusted when it connects, for the connection limits.
package enum ControlTrust: Sendable {
    /// Root or the engine's own user.
    case privileged
    /// A user whose effective status is `authorized`.
    case authorized
    /// Anyone else: it may ask `status` and `permission.request`, and holds no more than its share.
    case other
}

/// The control socket: JSON lines over a Unix stream socket, every request authorized by the peer's uid.
///
/// A thread accepts; each connection gets a thread of its own (reads block; a thread per client keeps
/// one slow or silent client from holding up the others). No client can hold the socket: a request must be
/// complete within `requestTimeout` of its first byte (however slowly the bytes come), a connection idle
/// between requests is closed after `idleTimeout`, a user other than root and the engine's own holds at
/// most `maximumPerUser` connections, and the last `reserved` of the `maximumConnections` are kept for
/// authorized users. Requests over 1 MiB, malformed requests and silent clients cost one thread for a while
/// and nothing else; a client turned away is answered `busy` (exit 75).
package final class ControlServer: @unchecked Sendable {
    // @unchecked: `listener` is set in start() before the accept thread exists; the settings are set before
    // start(); the rest is immutable, atomic or behind a mutex.
    package typealias Handler = @Sendable (ControlRequest, ControlConnection) -> ControlResponse?

    package let path: String
    /// Seconds a connection may wait between requests.
    package var idleTimeout: Double = 60
    /// Seconds from the first byte of a request to its newline.
    package var requestTimeout: Double = 10
    package var maximumConnections = 512
    /// Connections one user (not root, not the engine's own) may hold at once.
    package var maximumPerUser = 32
    /// Connections only privileged and authorized users may take, out of `maximumConnections`.
    package var reserved = 64
    /// How far a uid is trusted (asked only for uids that are not root or the engine's own, and only when
    /// the reserve is at stake).
    package var trust: @Sendable (UInt32) -> ControlTrust = { $0 == 0 || $0 == getuid() ? .privileged : .other }
    private let handler: Handler
    private let logger: Logger
    private var listener: Int32 = -1
    private let stopping = Atomic(false)
    private let active = Atomic(0)
    private let acceptExited = Atomic(false)
    /// The connections being served, so that `stop()` can end them.
    private let clients = Mutex<Set<Int32>>([])
    /// Connections held per uid.
    private let perUser = Mutex<[UInt32: Int]>([:])

    package init(path: String, logger: Logger, handler: @escaping Handler) {
        self.path = path
        self.logger = logger
        self.handler = handler
    }

    /// Binds the socket and starts accepting. A stale socket left by a dead daemon is replaced; anything
    /// else at the path (a regular file, a directory, a live daemon's socket) is left alone, with an error.
    package func start() throws {
        try ControlServer.checkDirectory(of: path)
        try prepare(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ControlSocketError(description: "socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(fd)
            throw ControlSocketError(description: "control socket path is too long: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        // Anyone may connect (mode 0666); what they may do is decided per request from their uid. The mode is
        // never set by path after `bind` (a path can be swapped for a symbolic link between the two calls, and
        // chmod follows it): Linux creates the socket's file with the socket's own mode, set here with
        // `fchmod`, less the umask, and the bind runs under a umask of 0 private to one thread.
        guard fchmod(fd, 0o666) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw ControlSocketError(description: "cannot set the control socket's mode: \(reason)")
        }
        let bound = ControlServer.bindUnmasked(fd, address)
        guard bound.result == 0 else {
            close(fd)
            throw ControlSocketError(
                description: "cannot create the control socket \(path): \(String(cString: strerror(bound.error)))")
        }
        if !bound.unmasked {
            logger.warning(
                "the control socket \(path) was created under the process's umask (a private umask needs "
                    + "unshare(CLONE_FS), refused here): users other than root and the engine's may not be able to "
                    + "connect; run the engine with umask 000, or connect as root")
        }
        guard listen(fd, 256) == 0 else {
            close(fd)
            throw ControlSocketError(description: "listen on \(path): \(String(cString: strerror(errno)))")
        }
        listener = fd
        let thread = Thread { self.acceptLoop() }
        thread.name = "geofence.control"
        thread.start()
    }

    /// Stops accepting, closes the socket and removes its path. Connections in progress end on their own.
    package func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let deadline = Date().addingTimeInterval(1)
        while !acceptExited.load(ordering: .acquiring), listener >= 0, Date() < deadline { usleep(5_000) }
        if listener >= 0 {
            close(listener)
            unlink(path)
        }
        // Ends the clients' connections too: each thread then sees its client gone and lets go of what the
        // connection held (an import in parts rolls back and frees the store's write lock) before the
        // engine commits its last state. Waits a little for them.
        clients.withLock { fds in
            for fd in fds { shutdown(fd, Int32(SHUT_RDWR)) }
        }
        while active.load(ordering: .acquiring) > 0, Date() < deadline.addingTimeInterval(1) { usleep(5_000) }
    }

    /// Refuses a socket directory in which a user other than root and the engine's own could replace the
    /// socket (rename or remove it, put a link or another listener in its place): one writable by group or
    /// others without the sticky bit (a sticky one, such as /tmp, lets each remove only their own), or one
    /// owned by another user (its owner may always change it).
    static func checkDirectory(of path: String) throws {
        var directory = (path as NSString).deletingLastPathComponent
        if directory.isEmpty { directory = "." }
        var info = stat()
        guard stat(directory, &info) == 0 else {
            throw ControlSocketError(
                description: "cannot use \(directory) for the control socket: \(String(cString: strerror(errno)))")
        }
        let owner = info.st_uid
        if owner != 0 && owner != geteuid() {
            throw ControlSocketError(
                description: "refusing to put the control socket in \(directory): it belongs to "
                    + "\(ControlHandler.userName(owner)), who could replace the socket; use a directory of root's or "
                    + "the engine's user (such as /run/geofence)")
        }
        if info.st_mode & (S_IWGRP | S_IWOTH) != 0 && info.st_mode & S_ISVTX == 0 {
            throw ControlSocketError(
                description: "refusing to put the control socket in \(directory): other users can write there "
                    + "(mode \(String(info.st_mode & 0o7777, radix: 8))) and it is not sticky, so they could replace "
                    + "the socket; use a directory only root and the engine's user can write (such as /run/geofence), "
                    + "or make it sticky (chmod +t)")
        }
    }

    /// `bind` on a thread of its own whose umask is 0 and private to it (`unshare(CLONE_FS)`: the umask is
    /// otherwise the whole process's, and another thread creating a file or spawning a hook meanwhile would
    /// get it too). `unmasked` is false when the kernel refused to unshare: the bind then ran under the
    /// process's umask.
    static func bindUnmasked(_ fd: Int32, _ address: sockaddr_un) -> (result: Int32, error: Int32, unmasked: Bool) {
        let outcome = Mutex<(result: Int32, error: Int32, unmasked: Bool)?>(nil)
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            // CLONE_FS (Linux): the thread stops sharing its umask, working directory and root.
            let unmasked = unshareFunction.map { $0(0x0000_0200) == 0 } ?? false
            if unmasked { umask(0) }
            var address = address
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            let error = errno
            outcome.withLock { $0 = (result, error, unmasked) }
            done.signal()
        }
        thread.name = "geofence.bind"
        thread.start()
        done.wait()
        return outcome.withLock { $0! }
    }

    /// `unshare`, which Swift's Glibc does not declare (it is built without `_GNU_SOURCE`).
    private static let unshareFunction: (@convention(c) (Int32) -> Int32)? = {
        guard let address = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "unshare") else { return nil }
        return unsafeBitCast(address, to: (@convention(c) (Int32) -> Int32).self)
    }()

    private func prepare(_ path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT { return }
            throw ControlSocketError(description: "cannot check \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw ControlSocketError(
                description: "\(path) exists and is not a socket: refusing to replace it (remove it, or set "
                    + "GEOFENCE_SOCKET to another path)")
        }
        if ControlClient.isListening(path) {
            throw ControlSocketError(description: "another geofence engine is listening on \(path)")
        }
        unlink(path)
    }

    private func acceptLoop() {
        defer { acceptExited.store(true, ordering: .releasing) }
        while !stopping.load(ordering: .acquiring) {
            var poller = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, 200)
            if ready <= 0 { continue }
            // accept4 is not visible from Swift's Glibc; the window before FD_CLOEXEC is covered by the
            // hook runner closing every other descriptor in its children.
            let client = accept(listener, nil, nil)
            if client < 0 { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            guard let peer = ControlServer.peerCredentials(client) else {
                close(client)
                continue
            }
            if let refusal = admit(peer.uid) {
                let busy = ControlResponse(id: nil, result: .failure(ControlError(.busy, refusal)))
                // The answer fits the socket's buffer; never wait for a client that is turned away.
                _ = busy.line.withCString { send(client, $0, strlen($0), Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                _ = "\n".withCString { send(client, $0, 1, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                close(client)
                continue
            }
            let thread = Thread { [self] in
                serve(client, peer: peer)
                perUser.withLock { counts in
                    counts[peer.uid, default: 1] -= 1
                    if counts[peer.uid] == 0 { counts[peer.uid] = nil }
                }
                active.subtract(1, ordering: .releasing)
            }
            thread.name = "geofence.client"
            thread.start()
        }
    }

    /// Takes a connection slot for `uid`, or says why not.
    private func admit(_ uid: UInt32) -> String? {
        let privileged = uid == 0 || uid == getuid()
        let total = active.load(ordering: .acquiring)
        if total >= maximumConnections { return "too many clients (\(maximumConnections)); try again" }
        let held = perUser.withLock { $0[uid, default: 0] }
        if !privileged {
            if held >= maximumPerUser {
                return "too many connections from uid \(uid) (at most \(maximumPerUser) at once); try again"
            }
            if total >= maximumConnections - reserved, trust(uid) == .other {
                return "too many clients; the remaining connections are kept for authorized users; try again"
            }
        }
        active.add(1, ordering: .acquiringAndReleasing)
        perUser.withLock { $0[uid, default: 0] += 1 }
        return nil
    }

    private func serve(_ fd: Int32, peer: ControlPeer) {
        clients.withLock { _ = $0.insert(fd) }
        defer {
            clients.withLock { _ = $0.remove(fd) }
            close(fd)
        }
        let connection = ControlConnection(fd: fd, peer: peer)
        defer { connection.markClosed() }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        /// When the request being read began (its first byte), or, with nothing buffered, the last answer.
        var since = MonotonicClock.seconds()
        /// A `watch`: the client only listens, so silence is no reason to close it.
        var streaming = false
        while connection.isOpen && !stopping.load(ordering: .relaxed) {
            let newline = buffer.firstIndex(of: 10)
            // Over the limit, whether the read that took it there brought its newline too or not: one answer,
            // and the connection ends (the rest of the line is never read).
            if (newline ?? buffer.count) > ControlRequest.maximumLineLength {
                let limit = "request line is over the 1 MiB limit (\(ControlRequest.maximumLineLength) bytes)"
                connection.send(ControlResponse(id: nil, result: .failure(ControlError(.tooLong, limit))).line)
                return
            }
            if let newline {
                let line = buffer[..<newline]
                defer {
                    buffer.removeSubrange(...newline)
                    since = MonotonicClock.seconds()
                }
                if line.allSatisfy({ $0 == 32 || $0 == 13 || $0 == 9 }) { continue }
                switch ControlRequest.parse(line) {
                case .failure(let error):
                    connection.requestUnreadable()
                    connection.send(ControlResponse(id: nil, result: .failure(error)).line)
                case .success(let request):
                    if let response = handler(request, connection) {
                        connection.send(response.line)
                    } else {
                        streaming = true
                    }
                }
                continue
            }
            let partial = !buffer.isEmpty
            let left = (partial ? requestTimeout : idleTimeout) - (MonotonicClock.seconds() - since)
            if !streaming && left <= 0 {
                if partial {
                    connection.requestUnreadable()
                    connection.send(
                        ControlResponse(
                            id: nil,
                            result: .failure(
                                ControlError(
                                    .badRequest,
                                    "the request was not complete within \(Int(requestTimeout)) s of its first byte"))
                        ).line)
                }
                return  // idle past the timeout, or too slow
            }
            // At most 1 s at a time, to notice `stop()`.
            var poller = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
            let wait = streaming ? 1000 : Int32(max(1, min(1000, (left * 1000).rounded(.up))))
            guard let ready = try? System.poll(&poller, milliseconds: wait) else { return }
            if ready == 0 { continue }
            let n = System.retryingEINTR { chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) } }
            if n < 0 && errno == EAGAIN { continue }
            if n <= 0 { return }  // closed
            if buffer.isEmpty { since = MonotonicClock.seconds() }
            buffer += chunk[0..<n]
        }
    }

    static func peerCredentials(_ fd: Int32) -> ControlPeer? {
        // struct ucred { pid_t pid; uid_t uid; gid_t gid; }
        var raw: (Int32, UInt32, UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: raw))
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &raw, &length) == 0 else { return nil }
        return ControlPeer(pid: raw.0, uid: raw.1, gid: raw.2)
    }
}
