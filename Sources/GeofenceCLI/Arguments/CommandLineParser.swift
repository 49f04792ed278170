import GeofenceCore

/// What a command line asks for: run a command, show help, or nothing valid.
package enum ParseOutcome: Sendable {
    /// Run the command at `path` (subcommand names below the root) with these values.
    case run(path: [String], arguments: ParsedArguments)
    /// Print this text to stdout and exit 0.
    case help(String)
    /// Print `CommandLineParser.render(error)` to stderr and exit 64.
    case error(UsageError)
}

/// Parses a command line against a `CommandSpec` tree, and renders help and usage errors.
///
/// It does no I/O: the caller passes the arguments and environment in and prints what comes
/// back, so every behaviour is testable with plain values.
///
/// Rules, following swift-argument-parser: `--name value`, `--name=value` and `-n value`; a
/// value-taking option always consumes the next token, even one starting with `-`
/// (`--lon -0.1246`), unless that token is exactly one of the command's option names, which
/// is reported as a missing value (write `--name=--json` to pass such a value); `--` ends the
/// options; a token that looks like a negative number is a positional, not an option; `-h`,
/// `--help` and `help <subcommand>` show help, and help wins over any other error after the
/// command is known.
package struct CommandLineParser: Sendable {
    package let root: CommandSpec
    static let helpLine = "Show help information."

    /// Traps if the tree is inconsistent (see `problems(in:)`): a bad spec is a programming error.
    package init(root: CommandSpec) {
        let problems = Self.problems(in: root)
        precondition(problems.isEmpty, "invalid command tree:\n" + problems.joined(separator: "\n"))
        self.root = root
    }

    /// Parses `arguments`, without the program name (`CommandLine.arguments.dropFirst()`).
    /// `environment` supplies values for options that declare an environment variable.
    package func parse(_ arguments: [String], environment: [String: String] = [:]) -> ParseOutcome {
        var node = root
        var path: [String] = []
        var accepted = acceptedOptions(at: [])
        var flags = Set<String>()
        var given: [String: [String]] = [:]
        var positionals: [String] = []
        var optionsEnded = false
        var index = 0

        // Help wins: once the command is known, `--help` later on the line beats any error.
        func fail(_ message: String, helpWins: Bool = true) -> ParseOutcome {
            if helpWins {
                for token in arguments[index...] {
                    if token == "--" { break }
                    if token == "--help" || token == "-h" { return .help(helpText(for: path)) }
                }
            }
            return .error(UsageError(message, commandPath: path))
        }
        func isOptionName(_ token: String) -> Bool {
            token == "--help" || token == "-h" || accepted.contains { $0.name == token || $0.shortName == token }
        }

        while index < arguments.count {
            let token = arguments[index]
            index += 1
            if !optionsEnded && token == "--" {
                optionsEnded = true
                continue
            }
            if !optionsEnded && Self.looksLikeOption(token) {
                if token == "--help" || token == "-h" { return .help(helpText(for: path)) }
                var name = token
                var inlineValue: String?
                if token.hasPrefix("--"), let equals = token.firstIndex(of: "=") {
                    name = String(token[..<equals])
                    inlineValue = String(token[token.index(after: equals)...])
                }
                guard let option = accepted.first(where: { $0.name == name || $0.shortName == name }) else {
                    var message = "unknown option \(name)"
                    let candidates = accepted.map(\.name) + ["--help"]
                    if let suggestion = Suggestion.closest(to: name, among: candidates) {
                        message += "; did you mean \(suggestion)?"
                    }
                    return fail(message)
                }
                switch option.kind {
                case .flag:
                    if inlineValue != nil { return fail("\(option.name) does not take a value") }
                    flags.insert(option.name)
                case .value, .repeatingValue:
                    let value: String
                    if let inlineValue {
                        value = inlineValue
                    } else {
                        guard index < arguments.count, !isOptionName(arguments[index]) else {
                            return fail("missing value for \(option.name) <\(option.valueName)>")
                        }
                        value = arguments[index]
                        index += 1
                    }
                    if option.kind == .value && given[option.name] != nil {
                        return fail("\(option.name) given twice")
                    }
                    given[option.name, default: []].append(value)
                }
                continue
            }
            let children = subcommands(of: node, at: path)
            if !optionsEnded && !children.isEmpty {
                guard let child = children.first(where: { $0.name == token }) else {
                    var message = "unknown subcommand '\(token)'"
                    if let suggestion = Suggestion.closest(to: token, among: children.map(\.name)) {
                        message += "; did you mean '\(suggestion)'?"
                    }
                    return fail(message, helpWins: false)
                }
                let childAccepted = acceptedOptions(at: path + [child.name])
                let seen = given.keys.sorted() + flags.sorted()
                if let stray = seen.first(where: { name in !childAccepted.contains { $0.name == name } }) {
                    let parentName = commandName(path)
                    return fail(
                        "\(stray) is an option of '\(parentName)', not of '\(commandName(path + [child.name]))'")
                }
                node = child
                path.append(child.name)
                accepted = childAccepted
                continue
            }
            positionals.append(token)
        }

        if !subcommands(of: node, at: path).isEmpty && !node.runsWithoutSubcommand {
            let names = subcommands(of: node, at: path).map(\.name).joined(separator: ", ")
            return fail("missing subcommand; expected one of: \(names)", helpWins: false)
        }
        if path == ["help"] && hasBuiltinHelp {
            return helpCommand(positionals)
        }

        var values: [String: (values: [String], source: ParsedArguments.Source)] = [:]
        var remaining = positionals[...]
        for argument in node.arguments {
            if argument.isRepeating {
                if !remaining.isEmpty { values[argument.name] = (Array(remaining), .commandLine) }
                remaining = []
            } else if let first = remaining.popFirst() {
                values[argument.name] = ([first], .commandLine)
            }
            if !argument.isOptional && values[argument.name] == nil {
                return fail("missing required argument <\(argument.name)>", helpWins: false)
            }
        }
        if let extra = remaining.first {
            return fail("unexpected argument '\(extra)'", helpWins: false)
        }

        for option in accepted where option.kind != .flag {
            if let list = given[option.name] {
                values[option.name] = (list, .commandLine)
            } else if let variable = option.environmentVariable, let value = environment[variable], !value.isEmpty {
                values[option.name] = ([value], .environment(variable))
            } else if let value = option.defaultValue {
                values[option.name] = ([value], .defaultValue)
            } else if option.isRequired {
                return fail("missing required option \(option.name) <\(option.valueName)>", helpWins: false)
            }
        }

        let parsed = ParsedArguments(
            path: path, flags: flags, values: values, options: accepted, arguments: node.arguments)
        return .run(path: path, arguments: parsed)
    }

    /// The text for stderr: for a usage error, `Error: …`, the usage line and a pointer to the
    /// command's help; for any other error just `Error: …`. Ends with a newline.
    package func render(_ error: any CommandLineError) -> String {
        guard let usage = error as? UsageError, usage.showsUsage else { return "Error: \(error.message)\n" }
        let path = command(at: usage.commandPath) == nil ? [] : usage.commandPath
        return """
            Error: \(usage.message)
            Usage: \(usageLine(for: path))
            See '\(commandName(path)) --help' for more.

            """
    }

    /// What `render(_:)` says, as one JSON object for `--json`: `error` (the message), `exitCode`, and for a
    /// usage error `usage` (the usage line) and `help` (the command that shows the help).
    package func renderJSON(_ error: any CommandLineError) -> JSONObject {
        var o: JSONObject = ["error": .string(error.message), "exitCode": .number(Double(error.exitCode.rawValue))]
        if let usage = error as? UsageError, usage.showsUsage {
            let path = command(at: usage.commandPath) == nil ? [] : usage.commandPath
            o["usage"] = .string(usageLine(for: path))
            o["help"] = .string("\(commandName(path)) --help")
        }
        return o
    }

    /// `geofence hook add`, for the command at `path`.
    package func commandName(_ path: [String]) -> String {
        ([root.name] + path).joined(separator: " ")
    }

    /// The command at `path` below the root (including the built-in `help`), or nil.
    package func command(at path: [String]) -> CommandSpec? {
        var node = root
        for (depth, name) in path.enumerated() {
            guard let child = subcommands(of: node, at: Array(path[..<depth])).first(where: { $0.name == name }) else {
                return nil
            }
            node = child
        }
        return node
    }

    /// The options the command at `path` accepts: its own, then those its ancestors declare as
    /// inherited, nearest ancestor first.
    package func acceptedOptions(at path: [String]) -> [OptionSpec] {
        var chain = [root]
        for depth in path.indices {
            guard let next = command(at: Array(path[...depth])) else { break }
            chain.append(next)
        }
        let own = chain.removeLast().options
        return own + chain.reversed().flatMap { $0.options.filter(\.isInherited) }
    }

    // MARK: - Internals

    /// A command's subcommands; the root also gets the built-in `help` unless it declares one.
    func subcommands(of node: CommandSpec, at path: [String]) -> [CommandSpec] {
        if path.isEmpty && hasBuiltinHelp { return node.subcommands + [Self.helpCommandSpec] }
        return node.subcommands
    }

    var hasBuiltinHelp: Bool {
        !root.subcommands.isEmpty && !root.subcommands.contains { $0.name == "help" }
    }

    static let helpCommandSpec = CommandSpec(
        name: "help", abstract: "Show subcommand help information.",
        arguments: [.repeating("subcommands", help: "The subcommand to show help for, such as 'hook add'.")])

    /// `help hook add`: the help of the named command.
    private func helpCommand(_ names: [String]) -> ParseOutcome {
        var path: [String] = []
        for name in names {
            guard let node = command(at: path) else { break }
            let children = subcommands(of: node, at: path)
            guard children.contains(where: { $0.name == name }) else {
                var message = "unknown subcommand '\(name)'"
                if let suggestion = Suggestion.closest(to: name, among: children.map(\.name)) {
                    message += "; did you mean '\(suggestion)'?"
                }
                if children.isEmpty { message = "'\(commandName(path))' has no subcommands" }
                return .error(UsageError(message, commandPath: ["help"]))
            }
            path.append(name)
        }
        return .help(helpText(for: path))
    }

    /// Option-looking tokens start with `-`, but `-` alone (stdin) and negative numbers
    /// (`-0.1246`, `-.5`) are positionals.
    static func looksLikeOption(_ token: String) -> Bool {
        let utf8 = Array(token.utf8.prefix(2))
        guard utf8.count == 2, utf8[0] == UInt8(ascii: "-") else { return false }
        let second = utf8[1]
        return !(second >= UInt8(ascii: "0") && second <= UInt8(ascii: "9")) && second != UInt8(ascii: ".")
    }

    /// Every inconsistency in a command tree, one sentence each; empty when it is sound.
    package static func problems(in root: CommandSpec) -> [String] {
        var problems: [String] = []
        func check(_ node: CommandSpec, name: String, inherited: [OptionSpec]) {
            var seen: Set<String> = ["--help", "-h"]
            for option in node.options + inherited {
                if !option.name.hasPrefix("--") || option.name.count < 3 || option.name.contains("=") {
                    problems.append("'\(name)': option name '\(option.name)' must look like --name")
                }
                if let short = option.shortName,
                    !(short.count == 2 && short.hasPrefix("-") && short != "--" && short != "-.")
                        || short.last?.isNumber == true
                {
                    problems.append("'\(name)': short name '\(short)' must look like -x")
                }
                for key in [option.name] + (option.shortName.map { [$0] } ?? []) where !seen.insert(key).inserted {
                    problems.append("'\(name)': option name '\(key)' is used twice (or is reserved)")
                }
                if option.kind == .flag && (option.isRequired || option.defaultValue != nil) {
                    problems.append("'\(name)': flag '\(option.name)' cannot be required or have a default")
                }
            }
            var argumentNames = Set<String>()
            for (position, argument) in node.arguments.enumerated() {
                if !argumentNames.insert(argument.name).inserted || argument.name.hasPrefix("-")
                    || argument.name.isEmpty
                {
                    problems.append("'\(name)': argument name '\(argument.name)' is empty, repeated or starts with -")
                }
                if argument.isRepeating && position != node.arguments.count - 1 {
                    problems.append("'\(name)': repeating argument <\(argument.name)> must be last")
                }
                if !argument.isOptional && node.arguments[..<position].contains(where: \.isOptional) {
                    problems.append("'\(name)': required argument <\(argument.name)> follows an optional one")
                }
            }
            if !node.subcommands.isEmpty && !node.arguments.isEmpty {
                problems.append("'\(name)': a command with subcommands cannot take positional arguments")
            }
            var childNames = Set<String>()
            for child in node.subcommands {
                if !childNames.insert(child.name).inserted || child.name.isEmpty || child.name.hasPrefix("-")
                    || child.name.contains(" ")
                {
                    problems.append("'\(name)': subcommand name '\(child.name)' is empty, repeated or malformed")
                }
                check(child, name: name + " " + child.name, inherited: inherited + node.options.filter(\.isInherited))
            }
        }
        check(root, name: root.name, inherited: [])
        return problems
    }
}
