import Foundation
import GeofenceCore

/// Which events `geofence events` shows: by region, subject, type and time (all given ones must hold).
package struct EventQuery: Sendable, Equatable {
    /// The region's id (compared in NFC, as ids are stored).
    package var region: String?
    /// The subject (a gpsd device or fleet vehicle), compared in NFC.
    package var subject: String?
    /// Event types (`enter`, `source`, ...); empty means all.
    package var types: [String] = []
    /// Events whose own time (fix time for region events) is at or after this.
    package var since: Date?

    package init(region: String? = nil, subject: String? = nil, types: [String] = [], since: Date? = nil) {
        self.region = region.map(VisibleName.normalized)
        self.subject = subject.map(VisibleName.normalized)
        self.types = types
        self.since = since
    }

    package var isEmpty: Bool { region == nil && subject == nil && types.isEmpty && since == nil }

    /// The same test in Swift, for events read one by one (`--follow`).
    package func matches(_ e: StoredEvent) -> Bool {
        if let region, e.region != region { return false }
        if let subject, e.subject != subject { return false }
        if !types.isEmpty, !types.contains(e.type) { return false }
        if let since, e.time < since { return false }
        return true
    }

    /// A condition on the `events` table (`1` when there is none) and its arguments.
    var condition: (sql: String, arguments: [(any DatabaseValueConvertible)?]) {
        var parts: [String] = []
        var arguments: [(any DatabaseValueConvertible)?] = []
        if let region {
            parts.append("region = ?")
            arguments.append(region)
        }
        if let subject {
            parts.append("subject = ?")
            arguments.append(subject)
        }
        if !types.isEmpty {
            parts.append("type IN (" + types.map { _ in "?" }.joined(separator: ", ") + ")")
            arguments += types.map { $0 }
        }
        if let since {
            parts.append("time >= ?")
            arguments.append(since.timeIntervalSince1970)
        }
        return (parts.isEmpty ? "1" : parts.joined(separator: " AND "), arguments)
    }
}
