import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// With `--json`, an error is one JSON object on stderr with the fields of the text line, whatever the
/// command and wherever the error came from (the parser, the store, the engine).
@Suite("errors as JSON")
struct JSONErrorTests {
    /// Failing command lines of many commands: a usage error, bad data, missing input, no engine.
    static let failures: [[String]] = [
        ["add", "--lat", "91", "--lon", "0", "--radius", "10"],
        ["add", "--lat2", "1"],
        ["remove", "nowhere"],
        ["show", "nowhere"],
        ["import", "missing.json"],
        ["list", "extra"],
        ["watch"],
        ["hook", "remove", "nothing"],
        ["events", "retry", "42"],
        ["frobnicate"],
    ]

    @Test("with --json every error is one JSON object on stderr with the text line's fields", arguments: failures)
    func jsonErrors(arguments: [String]) throws {
        try withCLI { cli in
            try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100")
            let before = try cli.run("list", "--json").stdout

            let text = try cli.run(arguments)
            let json = try cli.run(arguments + ["--json"])
            #expect(text.status != 0)
            #expect(json.status == text.status, "\(json.stderr)")
            #expect(json.stdout.isEmpty)
            let lines = json.stderr.split(separator: "\n", omittingEmptySubsequences: false)
            #expect(lines.count == 2 && lines[1].isEmpty, "one line: \(json.stderr)")
            let error = try JSON.parse(String(lines[0]))
            #expect(error["exitCode"]?.intValue == Int(text.status))
            let textLines = text.stderr.split(separator: "\n").map(String.init)
            #expect(textLines.first == "Error: " + (error["error"]?.stringValue ?? "?"), "\(text.stderr)")
            if text.status == 64 {
                #expect(textLines.dropFirst().first == "Usage: " + (error["usage"]?.stringValue ?? "?"))
                #expect(textLines.dropFirst(2).first == "See '\(error["help"]?.stringValue ?? "?")' for more.")
            } else {
                #expect(error["usage"] == nil)
            }
            #expect(try cli.run("list", "--json").stdout == before, "a failed command changed nothing")
        }
    }
}
