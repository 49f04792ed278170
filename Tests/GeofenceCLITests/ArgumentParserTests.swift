import Foundation
import GeofenceCLI
import GeofenceCore
import Testing

/// A small tree shaped like the real CLI: global options, a leaf with many options, nested
/// groups, and a group that also runs by itself.
private let sampleTree = CommandSpec(
    name: "geofence",
    abstract: "Monitor circular regions and run hooks when a receiver crosses their boundaries.",
    options: [
        .value(
            "--state-dir", valueName: "dir", help: "Where regions and events are stored.",
            defaultDescription: "$XDG_STATE_HOME/geofence", environment: "GEOFENCE_STATE_DIR", inherited: true),
        .flag("--json", help: "Print machine-readable JSON.", inherited: true),
        .flag("--version", help: "Show the version."),
    ],
    subcommands: [
        CommandSpec(
            name: "add",
            abstract: "Add a circular region to monitor.",
            discussion: """
                The region is stored at once and monitored by the daemon as soon as it sees it. Its events \
                are enter, exit and dwell.
                  - A region id is unique.
                """,
            options: [
                .value("--lat", valueName: "degrees", help: "Latitude of the centre, WGS84.", required: true),
                .value("--lon", valueName: "degrees", help: "Longitude of the centre, WGS84.", required: true),
                .value("--radius", short: "-r", valueName: "meters", help: "Radius in metres.", default: "100"),
                .value("--dwell", valueName: "duration", help: "Time inside before a dwell event fires."),
                .value("--expires", valueName: "duration|timestamp", help: "When the region stops being monitored."),
                .repeating("--on", valueName: "event", help: "An event to notify; repeat for several."),
            ],
            arguments: [.required("id", help: "The region's unique id.")],
            examples: [
                Example(
                    "Watch a 200 m circle around Westminster:",
                    "geofence add depot --lat 51.5007 --lon -0.1246 --radius 200"),
                Example("Expire after a day:", "geofence add fair --lat 51.5 --lon -0.12 --expires 1d"),
            ]),
        CommandSpec(name: "list", abstract: "List regions with their monitoring status."),
        CommandSpec(
            name: "hook",
            abstract: "Manage global hooks.",
            subcommands: [
                CommandSpec(
                    name: "add",
                    abstract: "Run a command on events.",
                    options: [
                        .repeating("--on", valueName: "event", help: "Event type.", required: true),
                        .value("--command", valueName: "command", help: "Shell command.", required: true),
                    ]),
                CommandSpec(name: "list", abstract: "List hooks."),
            ]),
        CommandSpec(
            name: "events",
            abstract: "Show delivered and pending events.",
            options: [.value("--limit", short: "-n", valueName: "count", help: "At most this many.", default: "20")],
            subcommands: [
                CommandSpec(
                    name: "retry", abstract: "Retry dead events.",
                    arguments: [.repeating("event-ids", help: "Events to retry.", atLeastOne: true)])
            ],
            runsWithoutSubcommand: true),
    ])

private let parser = CommandLineParser(root: sampleTree)

/// The parsed arguments of a command line that must run, or a recorded failure.
private func run(
    _ argv: [String], environment: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation
)
    throws -> ParsedArguments
{
    switch parser.parse(argv, environment: environment) {
    case .run(_, let arguments): return arguments
    case .help(let text):
        Issue.record("expected to run, got help:\n\(text)", sourceLocation: sourceLocation)
    case .error(let error):
        Issue.record("expected to run, got error: \(error.message)", sourceLocation: sourceLocation)
    }
    throw CancellationError()
}

/// The usage error of a command line that must fail, or nil (recorded).
private func usageError(_ argv: [String], sourceLocation: SourceLocation = #_sourceLocation) -> UsageError? {
    if case .error(let error) = parser.parse(argv) { return error }
    Issue.record("expected a usage error for \(argv)", sourceLocation: sourceLocation)
    return nil
}

