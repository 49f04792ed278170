import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore
import Testing

/// The pure half of Home Assistant discovery: object ids, the state of a vehicle in several regions, the
/// messages that make and clear a tracker, the matching of tracker PUBACKs. No broker.
@Suite("Home Assistant discovery, pure")
struct HomeAssistantDiscoveryUnitTests {
    static let discovery = HomeAssistantDiscovery(
        prefix: "homeassistant", base: TopicTemplate(HomeAssistantDiscovery.defaultBase),
        statusTopic: "geofence/engine/status")

    @Test("object ids hold only [a-zA-Z0-9_-] and tell apart names that differ only in such bytes")
    func objectIDs() {
        let names = [
            "alice/phone", "alice+phone", "alice#phone", "alice phone", "alicé/phone", "truck-7", "/dev/ttyACM0",
        ]
        let ids = names.map(HomeAssistantDiscovery.objectID)
        #expect(Set(ids).count == names.count, "\(ids)")
        for id in ids {
            #expect(
                id.utf8.allSatisfy {
                    (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) || $0 == 95 || $0 == 45
                }, "\(id)")
        }
        #expect(HomeAssistantDiscovery.objectID("truck-7").hasPrefix("geofence_truck-7_"))
        #expect(HomeAssistantDiscovery.objectID("truck-7") == HomeAssistantDiscovery.objectID("truck-7"), "stable")
        #expect(HomeAssistantDiscovery.objectID(String(repeating: "x", count: 1000)).utf8.count < 80)
    }

    @Test("a vehicle in several regions takes the smallest one's name (Home Assistant's rule); none: not_home")
    func smallestZone() {
        typealias Zone = HomeAssistantDiscovery.Zone
        let city = Zone(id: "city", name: "City", area: 1e8)
        let depot = Zone(id: "depot", name: "North depot", area: 3e4)
        #expect(HomeAssistantDiscovery.state(inside: [city, depot]) == "North depot")
        #expect(HomeAssistantDiscovery.state(inside: [depot, city]) == "North depot")
        #expect(HomeAssistantDiscovery.state(inside: [city]) == "City")
        #expect(HomeAssistantDiscovery.state(inside: []) == "not_home")
        // Equal areas: the smaller id, whatever the order.
        let a = Zone(id: "a", name: "A", area: 10)
        let b = Zone(id: "b", name: "B", area: 10)
        #expect(HomeAssistantDiscovery.state(inside: [b, a]) == "A")
        // A region without a name shows its id; a polygon its area, a circle πr².
        let circle = try? Region(id: "yard", center: Coordinate(latitude: 48.85, longitude: 2.35), radius: 100)
        #expect(circle.map(Zone.init) == Zone(id: "yard", name: "yard", area: Double.pi * 10_000))
    }

    @Test("a tracker is made by three retained messages and cleared by three empty ones, on the same topics")
    func messages() {
        let fix = EventFix(latitude: 48.85, longitude: 2.35, accuracy: 4.5, accuracyEstimated: false, mode: .threeD)
        let made = Self.discovery.messages(subject: "a/b+c", state: "North depot", fix: fix)
        #expect(
            made.map(\.topic) == [
                "homeassistant/device_tracker/\(HomeAssistantDiscovery.objectID("a/b+c"))/config",
                "geofence/a%2Fb%2Bc/tracker/state", "geofence/a%2Fb%2Bc/tracker/attributes",
            ])
        #expect(made.allSatisfy { $0.retain })
        #expect(String(decoding: made[1].payload, as: UTF8.self) == "North depot")
        #expect(
            String(decoding: made[2].payload, as: UTF8.self)
                == #"{"latitude":48.85,"longitude":2.35,"gps_accuracy":4.5}"#)
        let cleared = Self.discovery.clearing(subject: "a/b+c")
        #expect(cleared.map(\.topic) == made.map(\.topic))
        #expect(cleared.allSatisfy { $0.retain && $0.payload.isEmpty })
        // Without a status topic the tracker has no availability (always available).
        let always = HomeAssistantDiscovery(
            prefix: "ha", base: TopicTemplate(HomeAssistantDiscovery.defaultBase), statusTopic: nil)
        #expect(always.config("x")["availability_topic"] == nil)
        #expect(always.configTopic("x").hasPrefix("ha/device_tracker/"))
    }

    @Test("discovery prefixes: plain topic levels only")
    func prefixes() {
        #expect(HomeAssistantDiscovery.prefixProblem("homeassistant") == nil)
        #expect(HomeAssistantDiscovery.prefixProblem("site/ha") == nil)
        for bad in ["", "ha/+", "ha/#", "$SYS", "{subject}", "ha/", "/ha", "a//b"] {
            #expect(HomeAssistantDiscovery.prefixProblem(bad) != nil, "\(bad)")
        }
    }

    @Test("a tracker message's PUBACK, early or late, counts for its group and never for an event")
    func trackerAcknowledgements() {
        var ids = MessageIDs()
        ids.startBatch()
        #expect(ids.publishedExtra(3, group: 1) == false)
        #expect(ids.acknowledged(3) == .extra(1))
        // Early: the PUBACK before publish returned the id.
        #expect(ids.acknowledged(4) == nil)
        #expect(ids.publishedExtra(4, group: 2) == true)
        // A group given up: its late PUBACK acknowledges nothing, and an event reusing the id is the event's.
        #expect(ids.publishedExtra(5, group: 3) == false)
        ids.dropExtra(group: 3)
        #expect(ids.published(5, event: 0) == false)
        #expect(ids.acknowledged(5) == .event(0))
    }
}
