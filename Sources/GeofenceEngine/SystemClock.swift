import Foundation
import GeofenceCore

/// The system's clocks: `Date()` and `CLOCK_MONOTONIC`.
public struct SystemClock: GeofenceClock {
    public init() {}
    public func now() -> Date { Date() }
    public func uptime() -> Double { FixPipeline.uptime() }
}
