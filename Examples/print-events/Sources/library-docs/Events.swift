import Foundation
import Geofence

/// What a program does with the events: the typed fields for its decisions, `state(of:subject:)` for the
/// present, and the JSON (`Codable`) to keep or send on.
func follow(_ monitor: GeofenceMonitor) async throws {
    for try await event in monitor.events() {
        guard let type = event.type, let region = event.region else {
            // A state event: `stateType` says which (the source, a device, Location Services, ...).
            if event.stateType == .source { print("the source is \(event.status ?? ""): \(event.reason ?? "")") }
            continue
        }
        switch type {
        case .enter, .dwell:
            print("\(event.subject ?? "") is in \(region), \(event.distance ?? 0) m from its centre")
        case .exit:
            print("\(event.subject ?? "") left \(region) at \(event.time)")
        case .determined:
            print("\(event.subject ?? "") is \(event.state?.rawValue ?? "") \(region)")
        case .expired:
            print("\(region) expired")
        }
        if let subject = event.subject, let fix = event.fix {
            // The state as of the last commit, which may be later than this event (Core Location's
            // `CLMonitor.record(for:)`): inside, outside, unknown; nil once the region is gone.
            let now = try await monitor.state(of: region, subject: subject)
            print("\(subject) at \(fix.latitude), \(fix.longitude) ±\(fix.accuracy) m; now \(now?.rawValue ?? "-")")
        }
        // Encoded, an event is the JSON hooks get; decoded from that JSON, the event again.
        let json = try JSONEncoder().encode(event)
        _ = try JSONDecoder().decode(GeofenceEvent.self, from: json)
    }
}
