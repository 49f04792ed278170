extension CommandTree {
    static let socket = OptionSpec.value(
        "--socket", valueName: "path", help: "The engine's control socket.",
        defaultDescription: ControlSocket.helpDefault, environment: "GEOFENCE_SOCKET", inherited: true)

    /// `permission`'s own help; its subcommands are `PermissionListCommand`, ... (`CommandTree.commands`).
    static let permission = CommandSpec(
        name: "permission",
        abstract: "Manage which users may use the engine.",
        discussion: """
            Each Unix user talking to the engine has a status: notDetermined (never decided), authorized, \
            denied, or restricted (from the policy file $GEOFENCE_POLICY, default /etc/geofence/policy.json, \
            as {"restricted": ["alice", 1001]}; it cannot be granted here). Root and the engine's own user are \
            always authorized. An unauthorized user may only ask for `status` and `permission request`. \
            While Location Services are off, everyone's effective status is denied; each user's own status \
            returns when they are switched on. Every change is an `authorization` event.
            """)
}
