import GeofenceSystem
import Testing

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

@Suite("system calls")
struct SystemTests {
    /// A pipe, closed at the end of `body`.
    private func withPipe(_ body: (_ read: Int32, _ write: Int32) throws -> Void) throws {
        var fds: [Int32] = [-1, -1]
        #expect(pipe(&fds) == 0)
        defer { for fd in fds where fd >= 0 { close(fd) } }
        try body(fds[0], fds[1])
    }

    @Test("writeAll writes everything however little each call takes, and stops at a call that takes nothing")
    func writeAll() throws {
        try withPipe { readEnd, writeEnd in
            let bytes = Array("one line\n".utf8)
            var calls = 0
            // Three bytes a call: the loop, not the caller, puts it together.
            try System.writeAll(bytes) { rest in
                calls += 1
                return Glibc.write(writeEnd, rest.baseAddress, min(3, rest.count))
            }
            #expect(calls == 3)
            var got = [UInt8](repeating: 0, count: 64)
            let n = System.retryingEINTR { read(readEnd, &got, got.count) }
            #expect(Array(got[0..<n]) == bytes)
            #expect(throws: SystemError(call: "send", errno: EPIPE)) {
                try System.writeAll(bytes, call: "send") { _ in 0 }
            }
            #expect(throws: SystemError(call: "write", errno: EBADF)) { try System.writeAll(-1, bytes) }
        }
    }

    @Test("retryingEINTR calls again only on EINTR, and leaves errno for the caller")
    func retrying() {
        var results: [Int32] = [-1, -1, 7]
        let seven = System.retryingEINTR {
            errno = EINTR
            return results.removeFirst()
        }
        #expect(seven == 7 && results.isEmpty)
        let failed = System.retryingEINTR {
            errno = EAGAIN
            return Int32(-1)
        }
        #expect(failed == -1 && errno == EAGAIN)
    }

    @Test("poll: 0 on timeout, the ready count when there is something to read; a bad descriptor throws")
    func poll() throws {
        try withPipe { readEnd, writeEnd in
            var entries = [pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)]
            #expect(try System.poll(&entries, milliseconds: 0) == 0)
            try System.writeAll(writeEnd, [1])
            #expect(try System.poll(&entries, milliseconds: 1000) == 1)
            #expect(entries[0].revents & Int16(POLLIN) != 0)
            #expect(try System.poll(readEnd, events: Int16(POLLIN), timeout: 1) & Int16(POLLIN) != 0)
        }
        #expect(throws: SystemError.self) { try System.setCloseOnExec(-1) }
    }

    @Test("the monotonic clock never goes back, and a clock's now starts near zero")
    func monotonicClock() {
        let clock = MonotonicClock()
        let first = clock.now
        #expect(first >= 0 && first < 1)
        var last = MonotonicClock.seconds()
        var lastNanoseconds = MonotonicClock.nanoseconds()
        for _ in 0..<1000 {
            let seconds = MonotonicClock.seconds()
            let nanoseconds = MonotonicClock.nanoseconds()
            #expect(seconds >= last && nanoseconds >= lastNanoseconds)
            last = seconds
            lastNanoseconds = nanoseconds
        }
        #expect(clock.now >= first)
    }
}
