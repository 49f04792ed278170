import GeofenceCore
import GeofenceStore
import Testing

@Suite("delivery order key")
struct DeliveryOrderKeyTests {
    /// The function that made the `order_key` column before the key was a type, kept here as the reference:
    /// existing stores hold its strings.
    private func oldOrderKey(hook: String, eventType: String, region: String?) -> String {
        let regionEventTypes = Set(RegionEventType.allCases.map(\.rawValue))
        if let region, regionEventTypes.contains(eventType) { return "\(hook)|region:\(region)" }
        return "\(hook)|type:\(eventType)"
    }

    @Test("the column holds exactly the strings it always did, and reads back to the same key")
    func storeValueIsTheOldString() {
        let hooks = ["region", "hook:a", "hook:notify-ops.v2"]
        let types = RegionEventType.allCases.map(\.rawValue) + StateEvent.Kind.allCases.map(\.rawValue)
        let regions: [String?] = [nil, "depot", "a|b", "type:x", "region:y", "Zürich 1"]
        for hook in hooks {
            for type in types {
                for region in regions {
                    let key = DeliveryOrderKey(hook: hook, eventType: type, region: region)
                    let old = oldOrderKey(hook: hook, eventType: type, region: region)
                    #expect(key.storeValue == old)
                    #expect(DeliveryOrderKey(storeValue: old) == key, "\(old)")
                    #expect(key.isPerRegion == old.contains("|region:"), "\(old)")
                }
            }
        }
    }

    @Test("region events are ordered per region, everything else per type")
    func scopes() {
        #expect(DeliveryOrderKey(hook: "region", eventType: "enter", region: "r").scope == .region("r"))
        #expect(DeliveryOrderKey(hook: "hook:h", eventType: "expired", region: "r").scope == .region("r"))
        #expect(DeliveryOrderKey(hook: "hook:h", eventType: "enter", region: nil).scope == .eventType("enter"))
        #expect(
            DeliveryOrderKey(hook: "hook:h", eventType: "region-status", region: "r").scope
                == .eventType("region-status"))
        #expect(DeliveryOrderKey(storeValue: "hook:h|region:a|type:b")?.scope == .region("a|type:b"))
    }

    @Test("a value in neither form is not a key")
    func unreadable() {
        for text in ["", "region", "hook:h|", "hook:h|zone:a", "|"] {
            #expect(DeliveryOrderKey(storeValue: text) == nil, "\(text)")
        }
        #expect(DeliveryOrderKey(storeValue: "|type:source") == DeliveryOrderKey(hook: "", scope: .eventType("source")))
    }
}