/// The help text a command line asks for, or nil (recorded).
private func help(_ argv: [String], sourceLocation: SourceLocation = #_sourceLocation) -> String? {
    switch parser.parse(argv) {
    case .help(let text): return text
    case .error(let error): Issue.record("expected help, got \(error.message)", sourceLocation: sourceLocation)
    case .run(let path, _): Issue.record("expected help, got run \(path)", sourceLocation: sourceLocation)
    }
    return nil
}

@Suite("Help text")
struct ArgumentHelpTests {
    @Test func addHelpSnapshot() {
        #expect(
            help(["add", "--help"]) == """
                OVERVIEW: Add a circular region to monitor.

                The region is stored at once and monitored by the daemon as soon as it sees it.
                Its events are enter, exit and dwell.
                  - A region id is unique.

                USAGE: geofence add --lat <degrees> --lon <degrees> [--radius <meters>]
                       [--dwell <duration>] [--expires <duration|timestamp>] [--on <event> ...]
                       [--state-dir <dir>] [--json] <id>

                ARGUMENTS:
                  <id>                    The region's unique id.

                OPTIONS:
                  --lat <degrees>         Latitude of the centre, WGS84.
                  --lon <degrees>         Longitude of the centre, WGS84.
                  -r, --radius <meters>   Radius in metres. (default: 100)
                  --dwell <duration>      Time inside before a dwell event fires.
                  --expires <duration|timestamp>
                                          When the region stops being monitored.
                  --on <event>            An event to notify; repeat for several.
                  --state-dir <dir>       Where regions and events are stored. (default:
                                          $XDG_STATE_HOME/geofence) (env: GEOFENCE_STATE_DIR)
                  --json                  Print machine-readable JSON.
                  -h, --help              Show help information.

                EXAMPLES:
                  Watch a 200 m circle around Westminster:
                    geofence add depot --lat 51.5007 --lon -0.1246 --radius 200

                  Expire after a day:
                    geofence add fair --lat 51.5 --lon -0.12 --expires 1d

                """)
    }

    @Test func rootHelpListsSubcommands() {
        #expect(
            help(["--help"]) == """
                OVERVIEW: Monitor circular regions and run hooks when a receiver crosses their
                boundaries.

                USAGE: geofence [--state-dir <dir>] [--json] [--version] <subcommand>

                OPTIONS:
                  --state-dir <dir>       Where regions and events are stored. (default:
                                          $XDG_STATE_HOME/geofence) (env: GEOFENCE_STATE_DIR)
                  --json                  Print machine-readable JSON.
                  --version               Show the version.
                  -h, --help              Show help information.

                SUBCOMMANDS:
                  add                     Add a circular region to monitor.
                  list                    List regions with their monitoring status.
                  hook                    Manage global hooks.
                  events                  Show delivered and pending events.
                  help                    Show subcommand help information.

                  See 'geofence help <subcommand>' for detailed help.

                """)
        #expect(help(["help"]) == help(["--help"]))
        #expect(help(["-h"]) == help(["--help"]))
    }

    @Test func helpSubcommandAndFlagsAgree() {
        let expected = parser.helpText(for: ["add"])
        #expect(help(["help", "add"]) == expected)
        #expect(help(["add", "--help"]) == expected)
        #expect(help(["add", "-h"]) == expected)
        #expect(help(["add", "depot", "--lat", "1", "-h"]) == expected)
    }

    @Test func nestedSubcommandHelp() {
        let hookAdd = parser.helpText(for: ["hook", "add"])
        #expect(help(["hook", "add", "--help"]) == hookAdd)
        #expect(help(["help", "hook", "add"]) == hookAdd)
        #expect(hookAdd.hasPrefix("OVERVIEW: Run a command on events.\n\nUSAGE: geofence hook add --on <event> ..."))
        let retry = parser.helpText(for: ["events", "retry"])
        #expect(help(["events", "retry", "--help"]) == retry)
        #expect(help(["help", "events", "retry"]) == retry)
        #expect(retry.contains("ARGUMENTS:\n  <event-ids> ...         Events to retry.\n"))
        #expect(help(["hook", "--help"])?.contains("  add                     Run a command on events.\n") == true)
        #expect(help(["hook", "--help"])?.contains("See 'geofence help hook <subcommand>' for detailed help.") == true)
    }

    @Test func runnableGroupShowsOptionalSubcommand() {
        #expect(
            parser.usageLine(for: ["events"])
                == "geofence events [--limit <count>] [--state-dir <dir>] [--json] [<subcommand>]")
    }

    @Test func helpAfterAnErrorStillWins() {
        let expected = parser.helpText(for: ["add"])
        #expect(help(["add", "--bogus", "--help"]) == expected)
        #expect(help(["add", "--lat", "--help"]) == expected)
        #expect(help(["add", "a", "b", "c", "--help"]) == expected)
    }

    @Test func helpAfterDoubleDashIsAnArgument() throws {
        let arguments = try run(["add", "--lat", "1", "--lon", "2", "--", "--help"])
        #expect(arguments.value("id") == "--help")
    }

    @Test func helpForUnknownSubcommandSuggests() throws {
        let error = try #require(usageError(["help", "ad"]))
        #expect(error.message == "unknown subcommand 'ad'; did you mean 'add'?")
        #expect(error.commandPath == ["help"])
        #expect(usageError(["help", "list", "more"])?.message == "'geofence list' has no subcommands")
    }

    @Test func everyLineFitsEightyColumns() {
        let wordy = CommandSpec(
            name: "tool",
            abstract: String(repeating: "word ", count: 40),
            discussion: String(repeating: "longer discussion text ", count: 20),
            options: [
                .value(
                    "--a-rather-long-option-name", valueName: "value",
                    help: String(repeating: "helpful words ", count: 15))
            ])
        let text = CommandLineParser(root: wordy).helpText(for: [])
        for line in text.split(separator: "\n") {
            #expect(line.count <= 80, "\(line)")
        }
        #expect(text.contains("  --a-rather-long-option-name <value>\n                          helpful words"))
    }

    @Test func customUsageLine() {
        let spec = CommandSpec(name: "tool", abstract: "A tool.", usage: "tool [options] <file>")
        let custom = CommandLineParser(root: spec)
        #expect(custom.usageLine(for: []) == "tool [options] <file>")
        #expect(custom.helpText(for: []).contains("USAGE: tool [options] <file>\n"))
    }
}

