import Foundation
import GeofenceCore

/// The values of one parsed command line, read by option name (`--radius`) or argument name
/// (`id`).
///
/// An option absent from the command line takes its environment variable, then its default.
/// The typed readers turn a bad value into a `UsageError` naming the option, so a command can
/// simply `try` them. Asking for a name the command does not declare is a programming error
/// and traps.
package struct ParsedArguments: Sendable {
    /// Where a value came from, for error messages.
    package enum Source: Sendable, Equatable {
        case commandLine
        case environment(String)
        case defaultValue
    }

    /// The subcommand names below the root, `["hook", "add"]`; empty for the root itself.
    package let path: [String]
    private var flags: Set<String>
    private var values: [String: (values: [String], source: Source)]
    private let declaredOptions: [String: OptionSpec]
    private let declaredArguments: Set<String>

    init(
        path: [String], flags: Set<String>, values: [String: (values: [String], source: Source)],
        options: [OptionSpec], arguments: [ArgumentSpec]
    ) {
        self.path = path
        self.flags = flags
        self.values = values
        self.declaredOptions = Dictionary(options.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        self.declaredArguments = Set(arguments.map(\.name))
    }

    /// Whether a flag was given.
    package func flag(_ name: String) -> Bool {
        guard let option = declaredOptions[name], option.kind == .flag else {
            preconditionFailure("'\(name)' is not a flag of '\(path.joined(separator: " "))'")
        }
        return flags.contains(name)
    }

    /// The value of a single-value option or positional argument, if any.
    package func value(_ name: String) -> String? {
        checkDeclared(name)
        return values[name]?.values.last
    }

    /// All values of a repeating option or argument, in command-line order.
    package func values(_ name: String) -> [String] {
        checkDeclared(name)
        return values[name]?.values ?? []
    }

    /// Where the value of `name` came from; nil when it has none.
    package func source(of name: String) -> Source? {
        checkDeclared(name)
        return values[name]?.source
    }

    /// The value of `name`, or a usage error saying it is required (for requirements that
    /// depend on other options, which a spec cannot declare).
    package func required(_ name: String) throws(UsageError) -> String {
        guard let value = value(name) else {
            throw usageError("missing required \(display(name))")
        }
        return value
    }

    /// The value of `name` converted by `parse`; nil when absent. A conversion failure becomes
    /// `invalid value for --lat: <reason>`.
    package func value<T>(_ name: String, as parse: (String) throws(ValueError) -> T) throws(UsageError) -> T? {
        guard let text = value(name) else { return nil }
        do throws(ValueError) {
            return try parse(text)
        } catch {
            throw invalid(name, error)
        }
    }

    /// Like `value(_:as:)`, and a usage error when absent.
    package func required<T>(_ name: String, as parse: (String) throws(ValueError) -> T) throws(UsageError) -> T {
        guard let value = try value(name, as: parse) else {
            throw usageError("missing required \(display(name))")
        }
        return value
    }

    /// Every value of a repeating option or argument converted by `parse`.
    package func values<T>(_ name: String, as parse: (String) throws(ValueError) -> T) throws(UsageError) -> [T] {
        var result: [T] = []
        for text in values(name) {
            do throws(ValueError) {
                result.append(try parse(text))
            } catch {
                throw invalid(name, error)
            }
        }
        return result
    }

    /// A finite decimal number (`NumberParser.finite`).
    package func double(_ name: String) throws(UsageError) -> Double? {
        try value(name, as: NumberParser.finite)
    }

    /// A whole number (`NumberParser.integer`).
    package func integer(_ name: String) throws(UsageError) -> Int? {
        try value(name, as: NumberParser.integer)
    }

    /// A latitude in degrees within [-90, 90].
    package func latitude(_ name: String) throws(UsageError) -> Double? {
        try value(name, as: CoordinateParser.latitude)
    }

    /// A longitude in degrees within [-180, 180].
    package func longitude(_ name: String) throws(UsageError) -> Double? {
        try value(name, as: CoordinateParser.longitude)
    }

    /// A duration in seconds (`DurationParser`).
    package func duration(_ name: String) throws(UsageError) -> Double? {
        try value(name, as: DurationParser.parse)
    }

    /// A timestamp (`TimestampParser`).
    package func timestamp(_ name: String) throws(UsageError) -> Date? {
        try value(name, as: TimestampParser.parse)
    }

    /// A duration from `now` or a timestamp (`ExpiryParser`).
    package func expiry(_ name: String, now: Date) throws(UsageError) -> Date? {
        try value(name) { (text: String) throws(ValueError) -> Date in
            try ExpiryParser.parse(text, now: now)
        }
    }

    /// A usage error for this command, for checks a command makes itself
    /// (`throw arguments.usageError("--radius must be greater than 0")`).
    package func usageError(_ message: String) -> UsageError {
        UsageError(message, commandPath: path)
    }

    private func invalid(_ name: String, _ error: ValueError) -> UsageError {
        invalidValue(name, error.message)
    }

    /// `invalid value for --radius <metres>: REASON`; for a value from the environment, one line that names
    /// the variable first (`invalid value for GEOFENCE_MAX_REGIONS (--max-regions): REASON`), without the
    /// usage line, since the command line itself was right.
    package func invalidValue(_ name: String, _ reason: String) -> UsageError {
        if case .environment(let variable) = values[name]?.source {
            return UsageError(
                "invalid value for \(variable) (\(name)): \(reason)", commandPath: path, showsUsage: false)
        }
        return usageError("invalid value for \(display(name)): \(reason)")
    }

    private func display(_ name: String) -> String {
        if let option = declaredOptions[name] {
            return option.kind == .flag ? name : "\(name) <\(option.valueName)>"
        }
        return "<\(name)>"
    }

    private func checkDeclared(_ name: String) {
        if let option = declaredOptions[name] {
            precondition(option.kind != .flag, "'\(name)' is a flag: read it with flag(_:)")
            return
        }
        precondition(declaredArguments.contains(name), "'\(name)' is not declared by '\(path.joined(separator: " "))'")
    }
}
