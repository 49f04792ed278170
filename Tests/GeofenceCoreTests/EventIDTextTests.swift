import Foundation
import GeofenceTestSupport
import Testing

@testable import GeofenceCore

/// The event id's text, written straight into the string: the same as Foundation's `UUID` text of the
/// same 128 bits, lower-cased, for random words and for the edges.
@Suite struct EventIDTextTests {
    private func reference(_ hi: UInt64, _ lo: UInt64) -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 {
            bytes[i] = UInt8(truncatingIfNeeded: hi >> UInt64(56 - 8 * i))
            bytes[8 + i] = UInt8(truncatingIfNeeded: lo >> UInt64(56 - 8 * i))
        }
        let uuid = UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
        return uuid.uuidString.lowercased()
    }

    @Test("format gives Foundation's UUID text, lower-cased")
    func matchesUUID() {
        var rng = SeededGenerator(seed: 36)
        var words: [(UInt64, UInt64)] = [(0, 0), (.max, .max), (0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210)]
        for _ in 0..<20_000 { words.append((rng.next(), rng.next())) }
        var wrong = 0
        for (hi, lo) in words where EventIDGenerator.format(hi, lo) != reference(hi, lo) { wrong += 1 }
        #expect(wrong == 0)
        #expect(
            EventIDGenerator.format(0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210)
                == "01234567-89ab-cdef-fedc-ba9876543210")
    }

    @Test("ids from one generator are UUIDv7 text and sort in the order they were made")
    func ordered() {
        var ids = EventIDGenerator(rng: SeededGenerator(seed: 1))
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        var last = ""
        for i in 0..<5000 {
            let id = ids.next(now: now.addingTimeInterval(Double(i / 100) / 1000))
            #expect(id.utf8.count == 36 && id > last)
            #expect(UUID(uuidString: id) != nil && Array(id.utf8)[14] == UInt8(ascii: "7"))
            last = id
        }
    }
}