@Suite("Parsing")
struct ArgumentParsingTests {
    @Test func optionForms() throws {
        let arguments = try run(["add", "depot", "--lat=51.5007", "--lon", "-0.1246", "-r", "200"])
        #expect(arguments.path == ["add"])
        #expect(arguments.value("id") == "depot")
        #expect(arguments.value("--lat") == "51.5007")
        #expect(arguments.value("--lon") == "-0.1246")
        #expect(arguments.value("--radius") == "200")
        #expect(try arguments.latitude("--lat") == 51.5007)
        #expect(try arguments.longitude("--lon") == -0.1246)
        #expect(try arguments.double("--radius") == 200)
        #expect(arguments.source(of: "--radius") == .commandLine)
    }

    @Test func runOutcomeCarriesThePath() {
        guard case .run(let path, let arguments) = parser.parse(["hook", "add", "--on", "enter", "--command", "x"])
        else {
            Issue.record("expected run")
            return
        }
        #expect(path == ["hook", "add"])
        #expect(arguments.path == ["hook", "add"])
    }

    @Test func valueOptionsConsumeDashTokens() throws {
        let arguments = try run(["add", "x", "--lat", "-33.9", "--lon", "-70.6", "--dwell", "-5m"])
        #expect(try arguments.latitude("--lat") == -33.9)
        #expect(arguments.value("--dwell") == "-5m")
        #expect(throws: UsageError.self) { try arguments.duration("--dwell") }
        let odd = try run(["hook", "add", "--on", "enter", "--command", "-x"])
        #expect(odd.value("--command") == "-x")
        let literal = try run(["hook", "add", "--on", "enter", "--command=--json"])
        #expect(literal.value("--command") == "--json")
        #expect(literal.flag("--json") == false)
    }

