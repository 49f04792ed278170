import Foundation
import GeofenceEngine
import GeofenceTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The control socket's mode is set without a call by path: a local user who swaps the fresh socket for a
/// link to a root-owned file, the moment it appears, cannot make the engine change that file's mode.
@Suite("control socket race", .serialized)
struct ControlSocketRaceTests {
    /// Swaps every new `name` in `directory` for a link to `target` as soon as inotify reports it.
    final class Swapper: @unchecked Sendable {
        // @unchecked: `fd` is fixed; the flag and the count are atomic.
        private let fd: Int32
        private let stopping = Atomic(false)
        let swaps = Atomic(0)
        /// Creations of `name` seen (and answered with a swap, or a try).
        let handled = Atomic(0)
        private let finished = DispatchSemaphore(value: 0)

        init(directory: String, name: String, target: String) {
            fd = inotify_init1(Int32(IN_NONBLOCK))
            _ = inotify_add_watch(fd, directory, UInt32(IN_CREATE))
            let thread = Thread { [self] in
                var buffer = [UInt8](repeating: 0, count: 4096)
                let link = directory + "/swap.tmp"
                let path = directory + "/" + name
                while !stopping.load(ordering: .relaxed) {
                    var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                    guard poll(&poller, 1, 20) > 0 else { continue }
                    let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                    guard n > 0, String(decoding: buffer[0..<n], as: UTF8.self).contains(name) else { continue }
                    unlink(link)
                    symlink(target, link)
                    if rename(link, path) == 0 { swaps.add(1, ordering: .relaxed) }
                    handled.add(1, ordering: .releasing)
                }
                finished.signal()
            }
            thread.start()
        }

        func stop() {
            stopping.store(true, ordering: .relaxed)
            finished.wait()
            close(fd)
        }
    }

    @Test("a socket swapped for a link the moment it is bound: the linked file keeps its mode")
    func swappedAtBind() throws {
        let dir = try TemporaryDirectory("geofence-race")
        defer { dir.remove() }
        chmod(dir.path, 0o1777)
        let secret = dir.file("secret")
        #expect(FileManager.default.createFile(atPath: secret, contents: Data("x".utf8)))
        chmod(secret, 0o600)
        let swapper = Swapper(directory: dir.path, name: "engine.sock", target: secret)
        defer { swapper.stop() }
        var info = stat()
        for round in 1...30 {
            let server = ControlServer(path: dir.file("engine.sock"), logger: Logger(minimum: .error) { _ in }) {
                request, _ in ControlResponse(id: request.id, result: .success(.null))
            }
            try server.start()
            server.stop()
            // The swapper's answer to this start, before the path is cleared for the next one.
            _ = Wait.blocking(timeout: 5, every: .milliseconds(1)) {
                swapper.handled.load(ordering: .acquiring) >= round
            }
            unlink(dir.file("engine.sock"))
            #expect(stat(secret, &info) == 0)
            if info.st_mode & 0o777 != 0o600 { break }
        }
        #expect(swapper.swaps.load(ordering: .relaxed) > 0, "the swap was tried")
        #expect(info.st_mode & 0o777 == 0o600, "mode \(String(info.st_mode & 0o777, radix: 8))")
    }
}
