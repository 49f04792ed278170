import Foundation

/// Where the engine reads the time: the wall clock (event times, expiry, retry schedules) and a monotonic
/// clock (epoch assembly, watchdogs). Decisions themselves run on the fixes' own time. Injected, so tests
/// and embedders can run the engine on a clock of their own.
public protocol GeofenceClock: Sendable {
    /// The wall-clock time now.
    func now() -> Date
    /// Seconds on a monotonic clock (any origin; only differences count).
    func uptime() -> Double
}
