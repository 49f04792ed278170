import Foundation
import GeofenceCore
import GeofenceStore

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// The `geofence` command line: parse, dispatch, map failures to one clear line and a sysexits code.
package enum GeofenceCommand {
    package static let version = "0.1.0"

    /// Runs the process's command line and exits with its status.
    package static func main() -> Never {
        signal(SIGPIPE, SIG_IGN)
        let status = run(
            Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment,
            console: .standard())
        exit(status)
    }

    /// Runs one command line; returns the exit status. Everything it prints goes through `console`.
    package static func run(_ arguments: [String], environment: [String: String], console: Console) -> Int32 {
        let parser = CommandLineParser(root: CommandTree.root)
        switch parser.parse(arguments, environment: environment) {
        case .help(let text):
            console.write(text)
            return ExitCode.ok.rawValue
        case .error(let error):
            // The command line did not parse, so `--json` is looked for as a word before `--`.
            return report(error, json: arguments.prefix { $0 != "--" }.contains("--json"), parser, console)
        case .run(let path, let parsed):
            let context = CommandContext(
                arguments: parsed, environment: environment, console: console, parser: parser, now: Date())
            do {
                try dispatch(path, context)
                return ExitCode.ok.rawValue
            } catch let error as any CommandLineError {
                return report(error, json: context.json, parser, console)
            } catch {
                return report(CommandFailure.from(error), json: context.json, parser, console)
            }
        }
    }

    /// Every error of every command is told here: one `Error:` line (usage errors add the usage line and a
    /// pointer to the help), or with `--json` one JSON object on one line with the same fields. An error
    /// without a message only sets the exit status (the output already said everything).
    static func report(
        _ error: any CommandLineError, json: Bool, _ parser: CommandLineParser, _ console: Console
    ) -> Int32 {
        if !error.message.isEmpty {
            console.writeError(json ? parser.renderJSON(error).serialized() + "\n" : parser.render(error))
        }
        return error.exitCode.rawValue
    }

    /// Runs the command at `path`: the type the command tree registers there reads its options, then runs.
    static func dispatch(_ path: [String], _ c: CommandContext) throws {
        guard let command = CommandTree.command(at: path) else {
            throw CommandFailure("'\(path.joined(separator: " "))' is not implemented", exitCode: .software)
        }
        try command.init(parsing: c.arguments, context: c).run(c)
    }
}

/// `geofence` alone: the help, or `--version`.
struct RootCommand: GeofenceSubcommand {
    static var spec: CommandSpec { CommandTree.root }

    let version: Bool

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        version = a.flag("--version")
    }

    func run(_ c: CommandContext) throws {
        if version {
            c.console.print("geofence \(GeofenceCommand.version)")
        } else {
            c.console.write(c.parser.helpText(for: []))
        }
    }
}

/// What a command needs: its arguments, the environment, where to print, the time it started.
struct CommandContext {
    let arguments: ParsedArguments
    let environment: [String: String]
    let console: Console
    let parser: CommandLineParser
    let now: Date

    var json: Bool { arguments.flag("--json") }

    var stateDirectory: String {
        arguments.value("--state-dir") ?? StateDirectory.default(environment: environment)
    }

    func openStore() throws -> StateStore {
        try StateStore(directory: stateDirectory)
    }

    func usage(_ message: String) -> UsageError { arguments.usageError(message) }

    /// `invalid value for --max-regions: REASON`; when the value came from the environment, one line naming
    /// the variable (`invalid value for GEOFENCE_MAX_REGIONS (--max-regions): REASON`), exit 64 either way.
    func invalid(_ option: String, _ reason: String) -> UsageError {
        if case .environment(let variable)? = arguments.source(of: option) {
            return UsageError(
                "invalid value for \(variable) (\(option)): \(reason)", commandPath: arguments.path, showsUsage: false)
        }
        return usage("invalid value for \(option): \(reason)")
    }
}

extension CommandFailure {
    /// One clear line and a sysexits code for anything a command can throw.
    static func from(_ error: any Error) -> CommandFailure {
        switch error {
        case let e as CommandFailure: return e
        case let e as StoreError:
            switch e {
            case .duplicateRegions: return CommandFailure(e.description, exitCode: .dataError)
            case .regionNotFound: return CommandFailure(e.description, exitCode: .noInput)
            case .cannotCreateDirectory: return CommandFailure(e.description, exitCode: .cantCreate)
            case .corruptRow: return CommandFailure(e.description, exitCode: .dataError)
            case .tooManyPolygonPositions: return CommandFailure(e.description, exitCode: .dataError)
            }
        case let e as DatabaseError:
            let code: ExitCode
            if e.isBusy {
                code = .tempFail
            } else if e.isPermissionDenied {
                code = .noPermission
            } else if e.isReadOnly || e.isCantOpen {
                code = .cantCreate
            } else {
                code = .ioError
            }
            return CommandFailure(e.description, exitCode: code)
        case let e as MigrationError:
            return CommandFailure(e.description, exitCode: .config)
        case let e as RegionValidationError:
            return CommandFailure(e.description, exitCode: .dataError)
        case let e as HookStoreError:
            switch e {
            case .duplicateHook, .nothingToRetry: return CommandFailure(e.description, exitCode: .dataError)
            case .hookNotFound, .deliveryNotFound: return CommandFailure(e.description, exitCode: .noInput)
            }
        case let e as TokenStoreError:
            switch e {
            case .duplicateToken: return CommandFailure(e.description, exitCode: .dataError)
            case .tokenNotFound: return CommandFailure(e.description, exitCode: .noInput)
            }
        default:
            return CommandFailure("\(error)", exitCode: .software)
        }
    }
}