    @Test func negativeNumbersAndDashArePositionals() throws {
        let spec = CommandSpec(
            name: "calc", abstract: "Add numbers.",
            arguments: [.repeating("numbers", help: "Numbers.")])
        guard case .run(_, let arguments) = CommandLineParser(root: spec).parse(["-5", "-.5", "-", "3"]) else {
            Issue.record("expected run")
            return
        }
        #expect(arguments.values("numbers") == ["-5", "-.5", "-", "3"])
        guard case .run(_, let numbers) = CommandLineParser(root: spec).parse(["-5", "-.5", "1e3"]) else {
            Issue.record("expected run")
            return
        }
        #expect(try numbers.values("numbers", as: NumberParser.finite) == [-5, -0.5, 1000])
    }

    @Test func doubleDashEndsOptions() throws {
        let arguments = try run(["add", "--lat", "1", "--lon", "2", "--", "-weird-id"])
        #expect(arguments.value("id") == "-weird-id")
        #expect(
            usageError(["add", "--lat", "1", "--lon", "2", "--", "a", "--json"])?.message
                == "unexpected argument '--json'")
    }

    @Test func repeatingOptionsCollect() throws {
        let arguments = try run(["add", "x", "--lat", "1", "--lon", "2", "--on", "enter", "--on=exit"])
        #expect(arguments.values("--on") == ["enter", "exit"])
        #expect(arguments.values("--dwell") == [])
        #expect(arguments.value("--dwell") == nil)
    }

    @Test func singleValueGivenTwiceIsAnError() {
        #expect(usageError(["add", "x", "--lat", "1", "--lat", "2", "--lon", "3"])?.message == "--lat given twice")
        #expect(
            usageError(["add", "x", "--lat", "1", "--lon", "3", "-r", "1", "--radius=2"])?.message
                == "--radius given twice")
    }

    @Test func flags() throws {
        #expect(try run(["list", "--json"]).flag("--json"))
        #expect(try run(["list", "--json", "--json"]).flag("--json"))
        #expect(try run(["list"]).flag("--json") == false)
        #expect(usageError(["list", "--json=yes"])?.message == "--json does not take a value")
    }

    @Test func unknownOptionSuggestsTheClosest() {
        #expect(usageError(["add", "x", "--radus", "3"])?.message == "unknown option --radus; did you mean --radius?")
        #expect(usageError(["add", "x", "--rad", "3"])?.message == "unknown option --rad; did you mean --radius?")
        #expect(usageError(["add", "x", "--lta", "3"])?.message == "unknown option --lta; did you mean --lat?")
        #expect(usageError(["list", "--jsno"])?.message == "unknown option --jsno; did you mean --json?")
        #expect(usageError(["list", "--frobnicate"])?.message == "unknown option --frobnicate")
        #expect(usageError(["list", "-x"])?.message == "unknown option -x")
        #expect(usageError(["list", "--hepl"])?.message == "unknown option --hepl; did you mean --help?")
    }

    @Test func missingValues() {
        #expect(usageError(["add", "x", "--lon", "1", "--lat"])?.message == "missing value for --lat <degrees>")
        #expect(usageError(["add", "x", "--lat", "--lon", "1"])?.message == "missing value for --lat <degrees>")
        #expect(
            usageError(["add", "x", "--lon", "1", "--lat", "2", "-r", "-r"])?.message
                == "missing value for --radius <meters>")
    }

    @Test func missingRequiredOptionsAndArguments() {
        #expect(usageError(["add", "x", "--lon", "1"])?.message == "missing required option --lat <degrees>")
        #expect(usageError(["add", "--lat", "1", "--lon", "1"])?.message == "missing required argument <id>")
        #expect(usageError(["hook", "add", "--command", "x"])?.message == "missing required option --on <event>")
        #expect(usageError(["events", "retry"])?.message == "missing required argument <event-ids>")
    }

    @Test func unexpectedPositional() {
        #expect(usageError(["add", "x", "y", "--lat", "1", "--lon", "2"])?.message == "unexpected argument 'y'")
        #expect(usageError(["list", "everything"])?.message == "unexpected argument 'everything'")
    }

    @Test func unknownSubcommandSuggests() {
        #expect(usageError(["ad"])?.message == "unknown subcommand 'ad'; did you mean 'add'?")
        #expect(usageError(["lsit"])?.message == "unknown subcommand 'lsit'; did you mean 'list'?")
        #expect(usageError(["hook", "ad"])?.message == "unknown subcommand 'ad'; did you mean 'add'?")
        #expect(usageError(["hook", "ad"])?.commandPath == ["hook"])
        #expect(usageError(["zzz"])?.message == "unknown subcommand 'zzz'")
        #expect(usageError(["ad", "--help"])?.message == "unknown subcommand 'ad'; did you mean 'add'?")
    }

    @Test func groupsNeedASubcommandUnlessRunnable() throws {
        #expect(usageError([])?.message == "missing subcommand; expected one of: add, list, hook, events, help")
        #expect(usageError(["hook"])?.message == "missing subcommand; expected one of: add, list")
        let events = try run(["events", "-n", "5"])
        #expect(events.path == ["events"])
        #expect(try events.integer("--limit") == 5)
        let retry = try run(["events", "retry", "a", "b"])
        #expect(retry.values("event-ids") == ["a", "b"])
    }

    @Test func inheritedOptionsWorkBeforeAndAfterTheSubcommand() throws {
        let before = try run(["--json", "--state-dir", "/tmp/s", "hook", "list"])
        #expect(before.flag("--json"))
        #expect(before.value("--state-dir") == "/tmp/s")
        let after = try run(["hook", "list", "--json", "--state-dir=/tmp/s"])
        #expect(after.flag("--json"))
        #expect(after.value("--state-dir") == "/tmp/s")
        let between = try run(["hook", "--json", "list"])
        #expect(between.flag("--json"))
        #expect(usageError(["--json", "list", "--json=1"])?.message == "--json does not take a value")
        #expect(usageError(["--state-dir", "a", "list", "--state-dir", "b"])?.message == "--state-dir given twice")
    }

    @Test func localOptionsAreNotInherited() {
        #expect(
            usageError(["--version", "list"])?.message == "--version is an option of 'geofence', not of 'geofence list'"
        )
        #expect(usageError(["list", "--version"])?.message == "unknown option --version")
        #expect(
            usageError(["events", "--limit", "3", "retry", "a"])?.message
                == "--limit is an option of 'geofence events', not of 'geofence events retry'")
        guard case .run(let path, let arguments) = parser.parse(["--version"]) else { return }
        #expect(path == [])
        #expect(arguments.flag("--version"))
    }

    @Test func environmentThenDefault() throws {
        let fromEnvironment = try run(["list"], environment: ["GEOFENCE_STATE_DIR": "/srv/geo"])
        #expect(fromEnvironment.value("--state-dir") == "/srv/geo")
        #expect(fromEnvironment.source(of: "--state-dir") == .environment("GEOFENCE_STATE_DIR"))
        let commandLineWins = try run(["list", "--state-dir", "/x"], environment: ["GEOFENCE_STATE_DIR": "/srv/geo"])
        #expect(commandLineWins.value("--state-dir") == "/x")
        let neither = try run(["list"])
        #expect(neither.value("--state-dir") == nil)
        #expect(neither.source(of: "--state-dir") == nil)
        let defaulted = try run(["add", "x", "--lat", "1", "--lon", "2"])
        #expect(defaulted.value("--radius") == "100")
        #expect(defaulted.source(of: "--radius") == .defaultValue)
    }

    @Test func environmentSatisfiesARequiredOption() {
        let spec = CommandSpec(
            name: "tool", abstract: "A tool.",
            options: [.value("--socket", help: "Socket.", required: true, environment: "TOOL_SOCKET")])
        let tool = CommandLineParser(root: spec)
        guard case .run(_, let arguments) = tool.parse([], environment: ["TOOL_SOCKET": "/run/x"]) else {
            Issue.record("expected run")
            return
        }
        #expect(arguments.value("--socket") == "/run/x")
        guard case .error(let error) = tool.parse([]) else {
            Issue.record("expected error")
            return
        }
        #expect(error.message == "missing required option --socket <socket>")
        #expect(tool.usageLine(for: []) == "tool [--socket <socket>]")
    }
}

