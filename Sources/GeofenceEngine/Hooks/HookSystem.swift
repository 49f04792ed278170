import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The GNU and Linux calls the hook runner needs that Swift's `Glibc` module does not declare (it is built
/// without `_GNU_SOURCE`): looked up once in the C library, each with a fallback when it is missing.
enum HookSystem {
    private typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
    private typealias PidfdOpen = @convention(c) (pid_t, UInt32) -> Int32
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private typealias AddChdir =
        @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32

    private static func symbol<T>(_ name: String, as type: T.Type) -> T? {
        guard let address = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else { return nil }
        return unsafeBitCast(address, to: type)
    }

    // `dlsym(RTLD_DEFAULT, ...)`: RTLD_DEFAULT is the null handle on glibc.
    private static let pipe2Function = symbol("pipe2", as: Pipe2.self)
    private static let pidfdOpenFunction = symbol("pidfd_open", as: PidfdOpen.self)
    private static let addCloseFromFunction = symbol("posix_spawn_file_actions_addclosefrom_np", as: AddCloseFrom.self)
    private static let addChdirFunction = symbol("posix_spawn_file_actions_addchdir_np", as: AddChdir.self)

    /// `F_SETPIPE_SZ` (Linux).
    static let setPipeSize: Int32 = 1031

    /// A pipe whose two ends are close-on-exec from the start, so a hook spawned by another thread meanwhile
    /// cannot inherit them (which would keep a pipe open and hide its end of file).
    static func makePipe() throws(HookSpawnError) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        if let pipe2 = pipe2Function {
            let rc = fds.withUnsafeMutableBufferPointer { pipe2($0.baseAddress!, O_CLOEXEC) }
            guard rc == 0 else { throw HookSpawnError("pipe2", errno) }
        } else {
            guard pipe(&fds) == 0 else { throw HookSpawnError("pipe", errno) }
            for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        }
        return (fds[0], fds[1])
    }

    /// A descriptor that becomes readable when `pid` exits (without reaping it), or nil on kernels before 5.3.
    static func pidfd(_ pid: pid_t) -> Int32? {
        guard let open = pidfdOpenFunction else { return nil }
        let fd = open(pid, 0)
        if fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return fd >= 0 ? fd : nil
    }

    /// Closes every descriptor from `from` up in the child. Returns false when this C library cannot.
    static func addCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Bool {
        guard let add = addCloseFromFunction else { return false }
        return add(actions, from) == 0
    }

    /// Changes directory in the child. Returns false when this C library cannot.
    static func addChdir(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ path: String) -> Bool {
        guard let add = addChdirFunction else { return false }
        return path.withCString { add(actions, $0) == 0 }
    }

    static func setNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
    }

    static func closeIgnoringErrors(_ fd: Int32) {
        // Linux closes the descriptor even when close reports EINTR: retrying could close someone else's.
        if fd >= 0 { _ = close(fd) }
    }

    /// Exit status → (exit code, signal), as `WIFEXITED`/`WEXITSTATUS`/`WTERMSIG` would say.
    static func decodeWaitStatus(_ status: Int32) -> (exitCode: Int32?, signal: Int32?) {
        let low = status & 0x7f
        if low == 0 { return ((status >> 8) & 0xff, nil) }
        if low != 0x7f { return (nil, low) }
        return (nil, nil)
    }
}

/// A system call that failed while starting a hook.
struct HookSpawnError: Error, CustomStringConvertible {
    var call: String
    var code: Int32

    init(_ call: String, _ code: Int32) {
        self.call = call
        self.code = code
    }

    var description: String { "\(call): \(String(cString: strerror(code)))" }
}
