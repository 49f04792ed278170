import Foundation

/// An event's identity as a pure function of what it says: its subject, region, type and the fix time that
/// caused it. Two engines that judge the same fixes (an owner and the one that takes its partition over and
/// replays them) make the same identity for the same event, so a store that de-duplicates by it (JetStream's
/// `Nats-Msg-Id`) keeps one, and a receiver that de-duplicates by the event id sees one.
///
/// The id has the form of a UUID of version 8 (RFC 9562 §5.8, "custom"): 122 bits of two FNV-1a 64-bit hashes
/// of the fields, each finished by a SplitMix64 mixer. The fix time enters as whole microseconds, as event
/// JSON carries it. Not a cryptographic hash: it tells apart events, not publishers.
package enum EventIdentity {
    /// The identity of an event about `subject` (nil for a region's own, `expired`), `region`, of `type`,
    /// caused by the fix at `time`.
    package static func id(subject: String?, region: String, type: RegionEventType, time: Date) -> String {
        var a = Hash(seed: 0xCBF2_9CE4_8422_2325)
        var b = Hash(seed: 0x6C62_272E_07BB_0142)
        let micros = time.timeIntervalSince1970 * 1_000_000
        // Outside numbers never trap: a time beyond ±2^62 µs (about 146,000 years) hashes as its bit pattern.
        let timeBits: UInt64 =
            micros.isFinite && abs(micros) < 4.6e18 ? UInt64(bitPattern: Int64(micros.rounded())) : micros.bitPattern
        for field in [subject.map { "s" + $0 } ?? "-", region, type.rawValue] {
            a.add(field)
            b.add(field)
        }
        a.add(timeBits)
        b.add(timeBits)
        let hi = (mix(a.value) & ~0xF000) | 0x8000  // version 8 in bits 48-51
        let lo = (mix(b.value) & ~(UInt64(0b11) << 62)) | (UInt64(0b10) << 62)  // the RFC 9562 variant
        return EventIDGenerator.format(hi, lo)
    }

    /// The id of `event` (its own `id` aside).
    package static func id(of event: RegionEvent) -> String {
        id(subject: event.subject, region: event.region, type: event.type, time: event.time)
    }

    private struct Hash {
        var value: UInt64
        init(seed: UInt64) { value = seed }
        mutating func add(byte: UInt8) {
            value ^= UInt64(byte)
            value &*= 0x0000_0100_0000_01B3
        }
        mutating func add(_ text: String) {
            for byte in text.utf8 { add(byte: byte) }
            // A separator no UTF-8 text holds, so that ("ab", "c") and ("a", "bc") differ.
            add(byte: 0xFF)
        }
        mutating func add(_ word: UInt64) {
            for shift in stride(from: 0, to: 64, by: 8) { add(byte: UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
    }

    private static func mix(_ x: UInt64) -> UInt64 {
        var z = x &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
