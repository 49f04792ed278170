import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

extension CommandTree {
    /// `geofence token ...`: the HTTP API's bearer tokens.
    static let token = CommandSpec(
        name: "token", abstract: "Manage the bearer tokens of the HTTP API (run --api on).",
        discussion: """
            A client of the HTTP API (Docs/http.md) sends Authorization: Bearer TOKEN. A token has a name and \
            a scope: read (GET: regions, status, events, vehicles) or write (GET, and putting, removing and \
            importing regions). `token add` prints the token once; the store keeps only its SHA-256, so a lost \
            token cannot be shown again: remove it and add another. A running engine sees tokens added and \
            removed at once.

            These commands work on the store directly: whoever may write the state directory (root, the \
            engine's own user) manages the tokens.
            """,
        examples: [
            Example("A token for a dashboard that only reads:", "geofence token add dashboard --scope read"),
            Example("See the tokens (never the tokens themselves):", "geofence token list"),
        ])
}

/// `geofence token add`.
struct TokenAddCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "add",
        abstract: "Make a token for the HTTP API and print it, once.",
        discussion: """
            The token (gft_ and 64 hex digits) is printed on standard output, alone on its line, and never \
            again: the store keeps only its SHA-256. Names are 1 to 64 characters of A-Z a-z 0-9 . _ -.
            """,
        options: [
            .value("--scope", valueName: "read|write", help: "What the token may do.", default: "read")
        ],
        arguments: [.required("name", help: "The token's name (for list and remove).")],
        examples: [
            Example("", "geofence token add backend --scope write"),
            Example("Into a file only its owner reads:", "(umask 077; geofence token add backup > backup.token)"),
        ])

    let name: String
    let scope: StoredToken.Scope

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        name = try a.required("name")
        if let problem = StoredToken.idProblem(name) { throw c.usage("invalid token name \"\(name)\": \(problem)") }
        let text = a.value("--scope") ?? "read"
        guard let scope = StoredToken.Scope(rawValue: text) else {
            throw c.invalid("--scope", "\"\(text)\" is not read or write")
        }
        self.scope = scope
    }

    func run(_ c: CommandContext) throws {
        let token: String
        do {
            token = try HTTPTokens.make()
        } catch {
            throw CommandFailure("\(error)", exitCode: .software)
        }
        let stored = StoredToken(id: name, scope: scope, hash: HTTPTokens.hash(token), createdAt: c.now)
        try c.openStore().tokens.add(stored)
        if c.json {
            var o = TokenListCommand.json(stored)
            o["token"] = .string(token)
            c.console.print(JSONValue.object(o).serialized())
            return
        }
        c.console.print(token)
        c.console.message(
            "Token \"\(name)\" (\(scope.rawValue)) made: keep it now, it is not shown again (the store keeps only its hash)."
        )
    }
}

/// `geofence token list`.
struct TokenListCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "list",
        abstract: "List the HTTP API's tokens: names, scopes, when made (never the tokens).",
        examples: [Example("", "geofence token list"), Example("For scripts:", "geofence token list --json")])

    init(parsing a: ParsedArguments, context c: CommandContext) throws {}

    static func json(_ t: StoredToken) -> JSONObject {
        [
            "name": .string(t.id), "scope": .string(t.scope.rawValue),
            "createdAt": .string(TimestampParser.format(t.createdAt)),
        ]
    }

    func run(_ c: CommandContext) throws {
        let tokens = try c.openStore().tokens.all()
        if c.json {
            c.console.print(JSONValue.array(tokens.map { .object(Self.json($0)) }).serialized())
            return
        }
        guard !tokens.isEmpty else {
            c.console.message("No tokens. Make one with: geofence token add NAME --scope read")
            return
        }
        var table = TextTable(["NAME", "SCOPE", "CREATED"])
        for t in tokens { table.add([t.id, t.scope.rawValue, TimestampParser.format(t.createdAt)]) }
        c.console.write(table.render())
    }
}

/// `geofence token remove`.
struct TokenRemoveCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "remove",
        abstract: "Remove tokens by name: the API refuses them from the next request on.",
        discussion: "All or nothing: if any name does not exist, nothing is removed.",
        arguments: [.repeating("name", help: "Names of the tokens to remove.", atLeastOne: true)],
        examples: [Example("", "geofence token remove dashboard")])

    let names: [String]

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        names = a.values("name")
    }

    func run(_ c: CommandContext) throws {
        let removed = try c.openStore().tokens.remove(ids: names)
        if c.json {
            c.console.print(JSONValue.object(["removed": .array(removed.map { .string($0) })]).serialized())
            return
        }
        for name in removed { c.console.print("Removed token \(RegionCommands.quoted(name))") }
    }
}
