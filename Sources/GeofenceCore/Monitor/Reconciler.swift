import Foundation

/// The reconciler's decisions, with no I/O: from what holds now (the Location Services switch, whether
/// usable fixes arrive, the owners denied, the active-region limit, the time) to what is to be done: which
/// regions change status (`ReconcilePolicy`, which the store runs as one statement), when failed regions are
/// next retried, and which regions the monitor loads and unloads.
///
/// It also remembers what lets the engine skip work: whether a region may be held back in the store (when
/// none may, a reconciliation with nothing holding regions back writes nothing), and when the next retry of
/// a failed region is due (looked for only then). The caller asks it (`plan`), does what it says against
/// the store, and tells it the outcome (`applied`, `failed`).
package struct Reconciler: Sendable, Equatable {
    /// At most this many regions are active (nil: no limit).
    package let maxRegions: Int?
    /// The Location Services switch.
    package private(set) var servicesOn = true
    /// Whether usable fixes arrive (false once the source is `silent` or `lost`, true again when `restored`).
    package private(set) var locationAvailable = true
    /// A reconciliation failed to write its statuses (a full disk) and must run again.
    package private(set) var owed = false
    /// Whether the last reconciliation held regions out of the monitor (a limit, denied owners).
    private var membershipRestricted = false
    /// Whether a region may be held back in the store (`pending`, `failed`, `suspended`): unknown at start,
    /// false after a reconciliation that held nothing.
    private var mayHoldRegions = true
    /// When the next retry of a failed region is due (nil: no region is failed; unknown at start).
    private var retryDue: Date? = .distantPast
    /// Rounds of retry of failed regions since the cause last cleared, for the backoff.
    private var retryRound = 0

    /// Exponential backoff with equal jitter, 1 s doubling to 5 minutes.
    package static let retryBackoff = ReconnectBackoff(base: 1, cap: 300, jitter: .equal)

    package init(maxRegions: Int?, servicesOn: Bool = true) {
        self.maxRegions = maxRegions
        self.servicesOn = servicesOn
    }

    /// What one reconciliation asks of the store.
    package struct Plan: Sendable, Equatable {
        package var inputs: ReconcileInputs
        /// When a region that fails now is first retried.
        package var retryAt: Date
        /// Whether the statuses are to be written: false when nothing holds regions back and none can be held
        /// in the store (the statement would look at every region and change none).
        package var writesStatuses: Bool
        /// Whether regions are held out of the monitor (a limit, denied owners).
        package var restricted: Bool
    }

    // MARK: Inputs

    /// The switch was set; returns whether it changed (then reconcile).
    package mutating func setServices(_ on: Bool) -> Bool {
        guard on != servicesOn else { return false }
        servicesOn = on
        return true
    }

    /// Usable fixes stopped or resumed arriving; returns whether that changed (then reconcile). Their
    /// return starts the retry backoff over.
    package mutating func setLocationAvailable(_ available: Bool) -> Bool {
        guard available != locationAvailable else { return false }
        locationAvailable = available
        if available { retryRound = 0 }
        return true
    }

    // MARK: A reconciliation

    /// What to do now; `unit` is a random number in [0, 1] for the backoff's jitter.
    package func plan(deniedOwners: Set<UInt32>, now: Date, unit: Double) -> Plan {
        let inputs = ReconcileInputs(
            servicesOn: servicesOn, locationAvailable: locationAvailable, deniedOwners: deniedOwners,
            maxRegions: maxRegions)
        return Plan(
            inputs: inputs, retryAt: now.addingTimeInterval(retryDelay(unit: unit)),
            writesStatuses: !(inputs.allClear && !mayHoldRegions),
            restricted: maxRegions != nil || !deniedOwners.isEmpty)
    }

    /// The store applied `plan` and changed `changes`; returns whether the monitor's regions must be
    /// brought in line with the active ones (`membership`), which then ends with `synced(plan)`.
    package mutating func applied(_ plan: Plan, changes: [RegionStatusChange]) -> Bool {
        mayHoldRegions = !plan.inputs.allClear
        if plan.inputs.allClear {
            retryDue = nil
        } else if changes.contains(where: { $0.status.kind == .failed }) {
            retryDue = min(retryDue ?? plan.retryAt, plan.retryAt)
        }
        return plan.restricted || membershipRestricted
    }

    /// The reconciliation of `plan` is complete.
    package mutating func synced(_ plan: Plan) {
        membershipRestricted = plan.restricted
        owed = false
    }

    /// The reconciliation could not be written (a full disk): the next tick runs it again.
    package mutating func failed() { owed = true }

    /// The regions the monitor must unload and load to hold exactly `wanted` (load in seq order).
    package static func membership(wanted: Set<Int64>, current: Set<Int64>) -> (unload: Set<Int64>, load: [Int64]) {
        (current.subtracting(wanted), wanted.subtracting(current).sorted())
    }

    /// The status changes `plan` makes to `regions`, for regions held in memory (the store runs the same
    /// rule as one statement).
    package static func changes(_ regions: [ReconcilePolicy.Region], _ plan: Plan) -> [RegionStatusChange] {
        plan.writesStatuses ? ReconcilePolicy.changes(regions, plan.inputs) : []
    }

    // MARK: Retries of failed regions

    /// The delay before the next retry; `unit` is a random number in [0, 1].
    package func retryDelay(unit: Double) -> Double {
        Self.retryBackoff.delay(forAttempt: retryRound, unit: unit)
    }

    /// Whether failed regions may have a retry due at `now` (the store is asked only then).
    package func retryIsDue(at now: Date) -> Bool {
        guard let retryDue else { return false }
        return retryDue <= now
    }

    /// The store counted `counted` due retries; `nextDue` is when the next one is due (nil: none failed).
    package mutating func retried(counted: Int, nextDue: Date?) {
        if counted > 0 { retryRound += 1 }
        retryDue = nextDue
    }
}
