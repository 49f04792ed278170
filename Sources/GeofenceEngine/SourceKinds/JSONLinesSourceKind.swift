import Foundation
import GeofenceCore

/// `--source json:PATH`: a fleet's gpsd-style TPV JSON lines from a file, a FIFO, or `-` for standard input.
package struct JSONLinesSourceKind: SourceKind {
    package var path: String

    package static let form = "json:PATH"
    package static let prefix = "json:"
    package static let valueName = "json:path"
    package static let help =
        "TPV JSON lines (the `device` field names the vehicle) from a file, a FIFO, or - for standard input"

    package static func names(_ text: String) -> Bool { text.hasPrefix("json:") && text.count > 5 }

    package static func parse(_ text: String, _ arguments: SourceArguments) throws -> JSONLinesSourceKind {
        JSONLinesSourceKind(path: String(text.dropFirst(5)))
    }

    package func makeSource(configuration c: DaemonConfiguration, logger: Logger) throws -> any LocationSource {
        // A file that is not there is said now, before loading regions: under systemd a non-zero exit is what
        // `Restart=on-failure` acts on, and the engine would otherwise wait on nothing.
        try JSONLineSource.checkOpenable(path)
        return JSONLineSource(path: path, liveness: c.liveness, filter: c.filter, logger: logger)
    }
}
