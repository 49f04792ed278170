/// An error that ends a command with a message for the user and a specific exit code.
///
/// `CommandLineParser.render(_:)` turns one into the text for stderr.
public protocol CommandLineError: Error, Sendable {
    /// One line, without the `Error: ` prefix.
    var message: String { get }
    var exitCode: ExitCode { get }
}

/// The command line was wrong: exit 64, rendered with the command's usage line and a pointer
/// to its help.
public struct UsageError: CommandLineError, Equatable {
    public var message: String
    /// The subcommand names below the root (`["hook", "add"]`) whose usage is shown.
    public var commandPath: [String]
    /// Whether the usage line and the pointer to the help follow the message: not for a bad value that came
    /// from an environment variable (the command line was right; the line names the variable).
    public var showsUsage: Bool

    public init(_ message: String, commandPath: [String], showsUsage: Bool = true) {
        self.message = message
        self.commandPath = commandPath
        self.showsUsage = showsUsage
    }

    public var exitCode: ExitCode { .usage }
}

/// The input data was wrong (an import file, a stored value): exit 65.
public struct DataError: CommandLineError, Equatable {
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var exitCode: ExitCode { .dataError }
}

/// Any other failure with a chosen exit code (69 daemon unavailable, 77 permission denied, …).
public struct CommandFailure: CommandLineError, Equatable {
    public var message: String
    public var exitCode: ExitCode

    public init(_ message: String, exitCode: ExitCode) {
        self.message = message
        self.exitCode = exitCode
    }
}
