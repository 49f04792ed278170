/// A client's authorization to use the engine (Core Location's model): each Unix user talking to the
/// control socket has one.
public enum AuthorizationStatus: String, Sendable, CaseIterable, Codable {
    /// Never decided; the client may ask (`geofence permission request`).
    case notDetermined
    case authorized
    case denied
    /// Set by the policy file; cannot be granted from the CLI.
    case restricted
}

/// The rules for who may do what, given the Location Services switch and the stored decisions.
///
/// Pure: the daemon gives it the facts (uid, stored status, switch, policy) and acts on the answer.
package struct AccessPolicy: Sendable, Equatable {
    /// The daemon's own uid: always authorized (as is root).
    package var daemonUID: UInt32
    /// Users the policy file restricts.
    package var restricted: Set<UInt32>

    package init(daemonUID: UInt32, restricted: Set<UInt32> = []) {
        self.daemonUID = daemonUID
        self.restricted = restricted
    }

    /// Root and the daemon's own user are trusted without asking.
    package func isPrivileged(_ uid: UInt32) -> Bool { uid == 0 || uid == daemonUID }

    /// The status a client has on its own, before the switch is considered.
    package func storedStatus(uid: UInt32, recorded: AuthorizationStatus?) -> AuthorizationStatus {
        if restricted.contains(uid) { return .restricted }
        if isPrivileged(uid) { return .authorized }
        return recorded ?? .notDetermined
    }

    /// Whether Location Services being off is what denies `uid` now: the one place that decides it. The
    /// control socket's refusal (`services-off`), its advice in `status` and `geofence status` all ask it. A
    /// client the policy file restricts stays restricted whatever the switch says: switching Location
    /// Services on would not let it in.
    package func isDeniedByServicesOff(uid: UInt32, recorded: AuthorizationStatus?, servicesOn: Bool) -> Bool {
        !servicesOn && storedStatus(uid: uid, recorded: recorded) != .restricted
    }

    /// What counts now: while Location Services are off every client is denied (its own status returns
    /// when they are switched on), as in Core Location.
    package func effectiveStatus(uid: UInt32, recorded: AuthorizationStatus?, servicesOn: Bool)
        -> AuthorizationStatus
    {
        if isDeniedByServicesOff(uid: uid, recorded: recorded, servicesOn: servicesOn) { return .denied }
        return storedStatus(uid: uid, recorded: recorded)
    }
}
