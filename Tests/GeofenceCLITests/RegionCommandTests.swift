import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

@Suite("geofence add, list, remove")
struct RegionCommandTests {
    @Test("a region added is listed, survives a new process, and is removed")
    func addListRemove() throws {
        try withCLI { cli in
            let added = try cli.run(
                "add", "--lat", "51.5007", "--lon", "-0.1246", "--radius", "200", "--id", "parliament")
            #expect(added.status == 0, "\(added.stderr)")
            // Every `run` is a new process: the region is on disk, not in memory.
            let listed = try cli.run("list")
            #expect(listed.status == 0)
            #expect(listed.stdout.contains("parliament"))
            #expect(listed.stdout.contains("51.5007"))
            #expect(listed.stdout.contains("200 m"))
            let json = try cli.regions()
            #expect(json.count == 1)
            #expect(json.first?["lat"]?.doubleValue == 51.5007)
            #expect(json.first?["lon"]?.doubleValue == -0.1246)
            #expect(json.first?["radius"]?.doubleValue == 200)

            let duplicate = try cli.run("add", "--lat", "1", "--lon", "2", "--radius", "3", "--id", "parliament")
            #expect(duplicate.status == 65)
            #expect(duplicate.stderr.hasPrefix("Error: a region with id \"parliament\" already exists"))
            #expect(try cli.regions().first?["radius"]?.doubleValue == 200, "the failed add changed nothing")

            let replaced = try cli.run(
                "add", "--lat", "1", "--lon", "2", "--radius", "3", "--id", "parliament", "--replace")
            #expect(replaced.status == 0, "\(replaced.stderr)")
            #expect(try cli.regions().first?["radius"]?.doubleValue == 3)

            let removed = try cli.run("remove", "parliament")
            #expect(removed.status == 0, "\(removed.stderr)")
            #expect(try cli.ids().isEmpty)
            let again = try cli.run("remove", "parliament")
            #expect(again.status == 66)
            #expect(again.stderr.hasPrefix("Error: no region with id \"parliament\""))
        }
    }

    @Test(
        "bad arguments are refused with one error line and change nothing",
        arguments: [
            (["--lat", "91", "--lon", "0", "--radius", "10"], "latitude 91 is out of range"),
            (["--lat", "0", "--lon", "181", "--radius", "10"], "longitude 181 is out of range"),
            (["--lat", "0", "--lon", "0", "--radius", "0"], "--radius"),
            (["--lat", "0", "--lon", "0", "--radius", "-5"], "--radius"),
            (["--lat", "0", "--lon", "0", "--radius", "nan"], "--radius"),
            (["--lat", "0", "--lon", "0", "--radius", "inf"], "--radius"),
            (["--lat", "0", "--lon", "0", "--radius", "1e9"], "--radius"),
            (["--lat", "0", "--lon", "0"], "missing required option --radius"),
            (["--lat", "abc", "--lon", "0", "--radius", "10"], "'abc' is not a number"),
            (["--lat", "0", "--lon", "0", "--radius", "10", "--bogus"], "unknown option --bogus"),
            (["--lat", "0", "--lon", "0", "--radius", "10", "--id", "tab\there"], "control character"),
            (["--lat", "0", "--lon", "0", "--radius", "10", "--id", "new\nline"], "control character"),
            (
                ["--lat", "0", "--lon", "0", "--radius", "10", "--id", String(repeating: "x", count: 129)],
                "at most 128"
            ),
            (["--lat", "0", "--lon", "0", "--radius", "10", "--notify", "arrive"], "--notify"),
            (["--lat", "0", "--lon", "0", "--radius", "10", "--dwell", "soon"], "--dwell"),
            (["--lat", "0", "--lon", "0", "--radius", "10", "--expires", "yesterday"], "--expires"),
        ])
    func refusals(args: [String], expected: String) throws {
        try withCLI { cli in
            try cli.run("add", "--lat", "10", "--lon", "10", "--radius", "50", "--id", "keep")
            let before = try cli.run("export").stdout
            let result = try cli.run(["add"] + args)
            #expect(result.status == 64 || result.status == 65, "exit \(result.status): \(result.stderr)")
            let errorLines = result.stderr.split(separator: "\n").filter { $0.hasPrefix("Error:") }
            #expect(errorLines.count == 1, "\(result.stderr)")
            #expect(result.stderr.hasPrefix("Error: "))
            #expect(result.stderr.contains(expected), "\(result.stderr)")
            #expect(result.stdout.isEmpty)
            #expect(try cli.run("export").stdout == before, "the store changed")
        }
    }

    @Test("a 129-byte id made of multi-byte characters is refused; 128 bytes are accepted")
    func idLength() throws {
        try withCLI { cli throws in
            let ok = String(repeating: "é", count: 64)  // 128 bytes
            #expect(try cli.run("add", "--lat", "0", "--lon", "1", "--radius", "5", "--id", ok).status == 0)
            let tooLong = ok + "x"
            #expect(try cli.run("add", "--lat", "0", "--lon", "1", "--radius", "5", "--id", tooLong).status == 64)
            #expect(try cli.ids() == [ok])
        }
    }

    @Test("every command has --help, and `help CMD` agrees with `CMD --help`")
    func help() throws {
        try withCLI { cli in
            for command in ["add", "remove", "list", "show", "import", "export", "replay"] {
                let viaFlag = try GeofenceBinary.run([command, "--help"])
                let viaHelp = try GeofenceBinary.run(["help", command])
                #expect(viaFlag.status == 0)
                #expect(viaFlag.stdout == viaHelp.stdout)
                #expect(viaFlag.stdout.contains("USAGE:"))
                #expect(viaFlag.stdout.contains("--state-dir"))
                #expect(viaFlag.stdout.contains("--json"))
            }
            let top = try GeofenceBinary.run(["--help"])
            for command in ["add", "remove", "list", "show", "import", "export", "replay"] {
                #expect(top.stdout.contains(command))
            }
        }
    }
}
