import Foundation
import GeofenceCore
import GeofenceGPSD

/// `--source gpsd` (the default): one receiver, through gpsd at `--gpsd`.
package struct GPSDSourceKind: SourceKind {
    package var address: GPSDAddress

    package init(address: GPSDAddress = .default) { self.address = address }

    package static let form = "gpsd"
    package static let prefix = "gpsd"
    package static let valueName = "gpsd"
    package static let help = "gpsd"
    package static var takesSubject: Bool { true }

    package static func names(_ text: String) -> Bool { text == "gpsd" }

    /// `--gpsd`, else `GEOFENCE_GPSD` (the parser applies the environment), else localhost:2947.
    package static func parse(_ text: String, _ arguments: SourceArguments) throws -> GPSDSourceKind {
        guard let given = arguments.value("--gpsd") else { return GPSDSourceKind() }
        do {
            return GPSDSourceKind(address: try GPSDAddress(parsing: given))
        } catch {
            throw SourceOptionError.invalid(option: "--gpsd", reason: "\(error)")
        }
    }

    package func makeSource(configuration c: DaemonConfiguration, logger: Logger) throws -> any LocationSource {
        GPSDLocationSource(configuration: .init(address: address, liveness: c.liveness), subject: c.subject)
    }
}
