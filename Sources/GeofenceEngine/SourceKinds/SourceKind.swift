import Foundation
import GeofenceCore

/// A kind of source `geofence run --source` can name: how its text is recognised and checked, what the help
/// and `--print-config` say of it, and how the engine makes its `LocationSource`. Each kind is a file of its
/// own in this folder and one line in `SourceKinds.all`.
package protocol SourceKind: Sendable {
    /// How `--source` writes it, for errors: `json:PATH`.
    static var form: String { get }
    /// The start of its `--source` text, for errors that name the fleet kinds: `json:`.
    static var prefix: String { get }
    /// Its part of `--source`'s value name in the help: `json:path`.
    static var valueName: String { get }
    /// Its phrase in `--source`'s help, after "Where fixes come from: ".
    static var help: String { get }
    /// Whether `--subject` applies: a single receiver, not a fleet whose fixes name their vehicles.
    static var takesSubject: Bool { get }
    /// The options of `run` only this kind reads (`--mqtt-ca`), listed in `run`'s help after `--source`,
    /// each with its environment variable (`GEOFENCE_MQTT_CA`) and its line in `--print-config`.
    static var options: [SourceOption] { get }

    /// Whether `--source TEXT` names this kind (`parse` then says whether the rest is right).
    static func names(_ text: String) -> Bool
    /// The kind from the `--source` text and the other options of `run` it reads; throws
    /// `SourceOptionError` for what is wrong, never echoing a secret.
    static func parse(_ text: String, _ arguments: SourceArguments) throws -> Self
    /// Checks this kind's own options whatever the source is (`run` calls it for every kind after its
    /// engine settings, as it always checked them): a wrong value is refused even while another kind is used.
    static func check(_ arguments: SourceArguments) throws
    /// The `--source` text as `--print-config` shows it (a password replaced by `(set)`).
    static func printable(_ text: String) -> String
    /// A secret in the `--source` text to keep out of `ps`: its bytes (the first, a separator, is kept), and
    /// the environment variable that passes it to the re-executed engine instead.
    static func commandLineSecret(in text: String) -> CommandLineSecret?

    /// What `--print-config` shows for `option` when it is not given and this kind fills it in; nil: its help's
    /// default.
    func printedDefault(_ option: String, stateDirectory: String) -> String?
    /// The secrets `--print-config` lists as `(set)`, each with the option it came from.
    func printedSecrets(_ arguments: SourceArguments) -> [PrintedSecret]

    /// The source, checked as far as it can be before the regions are loaded (a file that is not there, a
    /// broker that refuses): an error then stops `run` with a non-zero exit that systemd acts on.
    func makeSource(configuration: DaemonConfiguration, logger: Logger) throws -> any LocationSource
}

extension SourceKind {
    package static var takesSubject: Bool { false }
    package static var options: [SourceOption] { [] }
    package static func check(_ arguments: SourceArguments) throws {}
    package static func printable(_ text: String) -> String { text }
    package static func commandLineSecret(in text: String) -> CommandLineSecret? { nil }
    package func printedDefault(_ option: String, stateDirectory: String) -> String? { nil }
    package func printedSecrets(_ arguments: SourceArguments) -> [PrintedSecret] { [] }
}

/// The kinds of source, in the order the help and errors name them.
package enum SourceKinds {
    package static let all: [any SourceKind.Type] = [
        GPSDSourceKind.self,
        JSONLinesSourceKind.self,
        MQTTSourceKind.self,
        NATSSourceKind.self,
    ]

    /// The kind `--source TEXT` names, or nil.
    package static func kind(named text: String) -> (any SourceKind.Type)? {
        all.first { $0.names(text) }
    }

    /// `"TEXT" is not gpsd, json:PATH or mqtt://HOST[:PORT]/TOPIC`.
    package static func notAKind(_ text: String) -> String {
        "\"\(text)\" is not \(list(all.map { $0.form }, last: " or "))"
    }

    /// `--subject` with a fleet source: names the kinds it applies to and those it does not.
    package static var subjectRefusal: String {
        let single = all.filter { $0.takesSubject }.map { $0.prefix }
        let fleets = all.filter { !$0.takesSubject }.map { $0.prefix }
        return "--subject names a \(list(single, last: " or ")) receiver: a fleet's vehicles are named by their fixes "
            + "(--source \(list(fleets, last: " or ")))"
    }

    /// `--source`'s value name in the help: `gpsd|json:path|mqtt://host/topic`.
    package static var valueName: String { all.map { $0.valueName }.joined(separator: "|") }

    /// `--source`'s help: each kind's phrase.
    package static var help: String {
        "Where fixes come from: \(list(all.map { $0.help }, separator: "; ", last: "; or "))."
    }

    private static func list(_ items: [String], separator: String = ", ", last: String) -> String {
        guard items.count > 1 else { return items.first ?? "" }
        return items.dropLast().joined(separator: separator) + last + items[items.count - 1]
    }
}

/// What a source kind reads besides its `--source` text: `run`'s other options (from the command line or
/// the environment) and the environment.
package struct SourceArguments {
    /// An option's value (`--mqtt-ca`), or nil when not given.
    package var value: (String) -> String?
    package var environment: [String: String]

    package init(value: @escaping (String) -> String?, environment: [String: String]) {
        self.value = value
        self.environment = environment
    }
}

/// An option of `run` that a source kind reads (`SourceKind.options`); the CLI declares it as a valued option.
package struct SourceOption: Sendable {
    package var name: String
    package var valueName: String
    package var help: String
    /// The value taken when it is not given (the parser applies it).
    package var defaultValue: String?
    /// What the help says of its default when the value is not a constant.
    package var defaultDescription: String?

    package init(
        _ name: String, valueName: String, help: String, default defaultValue: String? = nil,
        defaultDescription: String? = nil
    ) {
        self.name = name
        self.valueName = valueName
        self.help = help
        self.defaultValue = defaultValue
        self.defaultDescription = defaultDescription
    }
}

/// Why a source kind refuses its options; the CLI says it as it says its own errors.
package enum SourceOptionError: Error, Equatable {
    /// `invalid value for OPTION: REASON` (exit 64).
    case invalid(option: String, reason: String)
    /// A usage error (exit 64).
    case usage(String)
    /// A file an option names cannot be read (exit 66).
    case unreadable(String)
}

/// A secret in the `--source` text (`SourceKind.commandLineSecret(in:)`).
package struct CommandLineSecret: Equatable {
    /// Its bytes in the text, from the separator before it (`:` of `user:password@`).
    package var span: Range<Int>
    /// The variable that passes it on instead.
    package var variable: String
    package var value: String

    package init(span: Range<Int>, variable: String, value: String) {
        self.span = span
        self.variable = variable
        self.value = value
    }
}

/// A secret `--print-config` lists (`mqtt-password`), never its value.
package struct PrintedSecret: Equatable {
    package var name: String
    package var variable: String
    /// The option it came from; nil: the environment variable.
    package var option: String?

    package init(name: String, variable: String, option: String?) {
        self.name = name
        self.variable = variable
        self.option = option
    }
}
