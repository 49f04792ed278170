import Foundation
import GeofenceCore
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

/// `--source mqtt://[USER@]HOST[:PORT]/FILTER` (mqtts:// for TLS): a fleet's fixes from a broker, a QoS 1
/// subscription with a persistent session, with the `--mqtt-*` options of `run`.
package struct MQTTSourceKind: SourceKind {
    package var address: MQTTAddress
    /// The session's client id; nil: one made from the host name and the state directory
    /// (`MQTTAddress.clientID`).
    package var clientID: String?
    /// How its messages name their vehicles (`--mqtt-vehicle`).
    package var naming = MQTTVehicleNaming.payload
    /// When a message is acknowledged to the broker (`--mqtt-ack`): once its fix is committed (the default,
    /// nothing lost at a kill), or on receipt.
    package var acknowledgement = MQTTAcknowledgement.commit
    /// What OwnTracks waypoints do (`--mqtt-waypoints`): nothing (the default), or become regions.
    package var waypoints = MQTTWaypoints.off

    package static let form = "mqtt://HOST[:PORT]/TOPIC"
    package static let prefix = "mqtt://"
    package static let valueName = "mqtt://host/topic"
    package static let help = """
        an MQTT broker's topic filter, mqtt://[USER@]HOST[:PORT]/FILTER (QoS 1, a persistent session; TPV or \
        OwnTracks JSON), mqtts:// for TLS
        """

    /// Declared here, read by `parse` (and `--mqtt-vehicle`, `--mqtt-ack` checked by `check` for every kind).
    package static let options: [SourceOption] = [
        SourceOption(
            "--mqtt-client-id", valueName: "id",
            help: """
                The MQTT client id, which names the broker's session for this engine: messages published \
                while it is down wait under it.
                """, defaultDescription: "geofence- and a hash of the host name and state directory"),
        SourceOption(
            "--mqtt-vehicle", valueName: "payload|topic|level:N",
            help: """
                What names a vehicle in an MQTT message: the payload (a TPV's `device`, else the topic; \
                OwnTracks' USER/DEVICE), the whole topic, or one level of it (level:2 of gpsfleet/truck-1 \
                is truck-1). Name by the topic when receivers share a device name (gpspipe's \
                /dev/ttyACM0): with payload naming, a name seen on two topics is warned about once and \
                counted in status.
                """, default: "payload"),
        SourceOption(
            "--mqtt-ack", valueName: "commit|receipt",
            help: """
                When an MQTT message is acknowledged to the broker: once its fix is committed to the \
                store (nothing lost at a kill; the broker sends the rest again), or on receipt (a kill \
                loses the fixes taken and not yet committed). With mqtts:// (libmosquitto), on receipt \
                whatever this says. Docs/mqtt.md: the broker's in-flight window this needs.
                """, default: "commit"),
        SourceOption(
            "--mqtt-waypoints", valueName: "off|regions",
            help: """
                What OwnTracks waypoints (_type waypoint and waypoints, on owntracks/USER/DEVICE/waypoint[s]) \
                do: nothing, or become regions of that phone, owntracks/USER/DEVICE/TST (added, changed, \
                and removed when the phone's list leaves them out), checked as any region. Subscribe to \
                owntracks/# to receive them. Docs/mqtt.md: OwnTracks phones.
                """, default: "off"),
        SourceOption(
            "--mqtt-password-file", valueName: "file",
            help: """
                Read the MQTT password from this file (one line), keeping it out of `ps` as \
                GEOFENCE_MQTT_PASSWORD does; not with a password in the URL.
                """),
        SourceOption(
            "--mqtt-ca", valueName: "file",
            help: """
                With mqtts://, trust the CA certificates in this PEM file for the broker's certificate \
                (its host name is checked too).
                """, defaultDescription: "the system's CA certificates"),
        SourceOption(
            "--mqtt-cert", valueName: "file",
            help: """
                With mqtts://, present this client certificate (PEM) to a broker that asks for one \
                (mosquitto's require_certificate); with --mqtt-key.
                """),
        SourceOption(
            "--mqtt-key", valueName: "file",
            help:
                "The private key (PEM, without a passphrase) of --mqtt-cert; keep it readable by the engine only."
        ),
    ]

    package static func names(_ text: String) -> Bool { text.hasPrefix("mqtt://") || text.hasPrefix("mqtts://") }

    /// The address with its password from the URL, `--mqtt-password-file` or `GEOFENCE_MQTT_PASSWORD` (the
    /// last two keep it out of `ps`); never echoed, even in errors.
    package static func parse(_ text: String, _ arguments: SourceArguments) throws -> MQTTSourceKind {
        var address: MQTTAddress
        do {
            address = try MQTTAddress(parsing: text)
        } catch {
            throw SourceOptionError.invalid(option: "--source", reason: "\(error)")
        }
        if let file = arguments.value("--mqtt-password-file") {
            guard address.password == nil else {
                throw SourceOptionError.usage("--mqtt-password-file and a password in the --source URL: give only one")
            }
            guard let data = FileManager.default.contents(atPath: file) else {
                let reason = access(file, R_OK) == 0 ? "cannot be read" : String(cString: strerror(errno))
                throw SourceOptionError.unreadable("cannot read the MQTT password file \(file): \(reason)")
            }
            var password = String(decoding: data, as: UTF8.self)
            if password.hasSuffix("\n") { password.removeLast() }
            address.password = password
        } else if address.password == nil, let password = arguments.environment["GEOFENCE_MQTT_PASSWORD"] {
            address.password = password
        }
        if let ca = arguments.value("--mqtt-ca") {
            guard address.tls else { throw SourceOptionError.usage("--mqtt-ca is for TLS: use mqtts:// in --source") }
            guard access(ca, R_OK) == 0 else {
                throw SourceOptionError.unreadable(
                    "cannot read the MQTT CA file \(ca): \(String(cString: strerror(errno)))")
            }
            address.caFile = ca
        }
        let certificate = arguments.value("--mqtt-cert")
        let key = arguments.value("--mqtt-key")
        if certificate != nil || key != nil {
            guard address.tls else {
                throw SourceOptionError.usage("--mqtt-cert and --mqtt-key are for TLS: use mqtts:// in --source")
            }
            guard let certificate, let key else {
                throw SourceOptionError.usage(
                    "--mqtt-cert and --mqtt-key go together: the certificate and its private key")
            }
            for (what, file) in [("certificate", certificate), ("key", key)] where access(file, R_OK) != 0 {
                throw SourceOptionError.unreadable(
                    "cannot read the MQTT \(what) file \(file): \(String(cString: strerror(errno)))")
            }
            address.certificateFile = certificate
            address.keyFile = key
        }
        if address.password != nil, address.username == nil {
            throw SourceOptionError.usage("an MQTT password needs a user name: mqtt://USER@HOST[:PORT]/TOPIC")
        }
        var clientID: String?
        if let id = arguments.value("--mqtt-client-id") {
            guard !id.isEmpty, id.utf8.count <= 65535, !id.contains(where: \.isNewline) else {
                throw SourceOptionError.invalid(
                    option: "--mqtt-client-id", reason: "must be 1 to 65535 bytes, one line")
            }
            clientID = id
        }
        var kind = MQTTSourceKind(address: address, clientID: clientID)
        // A wrong value is refused by `check`, which `run` calls after its engine settings (their errors first).
        kind.naming = (try? naming(arguments)) ?? .payload
        kind.acknowledgement = (try? acknowledgement(arguments)) ?? .commit
        kind.waypoints = (try? waypoints(arguments)) ?? .off
        return kind
    }

    package static func check(_ arguments: SourceArguments) throws {
        _ = try naming(arguments)
        _ = try acknowledgement(arguments)
        _ = try waypoints(arguments)
    }

    static func waypoints(_ arguments: SourceArguments) throws -> MQTTWaypoints {
        guard let text = arguments.value("--mqtt-waypoints") else { return .off }
        guard let mode = MQTTWaypoints(rawValue: text) else {
            throw SourceOptionError.invalid(option: "--mqtt-waypoints", reason: "\"\(text)\" is not off or regions")
        }
        return mode
    }

    static func naming(_ arguments: SourceArguments) throws -> MQTTVehicleNaming {
        guard let text = arguments.value("--mqtt-vehicle") else { return .payload }
        guard let naming = MQTTVehicleNaming(parsing: text) else {
            throw SourceOptionError.usage(
                "invalid value for --mqtt-vehicle: \"\(text)\" is not payload, topic or level:N (N from 1)")
        }
        return naming
    }

    static func acknowledgement(_ arguments: SourceArguments) throws -> MQTTAcknowledgement {
        guard let text = arguments.value("--mqtt-ack") else { return .commit }
        guard let mode = MQTTAcknowledgement(rawValue: text) else {
            throw SourceOptionError.invalid(option: "--mqtt-ack", reason: "\"\(text)\" is not commit or receipt")
        }
        return mode
    }

    /// A password in the URL is replaced, never shown.
    package static func printable(_ text: String) -> String {
        guard let span = MQTTAddress.passwordSpan(in: text) else { return text }
        let bytes = Array(text.utf8)
        return String(decoding: bytes[..<span.lowerBound], as: UTF8.self) + ":(set)"
            + String(decoding: bytes[span.upperBound...], as: UTF8.self)
    }

    package static func commandLineSecret(in text: String) -> CommandLineSecret? {
        guard let span = MQTTAddress.passwordSpan(in: text),
            let password = (try? MQTTAddress(parsing: text))?.password
        else { return nil }
        return CommandLineSecret(span: span, variable: "GEOFENCE_MQTT_PASSWORD", value: password)
    }

    package func printedDefault(_ option: String, stateDirectory: String) -> String? {
        guard option == "--mqtt-client-id", clientID == nil else { return nil }
        return MQTTAddress.clientID(stateDirectory: stateDirectory)
    }

    package func printedSecrets(_ arguments: SourceArguments) -> [PrintedSecret] {
        guard address.password != nil else { return [] }
        let option: String?
        if MQTTAddress.passwordSpan(in: arguments.value("--source") ?? "") != nil {
            option = "--source"
        } else if arguments.value("--mqtt-password-file") != nil {
            option = "--mqtt-password-file"
        } else {
            option = nil
        }
        return [PrintedSecret(name: "mqtt-password", variable: "GEOFENCE_MQTT_PASSWORD", option: option)]
    }

    package func makeSource(configuration c: DaemonConfiguration, logger: Logger) throws -> any LocationSource {
        // As for a file: a broker that cannot be reached or refuses is said now, before loading regions.
        let mqtt = MQTTSource(
            address: address, clientID: clientID ?? MQTTAddress.clientID(stateDirectory: c.stateDirectory),
            liveness: c.liveness, filter: c.filter, logger: logger, naming: naming,
            acknowledgement: acknowledgement)
        if waypoints == .regions {
            mqtt.waypointWriter = OwnTracksRegionWriter(
                store: try StateStore(directory: c.stateDirectory), logger: logger)
        }
        try mqtt.connect()
        let ack =
            mqtt.acknowledgesAfterCommit
            ? "acknowledged once committed"
            : acknowledgement == .commit
                ? "acknowledged on receipt: libmosquitto, for TLS, cannot wait for the commit"
                : "acknowledged on receipt"
        let waypointsSaid = waypoints == .regions ? "; OwnTracks waypoints become regions" : ""
        logger.info(
            "subscribed to \(address) as client \(mqtt.clientID) (QoS 1, persistent session; \(ack)\(waypointsSaid))")
        return mqtt
    }
}
