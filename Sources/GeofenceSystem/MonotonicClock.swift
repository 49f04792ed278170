#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Musl)
    @preconcurrency import Musl
#endif

/// The monotonic clock (`CLOCK_MONOTONIC`), read in this one place: for watchdogs, deadlines, retries and
/// durations only, never for decisions about fixes (those run on fix time). Immune to wall-clock steps.
package struct MonotonicClock: Sendable {
    private let origin: Double

    /// A clock whose `now` counts from this moment.
    package init() {
        origin = MonotonicClock.seconds()
    }

    /// Seconds since this clock was made.
    package var now: Double { MonotonicClock.seconds() - origin }

    /// Seconds on the monotonic clock (since boot, sleep not counted): only differences mean anything.
    package static func seconds() -> Double {
        let t = reading()
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    /// Nanoseconds on the monotonic clock, for timing whole phases exactly.
    package static func nanoseconds() -> UInt64 {
        let t = reading()
        return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
    }

    private static func reading() -> timespec {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return t
    }
}
