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
        discussion: "All or nothing: if any id does not exist, nothing is removed. Events already recorded are kept.",
        options: [CommandTree.requestID],
        arguments: [.repeating("id", help: "Ids of the regions to remove.", atLeastOne: true)],
        examples: [Example("Stop watching the depot:", "geofence remove depot")])

    let removal: RemovalByID

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        removal = try RemovalByID(parsing: a, context: c)
    }

    func run(_ c: CommandContext) throws {
        let result = try removal.send(.remove, check: "geofence list", c)
        if c.json {
            c.console.print(result.serialized())
        } else {
            for id in result["removed"]?.arrayValue?.compactMap(\.stringValue) ?? [] {
                c.console.print("Removed region \(RegionCommands.quoted(id))")
            }
        }
    }
}