@Suite("Typed values")
struct ArgumentTypedValueTests {
    @Test func invalidValuesNameTheOption() throws {
        let arguments = try run(["add", "x", "--lat", "91", "--lon", "nan", "-r", "5m", "--dwell", "5x"])
        #expect {
            try arguments.latitude("--lat")
        } throws: { error in
            (error as? UsageError)?.message
                == "invalid value for --lat <degrees>: latitude 91 is out of range: must be between -90 and 90"
        }
        #expect(
            throws: UsageError(
                "invalid value for --lon <degrees>: 'nan' is not a finite number; expected a decimal number like 200, "
                    + "-0.1246 or 1e3", commandPath: ["add"])
        ) {
            try arguments.longitude("--lon")
        }
        #expect(
            throws: UsageError(
                "invalid value for --radius <meters>: '5m' is not a number; expected a decimal number like 200, "
                    + "-0.1246 or 1e3", commandPath: ["add"])
        ) {
            try arguments.double("--radius")
        }
        #expect(
            throws: UsageError(
                "invalid value for --dwell <duration>: unknown unit 'x' in duration '5x'; units are d, h, m, s and ms",
                commandPath: ["add"])
        ) {
            try arguments.duration("--dwell")
        }
    }

    @Test func invalidEnvironmentValueSaysWhereItCameFrom() {
        let spec = CommandSpec(
            name: "tool", abstract: "A tool.", options: [.value("--port", help: "Port.", environment: "TOOL_PORT")])
        guard case .run(_, let arguments) = CommandLineParser(root: spec).parse([], environment: ["TOOL_PORT": "abc"])
        else {
            Issue.record("expected run")
            return
        }
        #expect(
            throws: UsageError(
                "invalid value for TOOL_PORT (--port): 'abc' is not a number; "
                    + "expected a whole number like 10",
                commandPath: [], showsUsage: false)
        ) {
            try arguments.integer("--port")
        }
    }

    @Test func typedReaders() throws {
        let now = Date(timeIntervalSince1970: 1_796_047_387)
        let arguments = try run(["add", "x", "--lat", "1", "--lon", "2", "--dwell", "1h30m", "--expires", "2027-01-01"])
        #expect(try arguments.duration("--dwell") == 5400)
        #expect(try arguments.expiry("--expires", now: now) == Date(timeIntervalSince1970: 1_798_761_600))
        #expect(try arguments.timestamp("--expires") == Date(timeIntervalSince1970: 1_798_761_600))
        #expect(try arguments.required("--lat", as: CoordinateParser.latitude) == 1)
        #expect(try arguments.integer("--radius") == 100)
        let relative = try run(["add", "x", "--lat", "1", "--lon", "2", "--expires", "2d"])
        #expect(try relative.expiry("--expires", now: now) == now.addingTimeInterval(172_800))
        #expect(throws: UsageError("missing required --dwell <duration>", commandPath: ["add"])) {
            try relative.required("--dwell")
        }
        #expect(throws: UsageError("missing required --dwell <duration>", commandPath: ["add"])) {
            try relative.required("--dwell", as: DurationParser.parse)
        }
        let retry = try run(["events", "retry", "1", "x"])
        #expect(
            throws: UsageError(
                "invalid value for <event-ids>: 'x' is not a number; expected a whole number like 10",
                commandPath: ["events", "retry"])
        ) {
            try retry.values("event-ids", as: NumberParser.integer)
        }
    }

    @Test func commandsMakeTheirOwnUsageErrors() throws {
        let arguments = try run(["add", "x", "--lat", "1", "--lon", "2", "-r", "0"])
        let error = arguments.usageError("--radius must be greater than 0")
        #expect(
            parser.render(error) == """
                Error: --radius must be greater than 0
                Usage: \(parser.usageLine(for: ["add"]))
                See 'geofence add --help' for more.

                """)
    }
}

