import Foundation
import GeofenceSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Who is on the other end of a control connection, from the kernel (`SO_PEERCRED`), not from anything
/// the client says.
package struct ControlPeer: Sendable, Equatable {
    package var pid: Int32
    package var uid: UInt32
    package var gid: UInt32

    package init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}

/// State a handler keeps on a connection that must be released when the client goes, whether or not it
/// finished what it started (an import in parts holds the store's write lock).
package protocol ControlConnectionState: Sendable {
    /// Called once, on the connection's thread, after the client has gone.
    func connectionClosed()
    /// A line of this connection could not be read as a request: it may have been part of what this state
    /// is for (an import's part), so it must not end as if it had not been sent.
    mutating func requestUnreadable()
}

extension ControlConnectionState {
    package mutating func requestUnreadable() {}
}

/// One client connection: write response lines to it; per-connection state lives in `userInfo`.
package final class ControlConnection: @unchecked Sendable {
    // @unchecked: `fd` is fixed; `open` and `userInfo` are guarded by `lock`; writes are serialized by it.
    let fd: Int32
    package let peer: ControlPeer
    private let lock = NSLock()
    private var open = true
    private var info: [String: any Sendable] = [:]

    init(fd: Int32, peer: ControlPeer) {
        self.fd = fd
        self.peer = peer
    }

    package var isOpen: Bool { lock.withLock { open } }

    /// State a handler keeps across requests of this connection (an import in several parts); a value that
    /// is a `ControlConnectionState` is told when the connection closes.
    package subscript(key: String) -> (any Sendable)? {
        get { lock.withLock { info[key] } }
        set { lock.withLock { info[key] = newValue } }
    }

    /// Sends one line; false once the client has gone.
    @discardableResult
    package func send(_ line: String) -> Bool {
        lock.withLock {
            guard open else { return false }
            if !writeLine(line, to: fd) { open = false }
            return open
        }
    }

    /// Writes as much of `bytes` as the socket takes now, without waiting; returns how much, or nil once
    /// the client has gone.
    func sendAvailable(_ bytes: [UInt8]) -> Int? {
        lock.withLock {
            guard open else { return nil }
            var offset = 0
            while offset < bytes.count {
                let n = System.retryingEINTR {
                    bytes.withUnsafeBytes {
                        Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                    }
                }
                if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
                guard n > 0 else {
                    open = false
                    break
                }
                offset += n
            }
            return open ? offset : nil
        }
    }

    /// Ends the connection from the engine's side: `last` goes out if the socket takes it without waiting,
    /// then the connection is shut down (its thread then sees it closed and releases what it holds).
    func cutOff(last: [UInt8]) {
        lock.withLock {
            guard open else { return }
            open = false
            if !last.isEmpty {
                _ = last.withUnsafeBytes {
                    Glibc.send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                }
            }
            shutdown(fd, Int32(SHUT_RDWR))
        }
    }

    /// Tells every state kept on the connection that a line could not be read (see `ControlConnectionState`).
    func requestUnreadable() {
        lock.withLock {
            for (key, value) in info {
                guard var state = value as? any ControlConnectionState else { continue }
                state.requestUnreadable()
                info[key] = state
            }
        }
    }

    /// Marks the connection closed and releases what handlers kept on it.
    func markClosed() {
        let kept = lock.withLock {
            open = false
            defer { info = [:] }
            return info
        }
        for case let state as any ControlConnectionState in kept.values { state.connectionClosed() }
    }
}

/// Writes `line` and its newline to a stream socket, whole (both ends of the control socket); false once
/// the peer has gone.
func writeLine(_ line: String, to fd: Int32) -> Bool {
    do {
        try System.writeAll(Array(line.utf8) + [10], call: "send") {
            Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
        }
        return true
    } catch {
        return false
    }
}
