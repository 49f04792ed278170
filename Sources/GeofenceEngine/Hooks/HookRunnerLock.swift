import Foundation
import GeofenceSystem

#if canImport(Glibc)
    import Glibc
#endif

/// One hook runner per state directory: `flock` on `hooks.lock`.
///
/// Two runners on one store (the daemon and a `replay --hooks`) would each take the other's running
/// deliveries for ones a crash left behind, and run them again out of order. The kernel drops the lock
/// when its holder dies, so a crash never leaves it stale.
final class HookRunnerLock {
    static let fileName = "hooks.lock"
    private let fd: Int32

    /// Someone else holds the lock.
    struct Held: Error {}

    init(directory: String) throws {
        let path = (directory as NSString).appendingPathComponent(HookRunnerLock.fileName)
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        if System.retryingEINTR({ flock(fd, LOCK_EX | LOCK_NB) }) != 0 {
            let code = errno
            close(fd)
            if code == EWOULDBLOCK { throw Held() }
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        self.fd = fd
    }

    deinit {
        close(fd)
    }
}
