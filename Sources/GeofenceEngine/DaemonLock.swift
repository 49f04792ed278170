import Foundation
import GeofenceSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The one-daemon-per-state-directory lock: `flock` on `geofence.lock`, which also records the holder's pid.
///
/// `flock` locks belong to the open file description, so the kernel releases it when the daemon dies,
/// however it dies: a stale lock file never blocks a restart.
package final class DaemonLock: Sendable {
    package static let fileName = "geofence.lock"
    package let path: String
    private let fd: Int32

    /// Why the lock could not be taken.
    package struct Held: Error, CustomStringConvertible {
        package var path: String
        package var pid: Int32?
        package var description: String {
            "another geofence engine is already running on this state directory"
                + (pid.map { " (pid \($0))" } ?? "") + ": \(path) is locked; stop it first, or use another --state-dir"
        }
    }

    /// Takes the lock or throws `Held` (or a `POSIXError` if the file cannot be opened).
    package init(directory: String) throws {
        path = (directory as NSString).appendingPathComponent(DaemonLock.fileName)
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        if System.retryingEINTR({ flock(fd, LOCK_EX | LOCK_NB) }) != 0 {
            let holder = DaemonLock.readPID(fd)
            close(fd)
            throw Held(path: path, pid: holder)
        }
        ftruncate(fd, 0)
        let text = "\(getpid())\n"
        _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
        self.fd = fd
    }

    deinit {
        ftruncate(fd, 0)
        close(fd)
    }

    /// The pid of the running daemon, or nil when none holds the lock on `directory`.
    package static func holder(directory: String) -> Int32? {
        let path = (directory as NSString).appendingPathComponent(fileName)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 {
            flock(fd, LOCK_UN)
            return nil
        }
        return readPID(fd) ?? -1
    }

    private static func readPID(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 31, 0) }
        guard n > 0 else { return nil }
        return Int32(String(decoding: buffer[0..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
