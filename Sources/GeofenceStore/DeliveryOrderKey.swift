import GeofenceCore

/// Which deliveries start one at a time, in id order: those of one hook for one region's events, or for one
/// type of state event.
///
/// Per hook, because one receiver that is down must not hold back another one; the region's own hooks
/// (enter, exit, dwell) share one key, since they usually reach the same receiver, which must see an exit
/// after its enter.
package struct DeliveryOrderKey: Sendable, Hashable, CustomStringConvertible {
    /// What the hook's deliveries are ordered within.
    package enum Scope: Sendable, Hashable {
        /// The events of one region (by id): they carry its subjects' locations.
        case region(String)
        /// The events of one type (state events, and region events without a region).
        case eventType(String)
    }

    /// The delivery's `hook`: `region` or `hook:<id>` (which never hold a `|`).
    package var hook: String
    package var scope: Scope

    package init(hook: String, scope: Scope) {
        self.hook = hook
        self.scope = scope
    }

    /// The key of a delivery of an event of `eventType` (of `region`, if any) to `hook`: region events
    /// are ordered per region, every other event per type.
    package init(hook: String, eventType: String, region: String?) {
        if let region, RegionEventType.carriesPosition(type: eventType, region: region) {
            self.init(hook: hook, scope: .region(region))
        } else {
            self.init(hook: hook, scope: .eventType(eventType))
        }
    }

    /// Whether the key orders one region's events (which carry locations).
    package var isPerRegion: Bool {
        if case .region = scope { return true }
        return false
    }

    package var description: String { storeValue }

    /// A delivery's `order_key` in neither of the forms geofence writes (edited by hand?).
    package struct Unreadable: Error, CustomStringConvertible {
        package var text: String
        package var description: String {
            "a delivery's order key \(JSONValue.string(text).serialized()) is in neither form geofence writes"
        }
    }
}

// MARK: The `order_key` column

/// The one place where a key meets its column, which stays TEXT, in the form stores have always held, so an
/// existing store's deliveries keep their order: written by binding the key, read by `init(storeValue:)`
/// (`DeliveryRepository` reads the column only through it).
extension DeliveryOrderKey: DatabaseValueConvertible {
    /// The `order_key` column: `<hook>|region:<id>` or `<hook>|type:<type>`, as stores have always held it.
    package var storeValue: String {
        switch scope {
        case .region(let id): "\(hook)|region:\(id)"
        case .eventType(let type): "\(hook)|type:\(type)"
        }
    }

    /// A key from the `order_key` column; nil for a value in neither form (which geofence never writes).
    package init?(storeValue: String) {
        // The hook comes first and holds no `|`; a region id after it may.
        guard let bar = storeValue.firstIndex(of: "|") else { return nil }
        let hook = String(storeValue[..<bar])
        let rest = storeValue[storeValue.index(after: bar)...]
        if rest.hasPrefix("region:") {
            self.init(hook: hook, scope: .region(String(rest.dropFirst("region:".count))))
        } else if rest.hasPrefix("type:") {
            self.init(hook: hook, scope: .eventType(String(rest.dropFirst("type:".count))))
        } else {
            return nil
        }
    }

    package var databaseValue: DatabaseValue { .text(storeValue) }

    package static func fromDatabaseValue(_ value: DatabaseValue) -> DeliveryOrderKey? {
        guard case .text(let text) = value else { return nil }
        return DeliveryOrderKey(storeValue: text)
    }
}
