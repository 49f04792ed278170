/// An error that ends a command with a message for the user and a specific exit code.
///
/// `CommandLineParser.render(_:)` turns one into the text for stderr.
package protocol CommandLineError: Error, Sendable {
    /// One line, without the `Error: ` prefix.
    var message: String { get }
    var exitCode: ExitCode { get }
}

/// The command line was wrong: exit 64, rendered with the command's usage line and a pointer
/// to its help.
package struct UsageError: CommandLineError, Equatable {
    package var message: String
    /// The subcommand names below the root (`["hook", "add"]`) whose usage is shown.
    package var commandPath: [String]
    /// Whether the usage line and the pointer to the help follow the message: not for a bad value that came
    /// from an environment variable (the command line was right; the line names the variable).
    package var showsUsage: Bool

    package init(_ message: String, commandPath: [String], showsUsage: Bool = true) {
        self.message = message
        self.commandPath = commandPath
        self.showsUsage = showsUsage
    }

    package var exitCode: ExitCode { .usage }
}

/// The input data was wrong (an import file, a stored value): exit 65.
package struct DataError: CommandLineError, Equatable {
    package var message: String

    package init(_ message: String) {
        self.message = message
    }

    package var exitCode: ExitCode { .dataError }
}

/// Any other failure with a chosen exit code (69 daemon unavailable, 77 permission denied, …).
package struct CommandFailure: CommandLineError, Equatable {
    package var message: String
    package var exitCode: ExitCode

    package init(_ message: String, exitCode: ExitCode) {
        self.message = message
        self.exitCode = exitCode
    }
}
