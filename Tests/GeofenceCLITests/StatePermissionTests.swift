import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Docs/security.md: the state directory is 0700 and every file the engine writes in it is 0600, whatever
/// the umask of whoever starts it, so other local users can read neither regions nor events nor hooks.
@Suite("state permissions")
struct StatePermissionTests {
    /// Runs geofence under `umask 000`, the most permissive a careless start script could leave.
    static func runPermissive(_ cli: CLI, _ args: [String], prefix: [String] = []) throws -> GeofenceBinary.Result {
        try GeofenceBinary.run(
            args + ["--state-dir", cli.stateDir], environment: cli.environment,
            launcher: ["/bin/sh", "-c", #"umask 000; exec "$@""#, "sh"] + prefix)
    }

    static func mode(_ path: String) -> mode_t {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & 0o7777 : 0xFFFF
    }

    @Test("under umask 000 the state directory is 0700 and every file in it 0600, after the CLI and the daemon")
    func modes() throws {
        try withCLI { cli in
            let added = try Self.runPermissive(
                cli, ["add", "--id", "depot", "--lat", "48.2", "--lon", "16.37", "--radius", "100"])
            #expect(added.status == 0, "\(added.stderr)")
            let hook = try Self.runPermissive(cli, ["hook", "add", "--on", "all", "--command", "true"])
            #expect(hook.status == 0, "\(hook.stderr)")
            let track = try cli.write(
                HookTrack.lines(centres: [Coordinate(latitude: 48.2, longitude: 16.37)], passes: 3), to: "track.json")
            let replay = try Self.runPermissive(cli, ["replay", "--hooks", track])
            #expect(replay.status == 0, "\(replay.stderr)")
            // The daemon for two seconds (its lock files, its socket), stopped by SIGTERM.
            let ran = try Self.runPermissive(
                cli, ["run", "--gpsd", "127.0.0.1:9"], prefix: ["timeout", "-s", "TERM", "2"])
            #expect(ran.status == 0 || ran.status == 124, "\(ran.stderr)")

            #expect(Self.mode(cli.stateDir) == 0o700, "state dir mode \(String(Self.mode(cli.stateDir), radix: 8))")
            let files = try FileManager.default.contentsOfDirectory(atPath: cli.stateDir)
            #expect(files.contains("geofence.db"), "\(files)")
            #expect(files.count >= 2, "\(files)")
            for name in files {
                let mode = Self.mode(cli.stateDir + "/" + name)
                #expect(mode == 0o600, "\(name) has mode \(String(mode, radix: 8))")
            }
        }
    }
}
