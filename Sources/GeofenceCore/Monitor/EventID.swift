import Foundation
import Synchronization

/// The engine's one event id generator, shared by everything that makes events (the region monitor, the
/// monitor's service, the control handler): ids from one generator sort in the order they were made,
/// whatever times they were made for; ids from two generators need not.
package final class EventIDs: Sendable {
    private let generator: Mutex<EventIDGenerator>

    package init(_ generator: EventIDGenerator = EventIDGenerator()) {
        self.generator = Mutex(generator)
    }

    /// The next id, for an event made at `now` (wall clock, passed in).
    package func next(now: Date) -> String { generator.withLock { $0.next(now: now) } }
}

/// Makes event ids: UUIDv7 (RFC 9562), unique and ordered by creation time.
///
/// The first 48 bits are Unix milliseconds; the next 12 bits and the 62 after the variant are random,
/// except that ids made within the same millisecond (or while the wall clock stands still or steps back)
/// continue from the previous id plus one, so that ids made by one generator always sort in the order
/// they were made (RFC 9562 §6.2, method 2). Receivers use the id to drop duplicates of an at-least-once
/// delivery.
package struct EventIDGenerator: Sendable {
    private var lastMillis: UInt64 = 0
    /// The 74 bits after the timestamp of the last id, as (high 12 bits, low 62 bits).
    private var lastHigh: UInt64 = 0
    private var lastLow: UInt64 = 0
    private var rng: any RandomNumberGenerator & Sendable

    package init(rng: any RandomNumberGenerator & Sendable = SystemRandomNumberGenerator()) {
        self.rng = rng
    }

    /// The next id, for an event made at `now` (wall clock, passed in).
    package mutating func next(now: Date) -> String {
        let raw = now.timeIntervalSince1970 * 1000
        var millis = raw.isFinite && raw > 0 ? UInt64(min(raw, Double(UInt64(1) << 47))) : 0
        if millis <= lastMillis {
            millis = lastMillis
            lastLow &+= 1
            if lastLow >= (UInt64(1) << 62) {
                lastLow = 0
                lastHigh &+= 1
                if lastHigh >= (1 << 12) {
                    // The counter ran out within one millisecond: borrow the next one.
                    millis += 1
                    lastHigh = rng.next() & 0x7FF
                }
            }
        } else {
            // Leave headroom in the counter so the ids of a burst never wrap.
            lastHigh = rng.next() & 0x7FF
            lastLow = rng.next() & ((UInt64(1) << 61) - 1)
        }
        lastMillis = millis
        let hi = (millis << 16) | (0x7 << 12) | lastHigh
        let lo = (UInt64(0b10) << 62) | lastLow
        return EventIDGenerator.format(hi, lo)
    }

    /// Two 64-bit words as a UUID's text: 8-4-4-4-12 lower-case hex digits.
    ///
    /// Written straight into the string's own storage: one allocation (the string's), where building
    /// arrays first cost four more, about a tenth of a random jump's instructions (Docs/benchmarks.md).
    static func format(_ hi: UInt64, _ lo: UInt64) -> String {
        String(unsafeUninitializedCapacity: 36) { out in
            var k = 0
            for nibble in 0..<16 {
                if nibble == 8 || nibble == 12 {
                    out[k] = UInt8(ascii: "-")
                    k += 1
                }
                out[k] = hexDigit(hi >> UInt64(60 - 4 * nibble))
                k += 1
            }
            for nibble in 0..<16 {
                if nibble == 0 || nibble == 4 {
                    out[k] = UInt8(ascii: "-")
                    k += 1
                }
                out[k] = hexDigit(lo >> UInt64(60 - 4 * nibble))
                k += 1
            }
            return k
        }
    }

    /// The lower-case hex digit of the low four bits.
    @inline(__always)
    private static func hexDigit(_ value: UInt64) -> UInt8 {
        let n = UInt8(truncatingIfNeeded: value & 0xF)
        return n < 10 ? UInt8(ascii: "0") + n : UInt8(ascii: "a") - 10 + n
    }
}
