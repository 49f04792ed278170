/// The reconciler's rule: which status each requested region should have, from what holds now.
///
/// The store applies it in one SQL statement over every region (`MonitorStateRepository.reconcile`), for a million regions
/// in one pass; this is its twin in Swift, written from the same precedence, which the store's tests use as
/// the oracle and which says the rule where it can be read.

/// What the reconciler knows about the world when it decides every region's status.
package struct ReconcileInputs: Sendable, Equatable {
    /// The Location Services switch.
    package var servicesOn: Bool
    /// Whether usable fixes are arriving (false: gpsd unreachable, `silent` or `lost`).
    package var locationAvailable: Bool
    /// Owners whose regions must not be monitored (their effective permission is not `authorized`).
    package var deniedOwners: Set<UInt32>
    /// At most this many regions are active (nil: no limit); the oldest come first.
    package var maxRegions: Int?

    /// Nothing holds any region back: every region not expired is to be `monitoring`.
    package var allClear: Bool { servicesOn && locationAvailable && deniedOwners.isEmpty && maxRegions == nil }

    package init(servicesOn: Bool, locationAvailable: Bool, deniedOwners: Set<UInt32> = [], maxRegions: Int? = nil) {
        self.servicesOn = servicesOn
        self.locationAvailable = locationAvailable
        self.deniedOwners = deniedOwners
        self.maxRegions = maxRegions
    }
}

/// One region whose status the reconciler changed.
package struct RegionStatusChange: Sendable, Equatable {
    package var seq: Int64
    package var id: String
    package var status: RegionStatus

    package init(seq: Int64, id: String, status: RegionStatus) {
        self.seq = seq
        self.id = id
        self.status = status
    }
}

/// The precedence, first match wins, for every region not expired:
/// 1. Location Services off: `suspended: services-off`;
/// 2. the owner's effective permission is not `authorized`: `failed: permission-denied`;
/// 3. beyond the active-region limit (the oldest permitted regions come first): `pending: limit`;
/// 4. no usable fixes arrive: `failed: location-unavailable`;
/// 5. else `monitoring`, except that an `accuracyLimited` region stays so.
///
/// When nothing holds any region back (`ReconcileInputs.allClear`), only held regions change (`pending`,
/// `failed`, `suspended` become `monitoring`); the others keep what they have. Expired regions are never
/// touched, and no region is ever deleted.
package enum ReconcilePolicy {
    /// A requested region as the reconciler sees it.
    package struct Region: Sendable, Equatable {
        package var seq: Int64
        package var id: String
        /// Its creator (nil: made by the engine's own user, or before owners were recorded).
        package var owner: UInt32?
        package var status: RegionStatus

        package init(seq: Int64, id: String, owner: UInt32?, status: RegionStatus) {
            self.seq = seq
            self.id = id
            self.owner = owner
            self.status = status
        }
    }

    /// The status `region` should have; `rank` is its place (1-based, by seq) among the regions not expired
    /// whose owner is permitted (nil: its owner is denied).
    package static func desired(_ region: Region, rank: Int?, _ inputs: ReconcileInputs) -> RegionStatus {
        if inputs.allClear {
            switch region.status.kind {
            case .pending, .failed, .suspended: return .monitoring
            default: return region.status
            }
        }
        if !inputs.servicesOn { return RegionStatus(.suspended, reason: "services-off") }
        guard let rank else { return RegionStatus(.failed, reason: "permission-denied") }
        if let limit = inputs.maxRegions, limit > 0, rank > limit { return RegionStatus(.pending, reason: "limit") }
        if !inputs.locationAvailable { return RegionStatus(.failed, reason: "location-unavailable") }
        return region.status.kind == .accuracyLimited ? .accuracyLimited : .monitoring
    }

    /// The regions whose status changes, in seq order, with their new status.
    package static func changes(_ regions: [Region], _ inputs: ReconcileInputs) -> [RegionStatusChange] {
        var rank = 0
        var changes: [RegionStatusChange] = []
        for region in regions.sorted(by: { $0.seq < $1.seq }) where region.status.kind != .expired {
            let permitted = region.owner.map { !inputs.deniedOwners.contains($0) } ?? true
            if permitted { rank += 1 }
            let status = desired(region, rank: permitted ? rank : nil, inputs)
            if status != region.status {
                changes.append(RegionStatusChange(seq: region.seq, id: region.id, status: status))
            }
        }
        return changes
    }
}
