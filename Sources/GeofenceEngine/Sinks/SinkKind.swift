import Foundation
import GeofenceCore
import GeofenceStore

/// A kind of sink: its name in `sink.add` (`"kind"`) and in the store, the definition it makes of
/// `sink.add`'s params with its own checks, and the `EventSink` it makes of a stored definition. Each kind is
/// a file of its own and one line in `SinkKinds.all`.
package protocol SinkKind: Sendable {
    /// Its name: `sink.add`'s `kind` and the store's `sinks.kind` (`mqtt`).
    static var kind: String { get }

    /// The definition from `sink.add`'s params: what this kind reads of them (the URL, topics, credentials,
    /// `format`), checked, or a `ControlError` (`badRequest`, `invalid`) saying what is wrong. `SinkRequest`
    /// fills in what every kind has: the id, the event types (`on`), who made it and when.
    static func definition(_ p: JSONObject) throws -> SinkDefinition

    /// The sink a stored definition describes; throws when it cannot be made now (a password file that cannot
    /// be read), and the supervisor tries again every second.
    static func makeSink(_ definition: SinkDefinition, context: SinkContext) throws -> any EventSink
}

/// What a sink is made with, besides its definition.
package struct SinkContext: Sendable {
    /// The engine's state directory (an MQTT sink's client id is made from it).
    package var stateDirectory: String
    /// The engine's environment (a password named by `--password-env`).
    package var environment: [String: String]
    package var logger: Logger

    package init(stateDirectory: String, environment: [String: String], logger: Logger) {
        self.stateDirectory = stateDirectory
        self.environment = environment
        self.logger = logger
    }
}

/// The kinds of sink.
package enum SinkKinds {
    package static let all: [any SinkKind.Type] = [
        MQTTSinkKind.self, HTTPSinkKind.self,
    ]

    /// The kind a request or a stored sink names, or nil.
    package static func kind(named name: String) -> (any SinkKind.Type)? {
        all.first { $0.kind == name }
    }

    /// The one error for a kind this engine does not know, in a request or in the store.
    package static func unknown(_ name: String) -> String {
        "unknown kind of sink \"\(name.prefix(32))\": this engine knows \(all.map { $0.kind }.joined(separator: ", "))"
    }
}
