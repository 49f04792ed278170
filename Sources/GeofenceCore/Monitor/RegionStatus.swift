import Foundation

/// Where a requested region stands in monitoring: the store keeps it, the monitor may or may not.
///
/// Rendered as `monitoring`, `pending: limit`, `failed: location-unavailable`, `suspended: services-off`,
/// `accuracyLimited`, `expired`.
package struct RegionStatus: Sendable, Equatable, Hashable, CustomStringConvertible {
    package enum Kind: String, Sendable, CaseIterable {
        case monitoring
        case pending
        case failed
        case suspended
        case accuracyLimited
        case expired
    }

    package var kind: Kind
    package var reason: String?

    package init(_ kind: Kind, reason: String? = nil) {
        self.kind = kind
        self.reason = reason
    }

    package static let monitoring = RegionStatus(.monitoring)
    package static let accuracyLimited = RegionStatus(.accuracyLimited)
    package static let expired = RegionStatus(.expired)

    package var description: String {
        if let reason { return "\(kind.rawValue): \(reason)" }
        return kind.rawValue
    }

    /// Parses the rendered form back (the store keeps kind and reason apart, but users type this form).
    package init?(_ text: String) {
        let parts = text.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
        guard let first = parts.first, let kind = Kind(rawValue: first) else { return nil }
        self.kind = kind
        self.reason = parts.count > 1 && !parts[1].isEmpty ? parts[1] : nil
    }
}
