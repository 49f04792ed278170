/// One node of the command tree: a command's name, help text, options, positional arguments
/// and subcommands, declared as a plain value.
///
/// A command with subcommands takes no positional arguments of its own; it runs by itself only
/// when `runsWithoutSubcommand` is set (otherwise a missing subcommand is a usage error).
package struct CommandSpec: Sendable {
    package var name: String
    /// One line, shown in the parent's SUBCOMMANDS list and at the top of the help.
    package var abstract: String
    /// Longer help shown under the abstract; line breaks are kept, long lines are wrapped.
    package var discussion: String?
    /// The full usage line (`geofence add <id> [options]`); generated from the options and
    /// arguments when nil.
    package var usage: String?
    package var options: [OptionSpec]
    package var arguments: [ArgumentSpec]
    package var subcommands: [CommandSpec]
    package var runsWithoutSubcommand: Bool
    package var examples: [Example]

    package init(
        name: String,
        abstract: String,
        discussion: String? = nil,
        usage: String? = nil,
        options: [OptionSpec] = [],
        arguments: [ArgumentSpec] = [],
        subcommands: [CommandSpec] = [],
        runsWithoutSubcommand: Bool = false,
        examples: [Example] = []
    ) {
        self.name = name
        self.abstract = abstract
        self.discussion = discussion
        self.usage = usage
        self.options = options
        self.arguments = arguments
        self.subcommands = subcommands
        self.runsWithoutSubcommand = runsWithoutSubcommand
        self.examples = examples
    }
}

/// A worked example shown in a command's EXAMPLES section.
package struct Example: Sendable, Equatable {
    /// What the example does, one sentence (`Watch a 200 m circle around the depot`).
    package var description: String
    /// The command line, as typed.
    package var command: String

    package init(_ description: String, _ command: String) {
        self.description = description
        self.command = command
    }
}

/// A named option: a flag (`--json`), an option taking one value (`--radius 200`), or one that
/// may be repeated (`--on enter --on exit`).
package struct OptionSpec: Sendable {
    package enum Kind: Sendable, Equatable {
        case flag
        case value
        case repeatingValue
    }

    /// The long name with its dashes, `--radius`; also the key for reading the parsed value.
    package var name: String
    /// The short name with its dash, `-r`, if any. `-h` is reserved for help.
    package var shortName: String?
    package var kind: Kind
    /// Shown as `<meters>` in usage and help.
    package var valueName: String
    package var help: String
    package var isRequired: Bool
    /// Used when the option is absent from the command line and the environment.
    package var defaultValue: String?
    /// Shown as `(default: …)` instead of `defaultValue`, for defaults computed elsewhere
    /// (`$XDG_STATE_HOME/geofence`).
    package var defaultDescription: String?
    /// An environment variable consulted when the option is absent (`GEOFENCE_STATE_DIR`),
    /// before `defaultValue`; shown as `(env: …)`.
    package var environmentVariable: String?
    /// Accepted, and listed in the help, by this command and every command below it.
    package var isInherited: Bool

    package init(
        name: String,
        shortName: String? = nil,
        kind: Kind,
        valueName: String? = nil,
        help: String,
        isRequired: Bool = false,
        defaultValue: String? = nil,
        defaultDescription: String? = nil,
        environmentVariable: String? = nil,
        isInherited: Bool = false
    ) {
        self.name = name
        self.shortName = shortName
        self.kind = kind
        self.valueName = valueName ?? String(name.drop(while: { $0 == "-" }))
        self.help = help
        self.isRequired = isRequired
        self.defaultValue = defaultValue
        self.defaultDescription = defaultDescription
        self.environmentVariable = environmentVariable
        self.isInherited = isInherited
    }

    /// A flag such as `--json`: present or absent, never with a value.
    package static func flag(
        _ name: String, short: String? = nil, help: String, inherited: Bool = false
    ) -> OptionSpec {
        OptionSpec(name: name, shortName: short, kind: .flag, help: help, isInherited: inherited)
    }

    /// An option taking exactly one value; giving it twice is a usage error.
    package static func value(
        _ name: String, short: String? = nil, valueName: String? = nil, help: String, required: Bool = false,
        default defaultValue: String? = nil, defaultDescription: String? = nil, environment: String? = nil,
        inherited: Bool = false
    ) -> OptionSpec {
        OptionSpec(
            name: name, shortName: short, kind: .value, valueName: valueName, help: help, isRequired: required,
            defaultValue: defaultValue, defaultDescription: defaultDescription, environmentVariable: environment,
            isInherited: inherited)
    }

    /// An option that may be given several times, each time with one value.
    package static func repeating(
        _ name: String, short: String? = nil, valueName: String? = nil, help: String, required: Bool = false,
        inherited: Bool = false
    ) -> OptionSpec {
        OptionSpec(
            name: name, shortName: short, kind: .repeatingValue, valueName: valueName, help: help,
            isRequired: required, isInherited: inherited)
    }
}

/// A positional argument. Required ones come first, then optional ones; at most one may repeat
/// and it must be last.
package struct ArgumentSpec: Sendable {
    /// Shown as `<id>`; also the key for reading the parsed value.
    package var name: String
    package var help: String
    package var isOptional: Bool
    package var isRepeating: Bool

    package init(name: String, help: String, isOptional: Bool = false, isRepeating: Bool = false) {
        self.name = name
        self.help = help
        self.isOptional = isOptional
        self.isRepeating = isRepeating
    }

    package static func required(_ name: String, help: String) -> ArgumentSpec {
        ArgumentSpec(name: name, help: help)
    }

    package static func optional(_ name: String, help: String) -> ArgumentSpec {
        ArgumentSpec(name: name, help: help, isOptional: true)
    }

    /// Takes all remaining positional values; `atLeastOne` makes an empty list an error.
    package static func repeating(_ name: String, help: String, atLeastOne: Bool = false) -> ArgumentSpec {
        ArgumentSpec(name: name, help: help, isOptional: !atLeastOne, isRepeating: true)
    }
}
