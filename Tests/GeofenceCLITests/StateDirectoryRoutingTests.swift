import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A command acts on the store it names: an engine that answers on the socket but serves another state
/// directory is not asked to act on it (Docs/cli.md, "Which store a command acts on").
@Suite("state directory routing", .serialized)
struct StateDirectoryRoutingTests {
    @Test("with an engine on A, every command given B acts on B or refuses, and A is unchanged")
    func commandsGivenAnotherStateDirectory() async throws {
        try await withCLI { cli in
            try cli.run("add", "--id", "keep", "--lat", "51.5", "--lon", "-0.12", "--radius", "100")
            try await withEngine(cli, ["--gpsd", "127.0.0.1:9"], timeout: 10) { daemon in
                let before = try cli.run("export")
                #expect(before.status == 0 && before.stdout.contains("\"keep\""), "\(before)")

                let b = cli.dir.file("b")
                let file = cli.dir.file("regions.json")
                try #"{"regions": [{"id": "imported", "lat": 1, "lon": 2, "radius": 30}]}"#.write(
                    toFile: file, atomically: true, encoding: .utf8)
                // Given as the option and as the environment (the socket always A's engine).
                let ways: [(String, [String], [String: String])] = [
                    ("option", ["--state-dir", b], [:]), ("environment", [], ["GEOFENCE_STATE_DIR": b]),
                ]
                for (way, option, environment) in ways {
                    func onB(_ args: [String]) throws -> GeofenceBinary.Result {
                        try GeofenceBinary.run(
                            args + option, environment: ["GEOFENCE_SOCKET": cli.socket].merging(environment) { $1 })
                    }
                    let added = try onB(["add", "--id", "x-\(way)", "--lat", "1", "--lon", "1", "--radius", "50"])
                    #expect(added.status == 0, "\(way): \(added.stderr)")
                    let listed = try onB(["list", "--json"])
                    let ids = try JSON.parse(listed.stdout).arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
                    #expect(ids.contains("x-\(way)") && !ids.contains("keep"), "\(way): B lists \(ids)")
                    let removed = try onB(["remove", "keep"])
                    #expect(removed.status == 66, "\(way): keep is not in B: \(removed)")
                    #expect(try onB(["show", "keep"]).status == 66, "\(way)")
                    #expect(try onB(["import", "--replace", file]).status == 0, "\(way)")
                    let exported = try onB(["export"])
                    #expect(exported.stdout.contains("imported") && !exported.stdout.contains("\"keep\""), "\(way)")
                    #expect(try onB(["services", "off"]).status == 0, "\(way)")
                    let onBNow = try JSON.parse(try onB(["list", "--json"]).stdout).arrayValue?.count
                    let status = try onB(["status", "--json", "--gpsd", "127.0.0.1:9", "--wait", "0.2s"])
                    let report = try JSON.parse(status.stdout)
                    #expect(
                        report["engine"]?["running"]?.boolValue == false, "\(way): no engine serves B: \(status.stdout)"
                    )
                    #expect(report["regions"]?["keep"] == nil)
                    let total = report["regions"]?.objectValue?.values.compactMap(\.intValue).reduce(0, +)
                    #expect(total == onBNow && total != nil, "\(way): B's counts only: \(status.stdout)")
                    #expect(
                        try onB(["hook", "add", "--on", "enter", "--command", "true", "--id", "h-\(way)"]).status == 0)
                    #expect(try onB(["hook", "list", "--json"]).stdout.contains("h-\(way)"), "\(way)")
                    #expect(try onB(["events", "--json"]).status == 0, "\(way)")
                    let watch = try onB(["watch"])
                    #expect(watch.status == 69, "\(way): \(watch)")
                    #expect(
                        watch.stderr.contains(b) && watch.stderr.contains((cli.stateDir as NSString).standardizingPath),
                        "\(way): names both: \(watch)")
                }
                let proc = try GeofenceBinary.run(
                    ["list", "--state-dir", "/proc/geofence-nowhere"], environment: ["GEOFENCE_SOCKET": cli.socket])
                #expect(proc.status != 0, "\(proc)")
                #expect(proc.stderr.split(separator: "\n").count == 1, "\(proc.stderr)")

                // A: byte for byte what it was, its switch still on.
                let after = try cli.run("export")
                #expect(after.stdout == before.stdout)
                #expect(try cli.run("services").stdout.contains("on"))
                #expect(try cli.run("hook", "list", "--json").stdout == "[]\n", "no hook of B's in A")
                // The same directory by another spelling is the engine's: it answers (the socket's method `watch`
                // exists only there).
                let same = try GeofenceBinary.run(
                    ["list", "--json", "--state-dir", cli.dir.path + "/./state/"],
                    environment: ["GEOFENCE_SOCKET": cli.socket])
                #expect(same.stdout.contains("\"keep\""), "\(same)")
                _ = await daemon.stop()
            }
        }
    }

    @Test("run on another state directory while the socket is taken creates nothing there")
    func runChecksTheSocketFirst() async throws {
        try await withCLI { cli in
            try await withEngine(cli, ["--gpsd", "127.0.0.1:9"], timeout: 10) { daemon in
                let other = cli.dir.file("other")
                try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: false)
                let refused = try GeofenceBinary.run(
                    ["run", "--gpsd", "127.0.0.1:9", "--state-dir", other], environment: ["GEOFENCE_SOCKET": cli.socket]
                )
                #expect(refused.status == 69, "\(refused)")
                #expect(refused.stderr.contains("listening on"), "\(refused.stderr)")
                #expect(try FileManager.default.contentsOfDirectory(atPath: other).isEmpty)
                // The engine's own directory again: the lock's refusal (75), as before.
                let twice = try GeofenceBinary.run(
                    ["run", "--gpsd", "127.0.0.1:9", "--state-dir", cli.stateDir],
                    environment: ["GEOFENCE_SOCKET": cli.socket])
                #expect(twice.status == 75, "\(twice)")
                _ = await daemon.stop()
            }
        }
    }
}
