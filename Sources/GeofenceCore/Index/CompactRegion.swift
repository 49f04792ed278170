import Foundation

/// A region with only the fields most regions have (id, centre, radius, notify, creator, creation time),
/// for loading many into a `RegionMonitor` at once without building a `Region` for each: a daemon's start
/// with a million regions read back from its store.
///
/// It is a `Region` with no name, dwell, expiry, hooks or subject filter: `RegionMonitor` keeps exactly
/// what it would keep for that `Region`, and gives that `Region` back from `region(id:)`. The
/// initializer checks what keeps a region sound, cheaply: anything it is unsure of (an id that is not
/// plain printable ASCII, for one) makes it fail, and the caller builds the `Region` instead, which
/// checks everything and says what is wrong.
package struct CompactRegion: Sendable, Equatable {
    package let id: String
    package let center: Coordinate
    package let radius: Double
    package let notify: Set<NotifyKind>
    package let createdBy: UInt32?
    package let createdAt: Date?

    package init?(
        id: String, center: Coordinate, radius: Double, notify: Set<NotifyKind>, createdBy: UInt32?,
        createdAt: Date?
    ) {
        // The checks `Region` makes whatever its limits; the id only when it is plain ASCII, where "no
        // control character" means bytes 0x20 to 0x7E.
        guard !id.isEmpty, id.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
        guard center.isValid, radius.isFinite, radius > 0, !notify.contains(.dwell) else { return nil }
        self.id = id
        self.center = center
        self.radius = radius
        self.notify = notify
        self.createdBy = createdBy
        self.createdAt = createdAt
    }
}
