import Foundation
import GeofenceCore

/// The system's clocks: `Date()` and `CLOCK_MONOTONIC`.
public struct SystemClock: GeofenceClock {
    /// The system's clocks (the monitor's default).
    public init() {}
    /// The wall-clock time now, `Date()`.
    public func now() -> Date { Date() }
    /// Seconds on `CLOCK_MONOTONIC` (since boot, not counting suspend): only differences count.
    public func uptime() -> Double { FixPipeline.uptime() }
}
