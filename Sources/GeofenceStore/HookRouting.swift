import GeofenceCore

/// Which hooks an event goes to, and as whom each runs: the decision of the dispatcher, apart from the
/// reading and writing around it.
///
/// An event goes to its region's own hook for its type (enter, exit, dwell: the region's `--on-enter` and
/// the like), then to every global hook registered for its type (`geofence hook add --on`, or for all
/// types). Each delivery is ordered by its `DeliveryOrderKey`. With `runAsCreators` (a daemon running as
/// root) each runs as the user who registered its hook: the region's creator for a region hook, the hook's
/// creator for a global one; root's, and those of unknown creators, run as the daemon itself.
package struct HookRouting: Sendable {
    /// A region's part in routing, as it is now (not as it was at the event): its hooks decoded once from its
    /// `hooks` column, when the dispatcher first meets the region in a batch, and kept for the batch's events.
    package struct RegionHooks: Sendable, Equatable {
        package var name: String?
        /// The region's own hooks: commands by event type.
        package var commands: [NotifyKind: String]
        package var createdBy: UInt32?

        package init(name: String?, commands: [NotifyKind: String], createdBy: UInt32?) {
            self.name = name
            self.commands = commands
            self.createdBy = createdBy
        }

        /// From the region's row: `hooks` is its `hooks` column (nil: none). A column geofence cannot read
        /// (edited by hand) gives no region hook; the global hooks still run.
        package init(name: String?, hooks: String?, createdBy: UInt32?) {
            self.init(
                name: name, commands: hooks.flatMap(RegionRepository.decodeHooks) ?? [:], createdBy: createdBy)
        }
    }

    /// One delivery to make.
    package struct Route: Sendable, Equatable {
        /// The `hook` column: `region`, or `hook:<id>`.
        package var hook: String
        package var command: String
        /// The region's name when the event has a region that still exists.
        package var regionName: String?
        /// The uid to run as; nil: as the daemon.
        package var runAs: UInt32?
        package var orderKey: DeliveryOrderKey
    }

    /// The `hook` of a region's own hook.
    package static let regionHook = "region"
    package var globals: [GlobalHook]
    package var runAsCreators: Bool

    package init(globals: [GlobalHook], runAsCreators: Bool) {
        self.globals = globals
        self.runAsCreators = runAsCreators
    }

    /// The deliveries of an event of `eventType`, of region `region` (nil for none) whose row is `regionHooks`
    /// (nil when the event has no region or the region is gone): the region's hook first, then the globals in
    /// their order.
    package func routes(eventType: String, region: String?, regionHooks: RegionHooks?) -> [Route] {
        var routes: [Route] = []
        let name = regionHooks?.name
        if let kind = NotifyKind(rawValue: eventType), let command = regionHooks?.commands[kind] {
            routes.append(route(HookRouting.regionHook, command, name, regionHooks?.createdBy, eventType, region))
        }
        for hook in globals where hook.matches(eventType) {
            routes.append(route(hook.reference, hook.command, name, hook.createdBy, eventType, region))
        }
        return routes
    }

    private func route(
        _ hook: String, _ command: String, _ name: String?, _ owner: UInt32?, _ eventType: String, _ region: String?
    ) -> Route {
        Route(
            hook: hook, command: command, regionName: name,
            runAs: runAsCreators ? owner.flatMap { $0 == 0 ? nil : $0 } : nil,
            orderKey: DeliveryOrderKey(hook: hook, eventType: eventType, region: region))
    }
}