@Suite("Error rendering")
struct ArgumentErrorRenderingTests {
    @Test func usageErrorRendersThreeLines() throws {
        let error = try #require(usageError(["add", "x", "--lat", "1", "--lon", "2", "--radus", "3"]))
        #expect(
            parser.render(error) == """
                Error: unknown option --radus; did you mean --radius?
                Usage: geofence add --lat <degrees> --lon <degrees> [--radius <meters>] [--dwell <duration>] \
                [--expires <duration|timestamp>] [--on <event> ...] [--state-dir <dir>] [--json] <id>
                See 'geofence add --help' for more.

                """)
        #expect(error.exitCode == .usage)
        #expect(error.exitCode.rawValue == 64)
    }

    @Test func nestedAndRootErrorsPointToTheirOwnHelp() throws {
        let nested = try #require(usageError(["hook", "add", "--on", "enter"]))
        #expect(
            parser.render(nested) == """
                Error: missing required option --command <command>
                Usage: geofence hook add --on <event> ... --command <command> [--state-dir <dir>] [--json]
                See 'geofence hook add --help' for more.

                """)
        let root = try #require(usageError(["zzz"]))
        #expect(
            parser.render(root) == """
                Error: unknown subcommand 'zzz'
                Usage: geofence [--state-dir <dir>] [--json] [--version] <subcommand>
                See 'geofence --help' for more.

                """)
    }

    @Test func otherErrorsRenderOneLine() {
        #expect(
            parser.render(DataError("entry 3: radius -5 must be greater than 0"))
                == "Error: entry 3: radius -5 must be greater than 0\n")
        let unavailable = CommandFailure("the daemon is not running", exitCode: .unavailable)
        #expect(parser.render(unavailable) == "Error: the daemon is not running\n")
        #expect(unavailable.exitCode.rawValue == 69)
        #expect(DataError("x").exitCode.rawValue == 65)
        #expect(ExitCode.noPermission.rawValue == 77)
    }

    @Test func unknownPathFallsBackToRootUsage() {
        let text = parser.render(UsageError("odd", commandPath: ["nope"]))
        #expect(text.hasSuffix("See 'geofence --help' for more.\n"))
    }
}

