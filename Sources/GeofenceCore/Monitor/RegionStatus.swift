import Foundation

/// Where a requested region stands in monitoring: the store keeps it, the monitor may or may not.
///
/// Rendered as `monitoring`, `pending: limit`, `failed: location-unavailable`, `suspended: services-off`,
/// `accuracyLimited`, `expired`.
public struct RegionStatus: Sendable, Equatable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, CaseIterable {
        case monitoring
        case pending
        case failed
        case suspended
        case accuracyLimited
        case expired
    }

    public var kind: Kind
    public var reason: String?

    public init(_ kind: Kind, reason: String? = nil) {
        self.kind = kind
        self.reason = reason
    }

    public static let monitoring = RegionStatus(.monitoring)
    public static let accuracyLimited = RegionStatus(.accuracyLimited)
    public static let expired = RegionStatus(.expired)

    public var description: String {
        if let reason { return "\(kind.rawValue): \(reason)" }
        return kind.rawValue
    }

    /// Parses the rendered form back (the store keeps kind and reason apart, but users type this form).
    public init?(_ text: String) {
        let parts = text.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
        guard let first = parts.first, let kind = Kind(rawValue: first) else { return nil }
        self.kind = kind
        self.reason = parts.count > 1 && !parts[1].isEmpty ? parts[1] : nil
    }
}
