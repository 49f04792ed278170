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

    public init(_ message: String, commandPath: [String]) {
        self.message = message
        self.commandPath = commandPath
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
