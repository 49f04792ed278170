import Foundation
import GeofenceCore
import Testing

/// An event's identity: what lets JetStream drop the copy a replay makes, and receivers de-duplicate across
/// engines. It must depend on what the event says and on nothing else, and never change between versions (two
/// engines of a cluster in a rolling upgrade must agree).
@Suite("Event identity")
struct EventIdentityTests {
    let time = Date(timeIntervalSince1970: 1_764_763_200.25)

    @Test("a pure function of subject, region, type and fix time, fixed across versions")
    func golden() {
        let id = EventIdentity.id(subject: "truck-7", region: "depot", type: .enter, time: time)
        #expect(id == EventIdentity.id(subject: "truck-7", region: "depot", type: .enter, time: time))
        // The value itself: changing the hash would make two versions of the engine store an event twice.
        #expect(id == "aeeec19b-0313-8fc5-8426-767551803cb6")
    }

    @Test("a UUID of version 8 with the RFC 9562 variant")
    func form() {
        let id = EventIdentity.id(subject: "a", region: "b", type: .exit, time: time)
        let characters = Array(id)
        #expect(characters.count == 36)
        #expect(characters[14] == "8")
        #expect("89ab".contains(characters[19]))
        #expect([8, 13, 18, 23].allSatisfy { characters[$0] == "-" })
    }

    @Test("each field tells events apart, and no field runs into the next")
    func distinct() {
        let base = EventIdentity.id(subject: "ab", region: "c", type: .enter, time: time)
        let others = [
            EventIdentity.id(subject: "a", region: "bc", type: .enter, time: time),
            EventIdentity.id(subject: "ab", region: "c", type: .exit, time: time),
            EventIdentity.id(subject: "ab", region: "c", type: .enter, time: time.addingTimeInterval(0.000_001)),
            EventIdentity.id(subject: "ab", region: "d", type: .enter, time: time),
            EventIdentity.id(subject: nil, region: "c", type: .enter, time: time),
        ]
        #expect(Set(others + [base]).count == others.count + 1)
        // Many events of one vehicle: no collision.
        var seen = Set<String>()
        for second in 0..<20_000 {
            seen.insert(
                EventIdentity.id(subject: "v", region: "r", type: .enter, time: time.addingTimeInterval(Double(second)))
            )
        }
        #expect(seen.count == 20_000)
    }

    @Test("an outside time never traps")
    func outsideTimes() {
        for seconds in [Double.nan, .infinity, -.infinity, 1e300, -1e300, 9.3e12, -9.3e12] {
            #expect(
                EventIdentity.id(subject: "v", region: "r", type: .dwell, time: Date(timeIntervalSince1970: seconds))
                    .count == 36)
        }
    }
}
