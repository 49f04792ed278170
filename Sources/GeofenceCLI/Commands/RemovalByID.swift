import Foundation
import GeofenceCore
import GeofenceEngine

/// What `remove`, `hook remove` and `sink remove` share: the ids to remove (all or nothing) and the request id
/// the change is recorded under, read once; sent as one request, which says what became of it if the engine
/// dies before answering.
struct RemovalByID {
    let ids: [String]
    let requestID: String

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        ids = a.values("id")
        requestID = try RegionCommands.requestID(a.value("--request-id"), c)
    }

    /// Sends `method` for the ids; `check` is the command that shows whether an unanswered request was applied.
    func send(_ method: ControlMethod, check: String, _ c: CommandContext) throws -> JSONValue {
        try c.interruptible(requestID: requestID, check: check) {
            try c.call(method, ["ids": .array(ids.map { .string($0) }), "requestId": .string(requestID)])
        }
    }
}
