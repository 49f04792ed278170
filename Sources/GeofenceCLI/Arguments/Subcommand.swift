/// A command as one type, as swift-argument-parser has it: its spec (name, help, options, examples), the
/// validation that turns the parsed command line into typed values, and what it does, together.
///
/// `init(parsing:context:)` reads the command's own options, by name, in this one place and throws the
/// usage errors (exit 64) before anything is touched; `run` does the work with the typed values. The
/// options every command inherits (`--state-dir`, `--json`, `--socket`) are read by `CommandContext`.
/// A command is registered by one line in `CommandTree.commands`, which builds the tree the parser
/// walks and which dispatch follows to the type.
protocol GeofenceSubcommand: Sendable {
    static var spec: CommandSpec { get }
    init(parsing arguments: ParsedArguments, context: CommandContext) throws
    func run(_ context: CommandContext) throws
}

/// One entry of `CommandTree.commands`: a command that is one type; a group (a name and its help) whose
/// subcommands are types; or a command that runs by itself and has subcommands too.
enum CommandEntry: Sendable {
    case command(any GeofenceSubcommand.Type)
    case group(CommandSpec, [any GeofenceSubcommand.Type])
    /// A command that runs by itself and has subcommands too (`events`, `events retry`).
    case parent(any GeofenceSubcommand.Type, [any GeofenceSubcommand.Type])

    /// The node the parser and the help see.
    var spec: CommandSpec {
        switch self {
        case .command(let type):
            return type.spec
        case .group(var spec, let types):
            spec.subcommands = types.map { $0.spec }
            return spec
        case .parent(let type, let types):
            var spec = type.spec
            spec.subcommands = types.map { $0.spec }
            return spec
        }
    }

    /// The command type at `path` below this entry (`path` starts with the entry's own name).
    func command(at path: ArraySlice<String>) -> (any GeofenceSubcommand.Type)? {
        switch self {
        case .command(let type):
            return path.count == 1 && path.first == type.spec.name ? type : nil
        case .group(let spec, let types):
            guard path.count == 2, path.first == spec.name else { return nil }
            return types.first { $0.spec.name == path.last }
        case .parent(let type, let types):
            guard path.first == type.spec.name else { return nil }
            return path.count == 1 ? type : path.count == 2 ? types.first { $0.spec.name == path.last } : nil
        }
    }
}
