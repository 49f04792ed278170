import Foundation
import Geofence

/// Regions, validated as they are made (a `RegionValidationError` names the field at fault).
func regions() throws -> [Region] {
    // Enter and exit by default; a dwell time asks for `dwell` too.
    let bay = try Region(
        id: "customer-42", name: "Customer 42, loading bay",
        center: Coordinate(latitude: 51.5007, longitude: -0.12027), radius: 50, dwell: .seconds(90))
    // Only some vehicles, and only until a time.
    let roadworks = try Region(
        id: "roadworks-a4", center: Coordinate(latitude: 51.4935, longitude: -0.1466), radius: 300,
        notify: [.enter], expires: Date(timeIntervalSinceNow: 7 * 86_400), subjects: ["truck-7", "truck-9"])
    return [bay, roadworks]
}

/// The decisions' settings (`geofence run`'s defaults), and how often the store is looked at.
func configuration() -> GeofenceMonitor.Configuration {
    var configuration = GeofenceMonitor.Configuration()
    configuration.idleLimit = .seconds(3600)  // a vehicle quiet for an hour leaves memory (not the store)
    configuration.syncInterval = .seconds(1)  // regions changed by the `geofence` CLI are followed each second
    return configuration
}
