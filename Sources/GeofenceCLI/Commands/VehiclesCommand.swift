import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

/// `geofence vehicles`: the subjects the store knows, and `--prune` of the ones gone quiet.
struct VehiclesCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "vehicles",
        abstract: "List the vehicles the store knows: their last fix and the regions they are inside.",
        discussion: """
            Every subject (a gpsd device or a fleet vehicle) with its state in the store, by name: when its \
            last fix was, where, how accurate, and the regions it is inside. An engine keeps in memory only \
            the vehicles heard from within --idle-after (1d by default); the others are here until they \
            return. --prune removes the vehicles not heard from for the given time, with their region \
            states (their events stay in the outbox); a vehicle that comes back later starts over, with \
            `determined`. Prune with the engine stopped: one that runs refuses it (exit 75).
            """,
        options: [
            .value(
                "--prune", valueName: "older-than",
                help: "Remove the vehicles not heard from for this long (e.g. 30d), and print how many.")
        ],
        examples: [
            Example("Which vehicles are where:", "geofence vehicles"),
            Example("Forget vehicles not seen for a month (engine stopped):", "geofence vehicles --prune 30d"),
        ])

    /// `--prune`'s age, more than 0 seconds.
    let pruneAge: Double?

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        if a.value("--prune") != nil {
            guard let age = try a.duration("--prune"), age > 0 else {
                throw c.usage("invalid value for --prune: must be more than 0")
            }
            pruneAge = age
        } else {
            pruneAge = nil
        }
    }

    func run(_ c: CommandContext) throws {
        let store = try c.openStore()
        if let age = pruneAge {
            if try c.route().socket != nil {
                throw CommandFailure(
                    "an engine serves \(c.stateDirectory): stop it before pruning vehicles (it may hold them in "
                        + "memory), or let it forget quiet ones with geofence run --idle-after", exitCode: .tempFail)
            }
            let gone = try store.monitorState.pruneVehicles(lastFixBefore: c.now.addingTimeInterval(-age))
            if c.json {
                c.console.print(JSONValue.object(["pruned": .array(gone.map { .string($0) })]).serialized())
            } else {
                c.console.message(
                    "Removed \(gone.count) vehicle(s) not heard from since \(TimestampParser.format(c.now.addingTimeInterval(-age)))."
                )
            }
            return
        }
        let vehicles = try store.monitorState.vehicles()
        if c.json {
            c.console.print(JSONValue.array(vehicles.map { .object(Self.json($0)) }).serialized())
            return
        }
        guard !vehicles.isEmpty else {
            c.console.message("No vehicles yet: none has sent a fix.")
            return
        }
        var table = TextTable(["SUBJECT", "LAST FIX", "LAT", "LON", "ACCURACY", "INSIDE"])
        for v in vehicles {
            table.add([
                v.subject, v.lastFixTime.map { TimestampParser.format($0) } ?? "-",
                v.lastFix.map { String(format: "%.6f", $0.latitude) } ?? "-",
                v.lastFix.map { String(format: "%.6f", $0.longitude) } ?? "-",
                v.lastFix.map { String(format: "%.1f m", $0.accuracy) } ?? "-",
                v.inside.isEmpty ? "-" : v.inside.joined(separator: ", "),
            ])
        }
        c.console.write(table.render())
    }

    static func json(_ v: VehicleSummary) -> JSONObject { VehicleReport.json(v) }
}
