import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence remove`: regions by id, all or none.
struct RemoveCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "remove",
        abstract: "Remove regions by id.",
        discussion: """
            All or nothing: if any id does not exist, nothing is removed. Events already recorded are kept. \
            With --nats, from a cluster's bucket instead (Docs/cluster.md), by the same rule.
            """,
        options: [CommandTree.requestID] + ClusterTarget.options,
        arguments: [.repeating("id", help: "Ids of the regions to remove.", atLeastOne: true)],
        examples: [Example("Stop watching the depot:", "geofence remove depot")])

    let removal: RemovalByID
    /// `--nats`: the cluster's bucket instead of the local store.
    let cluster: ClusterTarget?

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        removal = try RemovalByID(parsing: a, context: c)
        cluster = try ClusterTarget(parsing: a, context: c)
    }

    func run(_ c: CommandContext) throws {
        let result: JSONValue
        if let cluster {
            let store = try cluster.connect()
            let removed = try ClusterTarget.perform {
                try store.remove(ids: removal.ids, requestID: removal.requestID)
            }
            result = ["removed": .array(removed.map { .string($0) })]
        } else {
            result = try removal.send(.remove, check: "geofence list", c)
        }
        if c.json {
            c.console.print(result.serialized())
        } else {
            for id in result["removed"]?.arrayValue?.compactMap(\.stringValue) ?? [] {
                c.console.print("Removed region \(RegionCommands.quoted(id))")
            }
        }
    }
}
