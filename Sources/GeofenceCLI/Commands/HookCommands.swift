/// `geofence hook ...` and `geofence events ...`.
enum HookCommands {
    static func run(_ path: [String], _ c: CommandContext) throws {
        throw CommandFailure("'\(path.joined(separator: " "))' is not implemented yet", exitCode: .software)
    }
}
