import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// SIGTERM and SIGINT as an async sequence: the daemon's request to stop.
///
/// Installed from a nonisolated function, never from main-actor code: a main-actor closure run on
/// Dispatch's queue traps in Swift 6.
package final class ShutdownSignals {
    package let signals: AsyncStream<Int32>
    private let sources: [any DispatchSourceSignal]

    package init(_ numbers: [Int32] = [SIGTERM, SIGINT]) {
        let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        signals = stream
        let queue = DispatchQueue(label: "geofence.signals")
        var made: [any DispatchSourceSignal] = []
        // A parent may have started us with these blocked (Foundation's Process passes its thread's mask
        // on): then they would stay pending forever and the engine could not be stopped gracefully.
        var unblock = sigset_t()
        sigemptyset(&unblock)
        for number in numbers { sigaddset(&unblock, number) }
        // One already pending (sent while blocked) would kill the process when unblocked, or be discarded by
        // SIG_IGN: taken now, while still blocked, and handed to the stream.
        var early: [Int32] = []
        var pending = sigset_t()
        sigpending(&pending)
        var now = timespec(tv_sec: 0, tv_nsec: 0)
        for number in numbers where sigismember(&pending, number) == 1 {
            var one = sigset_t()
            sigemptyset(&one)
            sigaddset(&one, number)
            if sigtimedwait(&one, nil, &now) == number { early.append(number) }
        }
        for number in numbers {
            // The default action would end the process before the graceful stop could run.
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            made.append(source)
        }
        sources = made
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
        for number in early { continuation.yield(number) }
    }

    deinit {
        for source in sources { source.cancel() }
    }
}
