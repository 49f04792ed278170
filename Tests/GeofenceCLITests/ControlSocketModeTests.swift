import Foundation
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The control socket's file: made 0666 without a call by path that a swapped link could redirect, and
/// only in a directory where no other user can swap it.
@Suite("control socket file", .serialized)
struct ControlSocketModeTests {
    static func mode(_ path: String) -> mode_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode : nil
    }

    /// `geofence run` with its socket at `socket`, under `umask`.
    static func engine(_ cli: CLI, socket: String, umask: String = "022", log: String = "run.log") throws
        -> DaemonProcess
    {
        try DaemonProcess(
            ["run", "--gpsd", "127.0.0.1:9", "--socket", socket, "--state-dir", cli.stateDir],
            logPath: cli.dir.file(log), environment: cli.environment.merging(["GEOFENCE_SOCKET": socket]) { $1 },
            launcher: ["/bin/sh", "-c", "umask \(umask) && exec \"$0\" \"$@\""])
    }

    @Test("the socket is 0666 whatever the umask, in a sticky world-writable directory as in /run")
    func modeUnderAnyUmask() async throws {
        try await withCLI { cli in
            let sticky = cli.dir.file("tmp")
            mkdir(sticky, 0o700)
            chmod(sticky, 0o1777)
            for (i, (directory, umask)) in [(cli.dir.path, "077"), (sticky, "022"), (sticky, "000")].enumerated() {
                let socket = directory + "/engine.sock"
                let daemon = try Self.engine(cli, socket: socket, umask: umask, log: "run\(i).log")
                #expect(await daemon.waitForLog("control socket at", timeout: 10), "\(daemon.log)")
                #expect(Self.mode(socket) == S_IFSOCK | 0o666, "umask \(umask) in \(directory)")
                #expect(!daemon.log.contains("umask"), "\(daemon.log)")
                // Another user can connect (it needs write permission on the socket).
                chmod(cli.dir.path, 0o755)
                let other = try GeofenceBinary.runAs(
                    uid: ControlSocketTests.stranger, ["status", "--json", "--socket", socket, "--wait", "0.1s"],
                    environment: ["HOME": "/tmp", "GEOFENCE_SOCKET": socket])
                #expect(other.stdout.contains("\"engine\""), "\(other)")
                chmod(cli.dir.path, 0o700)
                _ = await daemon.stop()
            }
        }
    }

    @Test("a world-writable directory that is not sticky, or another user's, is refused with one line")
    func unsafeDirectoryRefused() async throws {
        try withCLI { cli in
            let open = cli.dir.file("open")
            mkdir(open, 0o700)
            chmod(open, 0o777)
            let group = cli.dir.file("group")
            mkdir(group, 0o700)
            chmod(group, 0o770)
            let theirs = cli.dir.file("theirs")
            mkdir(theirs, 0o700)
            chown(theirs, ControlSocketTests.stranger, ControlSocketTests.stranger)
            for (directory, words) in [(open, "not sticky"), (group, "not sticky"), (theirs, "belongs to")] {
                let socket = directory + "/engine.sock"
                // Bounded: an engine that takes the directory would run for ever.
                let result = try GeofenceBinary.run(
                    ["run", "--gpsd", "127.0.0.1:9", "--socket", socket, "--state-dir", cli.stateDir],
                    environment: cli.environment.merging(["GEOFENCE_SOCKET": socket]) { $1 },
                    launcher: ["/usr/bin/timeout", "-s", "KILL", "10"])
                #expect(result.status == 69, "\(directory): \(result)")
                #expect(
                    result.stderr.contains(words) && result.stderr.contains((directory as NSString).standardizingPath),
                    "\(result.stderr)")
                #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
                #expect(Self.mode(socket) == nil, "nothing was created in \(directory)")
            }
        }
    }

    @Test("a link at the socket path, before the start or after it, is never followed")
    func linkNotFollowed() async throws {
        try await withCLI { cli in
            let secret = cli.dir.file("secret")
            try "root's\n".write(toFile: secret, atomically: true, encoding: .utf8)
            chmod(secret, 0o600)
            let socket = cli.dir.file("engine.sock")
            symlink(secret, socket)
            let refused = try GeofenceBinary.run(
                ["run", "--gpsd", "127.0.0.1:9", "--socket", socket, "--state-dir", cli.stateDir],
                environment: cli.environment.merging(["GEOFENCE_SOCKET": socket]) { $1 })
            #expect(refused.status == 69 && refused.stderr.contains("not a socket"), "\(refused)")
            #expect(Self.mode(secret) == S_IFREG | 0o600)

            unlink(socket)
            let daemon = try Self.engine(cli, socket: socket)
            #expect(await daemon.waitForLog("control socket at", timeout: 10), "\(daemon.log)")
            // Swapped once it is there: the engine does nothing more to the path until it stops (an unlink).
            rename(socket, cli.dir.file("moved.sock"))
            symlink(secret, socket)
            _ = await daemon.stop()
            #expect(Self.mode(secret) == S_IFREG | 0o600)
            #expect(try String(contentsOfFile: secret, encoding: .utf8) == "root's\n")
        }
    }
}
