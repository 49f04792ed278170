import Foundation
import GeofenceCore
import GeofenceEngine

/// `geofence run --print-config`: every setting of `run` as it would take effect, and where each came from
/// (the command line, its environment variable, the default). Passwords are never printed: `(set)`.
enum RunSettings {
    /// Where a setting's value came from.
    enum Origin: String {
        case commandLine = "command-line"
        case environment
        case defaultValue = "default"
        case unset

        init(_ source: ParsedArguments.Source?) {
            switch source {
            case .commandLine?: self = .commandLine
            case .environment?: self = .environment
            case .defaultValue?: self = .defaultValue
            case nil: self = .unset
            }
        }
    }

    struct Row {
        var name: String
        var variable: String?
        var value: String?
        var origin: Origin
    }

    /// The options `run --print-config` lists: the state directory, the socket and every valued option of
    /// `run`, in the help's order.
    static var options: [OptionSpec] {
        [CommandTree.stateDir, CommandTree.socket] + RunCommand.spec.options.filter { $0.kind != .flag }
    }

    static func rows(_ c: CommandContext, configuration: DaemonConfiguration) -> [Row] {
        var rows: [Row] = []
        for option in options {
            var value = c.arguments.value(option.name)
            var origin = Origin(c.arguments.source(of: option.name))
            switch option.name {
            case "--state-dir":
                value = c.stateDirectory
            case "--socket":
                value = configuration.socketPath
            case "--source":
                // A secret in it (an MQTT URL's password) is replaced, never shown.
                value = value.map { type(of: configuration.source).printable($0) }
            default:
                if value == nil {
                    value = configuration.source.printedDefault(
                        option.name, stateDirectory: configuration.stateDirectory)
                }
            }
            if value == nil, let described = option.defaultDescription {
                value = described
            }
            if origin == .unset, value != nil { origin = .defaultValue }
            rows.append(Row(name: option.name, variable: option.environmentVariable, value: value, origin: origin))
        }
        for secret in configuration.source.printedSecrets(c.sourceArguments) {
            let origin = secret.option.map { Origin(c.arguments.source(of: $0)) } ?? .environment
            rows.append(Row(name: secret.name, variable: secret.variable, value: "(set)", origin: origin))
        }
        return rows
    }

    static func print(_ c: CommandContext, configuration: DaemonConfiguration) {
        let rows = rows(c, configuration: configuration)
        if c.json {
            let list: [JSONValue] = rows.map { row in
                .object([
                    "name": .string(row.name), "variable": row.variable.map { .string($0) } ?? .null,
                    "value": row.value.map { .string($0) } ?? .null, "from": .string(row.origin.rawValue),
                ])
            }
            c.console.print(JSONValue.object(["settings": .array(list)]).serialized())
            return
        }
        var table = TextTable(["SETTING", "VARIABLE", "VALUE", "FROM"])
        for row in rows {
            table.add([row.name, row.variable ?? "-", row.value ?? "-", row.origin.rawValue])
        }
        c.console.write(table.render())
    }
}
