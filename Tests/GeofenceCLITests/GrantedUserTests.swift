import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A user other than root and the engine's, granted access, who cannot read the engine's files: what they
/// may see comes through the socket.
@Suite("granted user", .serialized)
struct GrantedUserTests {
    @Test("a granted user: status shows the running engine, events come through the socket")
    func grantedUserSeesTheEngine() async throws {
        let e = try await ControlSocketTests.Engine()
        #expect(try e.cli.run("permission", "grant", String(ControlSocketTests.stranger)).status == 0)
        #expect(try e.cli.run("services", "off").status == 0)
        #expect(try e.cli.run("services", "on").status == 0)

        let status = try e.asStranger(["status", "--json", "--gpsd", "127.0.0.1:9", "--wait", "0.2s"])
        // 3, not ready: the engine runs, but nothing answers at that gpsd address.
        #expect(status.status == 3, "\(status.stderr)")
        let report = try JSON.parse(status.stdout)
        #expect(report["engine"]?["running"]?.boolValue == true, "\(status.stdout)")
        #expect(report["engine"]?["pid"]?.intValue == Int(e.daemon.pid), "\(status.stdout)")
        #expect(report["stateDirectory"]?.stringValue == (e.cli.stateDir as NSString).standardizingPath)
        let text = try e.asStranger(["status", "--gpsd", "127.0.0.1:9", "--wait", "0.2s"])
        #expect(text.stdout.contains("running (pid \(e.daemon.pid)"), "\(text.stdout)")

        let events = try e.asStranger(["events", "--json"])
        #expect(events.status == 0, "\(events.stderr)")
        let types = try JSON.parse(events.stdout).arrayValue?.compactMap { $0["type"]?.stringValue } ?? []
        #expect(types.contains("authorization") && types.contains("services"), "\(types)")
        let table = try e.asStranger(["events"])
        #expect(table.status == 0, "\(table.stderr)")
        #expect(table.stdout.contains("services") && table.stdout.contains("SEQ"), "\(table.stdout)")
        // Bounded: a --follow that does not refuse would run for ever.
        let uid = ControlSocketTests.stranger
        let follow = try GeofenceBinary.run(
            ["events", "--follow", "--socket", e.socket], environment: ["HOME": "/tmp", "GEOFENCE_SOCKET": e.socket],
            launcher: [
                "/usr/bin/timeout", "-s", "KILL", "5", "/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(uid)",
                "--clear-groups",
            ])
        #expect(follow.status == 77 && follow.stderr.contains("geofence watch"), "\(follow)")
        await e.stop()
    }
}
