#if canImport(Glibc)
    import Glibc
#endif

/// Names the calling thread for the kernel (`/proc/PID/task/TID/comm`, `top -H`, `perf`), which
/// Foundation's `Thread.name` does not do on Linux: without it every thread is called after the one that
/// started it. The kernel keeps 15 bytes. (Through `/proc/thread-self/comm`: `pthread_setname_np` is not
/// in Swift's Glibc module.)
package func nameThisThread(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { return }
    let bytes = Array(name.utf8.prefix(15))
    _ = write(fd, bytes, bytes.count)
    close(fd)
}