@Suite("Spec validation and suggestions")
struct ArgumentSpecTests {
    @Test func soundTreeHasNoProblems() {
        #expect(CommandLineParser.problems(in: sampleTree) == [])
    }

    @Test func problemsAreFound() {
        let bad = CommandSpec(
            name: "bad", abstract: "",
            options: [
                .flag("json", help: ""), .value("--x", short: "-h", help: ""), .flag("--g", help: "", inherited: true),
                .value("--n", short: "n", help: ""), .flag("--five", short: "-5", help: ""),
            ],
            arguments: [.repeating("rest", help: ""), .required("after", help: "")],
            subcommands: [
                CommandSpec(name: "sub", abstract: "", options: [.flag("--g", help: "")]),
                CommandSpec(name: "sub", abstract: ""),
            ])
        let problems = CommandLineParser.problems(in: bad)
        #expect(problems.contains("'bad': option name 'json' must look like --name"))
        #expect(problems.contains("'bad': option name '-h' is used twice (or is reserved)"))
        #expect(problems.contains("'bad': short name 'n' must look like -x"))
        #expect(problems.contains("'bad': short name '-5' must look like -x"))
        #expect(problems.contains("'bad': repeating argument <rest> must be last"))
        #expect(problems.contains("'bad': required argument <after> follows an optional one"))
        #expect(problems.contains("'bad': a command with subcommands cannot take positional arguments"))
        #expect(problems.contains("'bad': subcommand name 'sub' is empty, repeated or malformed"))
        #expect(problems.contains("'bad sub': option name '--g' is used twice (or is reserved)"))
    }

    @Test func suggestions() {
        #expect(Suggestion.closest(to: "--radus", among: ["--lat", "--radius"]) == "--radius")
        #expect(Suggestion.closest(to: "remvoe", among: ["add", "remove"]) == "remove")
        #expect(Suggestion.closest(to: "xyz", among: ["add", "remove"]) == nil)
        #expect(Suggestion.closest(to: "--", among: ["--a"]) == nil)
        #expect(Suggestion.distance(Array("kitten"), Array("sitting")) == 3)
        #expect(Suggestion.distance(Array("ab"), Array("ba")) == 1)
        #expect(Suggestion.distance(Array(""), Array("abc")) == 3)
    }
}
