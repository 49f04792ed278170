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
    /// arrays first cost four more, about a tenth of a random jump's instructions (Docs/benchmarks.md). Eight
    /// digits at a time (`hexDigits(_:)`), where a digit at a time with its branch cost 4 % of a random jump.
    static func format(_ hi: UInt64, _ lo: UInt64) -> String {
        String(unsafeUninitializedCapacity: 36) { out in
            let raw = UnsafeMutableRawPointer(out.baseAddress!)
            let dash = UInt8(ascii: "-")
            raw.storeBytes(of: hexDigits(UInt32(truncatingIfNeeded: hi >> 32)), toByteOffset: 0, as: UInt64.self)
            let middle = hexDigits(UInt32(truncatingIfNeeded: hi))
            raw.storeBytes(of: dash, toByteOffset: 8, as: UInt8.self)
            raw.storeBytes(of: UInt32(truncatingIfNeeded: middle), toByteOffset: 9, as: UInt32.self)
            raw.storeBytes(of: dash, toByteOffset: 13, as: UInt8.self)
            raw.storeBytes(of: UInt32(truncatingIfNeeded: middle >> 32), toByteOffset: 14, as: UInt32.self)
            let low = hexDigits(UInt32(truncatingIfNeeded: lo >> 32))
            raw.storeBytes(of: dash, toByteOffset: 18, as: UInt8.self)
            raw.storeBytes(of: UInt32(truncatingIfNeeded: low), toByteOffset: 19, as: UInt32.self)
            raw.storeBytes(of: dash, toByteOffset: 23, as: UInt8.self)
            raw.storeBytes(of: UInt32(truncatingIfNeeded: low >> 32), toByteOffset: 24, as: UInt32.self)
            raw.storeBytes(of: hexDigits(UInt32(truncatingIfNeeded: lo)), toByteOffset: 28, as: UInt64.self)
            return 36
        }
    }

    /// The eight lower-case hex digits of `value`, most significant first, as the bytes of a word in
    /// memory order (little-endian: the first digit in the lowest byte).
    ///
    /// Each nibble is spread to a byte of its own; a nibble of 10 or more carries into bit 4 when 6 is added,
    /// which picks `a`-`f` over `0`-`9` without a branch.
    @inline(__always)
    static func hexDigits(_ value: UInt32) -> UInt64 {
        var x = UInt64(value)
        x = ((x & 0xFFFF_0000) << 16) | (x & 0xFFFF)
        x = ((x & 0x0000_FF00_0000_FF00) << 8) | (x & 0x0000_00FF_0000_00FF)
        x = ((x & 0x00F0_00F0_00F0_00F0) << 4) | (x & 0x000F_000F_000F_000F)
        let letters = ((x &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
        x = x &+ 0x3030_3030_3030_3030 &+ letters &* UInt64(UInt8(ascii: "a") - UInt8(ascii: "0") - 10)
        // The most significant digit sits in the highest byte: swapped to come first in memory.
        return UInt64(bigEndian: x)
    }
}
