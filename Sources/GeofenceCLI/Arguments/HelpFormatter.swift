/// Help text and usage lines, laid out like swift-argument-parser's: OVERVIEW, USAGE,
/// ARGUMENTS, OPTIONS, SUBCOMMANDS, EXAMPLES, wrapped at 80 columns.
extension CommandLineParser {
    static let width = 80
    /// Help for options, arguments and subcommands starts in this column.
    static let helpColumn = 26

    /// The full help for the command at `path` (subcommand names below the root), ending with
    /// a newline. Traps when `path` names no command.
    package func helpText(for path: [String]) -> String {
        guard let node = command(at: path) else {
            preconditionFailure("no command at '\(commandName(path))'")
        }
        var sections: [[String]] = []

        if !node.abstract.isEmpty {
            sections.append(Self.wrap("OVERVIEW: " + node.abstract, restIndent: ""))
        }
        if let discussion = node.discussion, !discussion.isEmpty {
            sections.append(
                discussion.split(separator: "\n", omittingEmptySubsequences: false).flatMap { line in
                    let text = String(line)
                    let indent = String(text.prefix(while: { $0 == " " }))
                    let trimmed = text.dropFirst(indent.count)
                    let bullet = trimmed.hasPrefix("- ") || trimmed.hasPrefix("* ") ? "  " : ""
                    return text.isEmpty ? [""] : Self.wrap(text, restIndent: indent + bullet)
                })
        }
        sections.append(Self.wrapUsage(usageChunks(for: path)))

        if !node.arguments.isEmpty {
            sections.append(
                ["ARGUMENTS:"]
                    + node.arguments.flatMap { argument in
                        Self.row(Self.argumentLabel(argument), argument.help)
                    })
        }

        var optionRows = ["OPTIONS:"]
        for option in acceptedOptions(at: path) {
            var help = option.help
            if let shown = option.defaultDescription ?? option.defaultValue {
                help += " (default: \(shown))"
            }
            if let variable = option.environmentVariable {
                help += " (env: \(variable))"
            }
            var label = option.shortName.map { "\($0), " } ?? ""
            label += option.name + (option.kind == .flag ? "" : " <\(option.valueName)>")
            optionRows += Self.row(label, help)
        }
        optionRows += Self.row("-h, --help", Self.helpLine)
        sections.append(optionRows)

        let children = subcommands(of: node, at: path)
        if !children.isEmpty {
            var rows = ["SUBCOMMANDS:"]
            for child in children {
                rows += Self.row(child.name, child.abstract)
            }
            rows += ["", "  See '\(commandName(["help"] + path)) <subcommand>' for detailed help."]
            sections.append(rows)
        }

        if !node.examples.isEmpty {
            var rows = ["EXAMPLES:"]
            for (number, example) in node.examples.enumerated() {
                if number > 0 { rows.append("") }
                rows += Self.wrap("  " + example.description, restIndent: "  ")
                rows.append("    " + example.command)
            }
            sections.append(rows)
        }

        return sections.map { $0.joined(separator: "\n") }.joined(separator: "\n\n") + "\n"
    }

    /// The one-line usage of the command at `path`: the spec's `usage` when given, else
    /// generated (`geofence add [--name <name>] [--json] <id>`).
    package func usageLine(for path: [String]) -> String {
        usageChunks(for: path).joined(separator: " ")
    }

    /// The usage line in pieces that must not be split when wrapping (`[--lat <degrees>]`).
    func usageChunks(for path: [String]) -> [String] {
        guard let node = command(at: path) else { return [commandName(path)] }
        if let usage = node.usage { return usage.split(separator: " ").map(String.init) }
        var chunks = [commandName(path)]
        for option in acceptedOptions(at: path) {
            var chunk = option.name
            if option.kind != .flag { chunk += " <\(option.valueName)>" }
            if option.kind == .repeatingValue { chunk += " ..." }
            let required = option.isRequired && option.defaultValue == nil && option.environmentVariable == nil
            chunks.append(required ? chunk : "[\(chunk)]")
        }
        for argument in node.arguments {
            let label = Self.argumentLabel(argument)
            chunks.append(argument.isOptional ? "[\(label)]" : label)
        }
        if !subcommands(of: node, at: path).isEmpty {
            chunks.append(node.runsWithoutSubcommand ? "[<subcommand>]" : "<subcommand>")
        }
        return chunks
    }

    static func argumentLabel(_ argument: ArgumentSpec) -> String {
        "<\(argument.name)>" + (argument.isRepeating ? " ..." : "")
    }

    /// `  label                   help`, with the help wrapped in its column; a label too long
    /// for its column gets a line of its own.
    static func row(_ label: String, _ help: String) -> [String] {
        let indent = String(repeating: " ", count: helpColumn)
        let helpLines = wrap(help, restIndent: "", width: width - helpColumn)
        let labelText = "  " + label
        if labelText.count + 2 > helpColumn {
            return [labelText] + helpLines.map { indent + $0 }
        }
        let padded = labelText + String(repeating: " ", count: helpColumn - labelText.count)
        return [padded + helpLines[0]] + helpLines.dropFirst().map { indent + $0 }
    }

    /// `USAGE: ` followed by the chunks, continuation lines aligned after the prefix.
    static func wrapUsage(_ chunks: [String]) -> [String] {
        let prefix = "USAGE: "
        let indent = String(repeating: " ", count: prefix.count)
        var lines: [String] = []
        var line = prefix
        for chunk in chunks {
            if line.count > indent.count && line.count + 1 + chunk.count > width {
                lines.append(line)
                line = indent + chunk
            } else {
                line += (line.count == prefix.count && lines.isEmpty ? "" : " ") + chunk
            }
        }
        lines.append(line)
        return lines
    }

    /// Greedy word wrap at `width`; the text's own leading spaces are kept on the first line,
    /// later lines start with `restIndent`. A word longer than the line is not broken.
    static func wrap(_ text: String, restIndent: String, width: Int = width) -> [String] {
        let leading = String(text.prefix(while: { $0 == " " }))
        let words = text.dropFirst(leading.count).split(separator: " ", omittingEmptySubsequences: true)
        var lines: [String] = []
        var line = leading
        var lineHasWord = false
        for word in words {
            if lineHasWord && line.count + 1 + word.count > width {
                lines.append(line)
                line = restIndent + word
            } else {
                line += (lineHasWord ? " " : "") + word
            }
            lineHasWord = true
        }
        lines.append(line)
        return lines
    }
}
