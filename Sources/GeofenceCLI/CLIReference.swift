/// Docs/cli.md, made from the command tree itself so the reference can never drift from `--help`.
/// A test fails when the file is out of date; `GEOFENCE_UPDATE_DOCS=1 swift test --filter CLIReference`
/// rewrites it.
package enum CLIReference {
    package static func markdown() -> String {
        let parser = CommandLineParser(root: CommandTree.root)
        var out = """
            # geofence command reference

            Generated from the built-in help (`geofence help COMMAND` prints the same text). Do not edit
            by hand: `GEOFENCE_UPDATE_DOCS=1 swift test --filter CLIReference` regenerates it.

            ## Conventions

            - Every command takes `--state-dir DIR` (default `$GEOFENCE_STATE_DIR`, else `/var/lib/geofence`
              as root, else `$XDG_STATE_HOME/geofence`) and `--json` (JSON instead of text, for scripts).
            - Which store a command acts on: the one in the state directory it is given. A running engine
              says which state directory it serves (the socket's `hello`). With no `--state-dir` and no
              `$GEOFENCE_STATE_DIR`, a command asks the engine that answers on the socket, whatever it
              serves. Given a state directory that is not the engine's (compared as canonical paths; one
              that does not exist is never the engine's), a command acts on that store itself, as with no
              engine running; `watch` then fails (exit 69) naming both directories, and so does any command
              whose directory another engine holds on another socket (give that engine's `--socket`).
            - Commands that talk to gpsd take `--gpsd HOST[:PORT[:DEVICE]]` (default `$GEOFENCE_GPSD`, else
              `localhost:2947`).
            - Durations: `500ms`, `90s`, `5m`, `1h30m`, `2d`, or a number of seconds. Timestamps: RFC 3339,
              e.g. `2027-01-01T00:00:00Z`.
            - Errors are one `Error:` line on stderr (usage errors add the usage line and a pointer to
              `--help`), and the exit status says what kind. With `--json` the error is one JSON object on
              one line of stderr instead, with the same fields: `error` (the message), `exitCode`, and for a
              usage error `usage` (the usage line) and `help` (the command that shows the help):
              `{"error":"no region with id \"nowhere\"","exitCode":66}`.

            | status | meaning |
            |--------|---------|
            | 0 | success |
            | 1 | failure |
            | 2 | `locate`: only a coarse fix (the target accuracy was not met in time) |
            | 3 | `locate`: no usable fix at all (silent); `status`: not ready (the engine runs but an answer is a problem) |
            | 64 | usage: a bad argument or option |
            | 65 | bad data: an invalid regions file, a duplicate id |
            | 66 | no such input: a file or region that does not exist |
            | 69 | a service is unavailable: `status`, `watch`: no engine is running, or it stopped |
            | 70 | internal error |
            | 73 | cannot create: the state directory or a file |
            | 74 | I/O error: the store could not be written (a full disk) |
            | 75 | temporary failure: the store is busy, the engine has too many clients (`busy`), or another engine runs on the state directory |
            | 77 | permission denied |
            | 78 | configuration: a store written by a newer geofence |


            """
        func walk(_ node: CommandSpec, _ path: [String]) {
            if !path.isEmpty {
                out += "## `geofence \(path.joined(separator: " "))`\n\n```\n"
                out += parser.helpText(for: path)
                out += "```\n\n"
            }
            for child in node.subcommands { walk(child, path + [child.name]) }
        }
        out += "## `geofence`\n\n```\n" + parser.helpText(for: []) + "```\n\n"
        walk(CommandTree.root, [])
        return out
    }
}
