import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// One rule for region ids everywhere: compared in NFC, and no character that makes one id pass for
/// another. So every store `add` can build is one `export` then `import --replace` restores.
@Suite("region ids: one spelling, nothing hidden")
struct RegionIDRuleTests {
    static let precomposed = "caf\u{E9}"
    static let decomposed = "cafe\u{301}"

    static func add(_ cli: CLI, _ id: String, _ extra: [String] = []) throws -> GeofenceBinary.Result {
        try cli.run(["add", "--id", id, "--lat", "48.85", "--lon", "2.35", "--radius", "100"] + extra)
    }

    @Test("ids that are canonically equivalent are one id; export then import --replace restores every store")
    func exportedStoresImport() throws {
        try withCLI { cli in
            #expect(try Self.add(cli, Self.decomposed).status == 0)
            let again = try Self.add(cli, Self.precomposed)
            #expect(again.status == 65, "the same id typed the other way: \(again.stderr)")
            #expect(again.stderr.hasPrefix("Error: a region with id \"café\" already exists"), "\(again.stderr)")
            // Ids that are legitimate and awkward: composed and decomposed scripts, signs NFC replaces, MQTT's
            // wildcards, quotes, a backslash, spaces, emoji.
            let others = [
                "\u{212B}ngstr\u{F6}m", "\u{1100}\u{1161}\u{11A8}", "東京駅", "a/b+c#d", "say \"hi\"", "back\\slash",
                "two  spaces", "🚚 depot", "Ωmega",
            ]
            for (i, id) in others.enumerated() {
                let extra = i % 2 == 0 ? ["--name", "n\(i)", "--dwell", "5m", "--on-enter", "echo \(i)"] : []
                let added = try Self.add(cli, id, extra)
                #expect(added.status == 0, "\(id): \(added.stderr)")
            }
            #expect(
                try cli.run("add", "--id", "later", "--lat", "1", "--lon", "2", "--radius", "5", "--expires", "1h")
                    .status
                    == 0)
            let ids = try cli.ids()
            #expect(ids.count == others.count + 2)
            #expect(ids.contains(Self.precomposed), "stored in NFC: \(ids)")
            #expect(ids.contains("\u{C5}ngstr\u{F6}m") && ids.contains("\u{AC01}"), "\(ids)")
            #expect(try cli.run("show", Self.precomposed).status == 0)
            #expect(try cli.run("show", Self.decomposed).status == 0, "looked up in NFC too")

            let exported = try cli.run("export")
            #expect(exported.status == 0, "\(exported.stderr)")
            let file = cli.dir.file("backup.json")
            try exported.stdout.write(toFile: file, atomically: true, encoding: .utf8)
            let restored = try cli.run("import", "--replace", file)
            #expect(restored.status == 0, "\(restored.stderr)")
            #expect(try cli.run("export").stdout == exported.stdout)
            try withCLI { elsewhere in
                let fresh = try elsewhere.run("import", file)
                #expect(fresh.status == 0, "\(fresh.stderr)")
                #expect(try elsewhere.run("export").stdout == exported.stdout)

                // A file that spells one id both ways is refused by position, as any repeated id is.
                let twice = cli.dir.file("twice.json")
                try
                    #"{"regions":[{"id":"\#(Self.precomposed)","lat":1,"lon":2,"radius":3},{"id":"\#(Self.decomposed)","lat":1,"lon":2,"radius":3}]}"#
                    .write(toFile: twice, atomically: true, encoding: .utf8)
                let refused = try cli.run("import", "--replace", twice)
                #expect(refused.status == 65, "\(refused.stderr)")
                #expect(try cli.run("export").stdout == exported.stdout, "the refused import changed nothing")
            }
        }
    }

    @Test(
        "bidi controls, invisible and control characters are refused in ids with one clear line",
        arguments: [
            ("\u{202E}", "a bidi control character (U+202E)"), ("\u{2066}", "a bidi control character (U+2066)"),
            ("\u{200F}", "a bidi control character (U+200F)"), ("\u{61C}", "a bidi control character (U+061C)"),
            ("\u{200B}", "an invisible character (U+200B)"), ("\u{200D}", "an invisible character (U+200D)"),
            ("\u{2060}", "an invisible character (U+2060)"), ("\u{FEFF}", "an invisible character (U+FEFF)"),
            ("\u{AD}", "an invisible character (U+00AD)"), ("\u{1B}", "a control character (U+001B)"),
            ("\u{85}", "a control character (U+0085)"),
        ])
    func hiddenCharactersRefused(character: String, words: String) throws {
        try withCLI { cli in
            let added = try Self.add(cli, "gpj\(character).exe")
            #expect(added.status == 64, "\(added.stderr)")
            #expect(added.stderr.hasPrefix("Error: invalid value for --id: contains \(words)"), "\(added.stderr)")
            let file = cli.dir.file("regions.json")
            let escaped = JSONValue.string("gpj\(character).exe").serialized()
            try #"{"regions":[{"id":\#(escaped),"lat":1,"lon":2,"radius":3}]}"#.write(
                toFile: file, atomically: true, encoding: .utf8)
            let imported = try cli.run("import", file)
            #expect(imported.status == 65, "\(imported.stderr)")
            #expect(imported.stderr.contains(words), "\(imported.stderr)")
            #expect(try cli.ids().isEmpty)
        }
    }

    @Test("through the control socket: the engine compares ids in NFC too")
    func controlSocket() async throws {
        try await withCLI { cli in
            let fifo = cli.dir.file("fleet.fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            let daemon = try cli.daemon(["--source", "json:" + fifo])
            #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
            #expect(try Self.add(cli, Self.decomposed).status == 0)
            #expect(try Self.add(cli, Self.precomposed).status == 65)
            #expect(try cli.run("show", Self.precomposed).status == 0)
            let bidi = try Self.add(cli, "a\u{202E}b")
            #expect(bidi.status == 64, "\(bidi.stderr)")
            #expect(try cli.run("remove", Self.precomposed).status == 0)
            #expect(try cli.ids().isEmpty)
            _ = await daemon.stop()
        }
    }
}

/// An expiry in the past: one rule for `add` and `import` (stored, expires at once, said on stderr).
@Suite("an expiry in the past")
struct PastExpiryTests {
    @Test("add and import take a past expiry alike: stored, a warning, expired by the engine; the backup restores")
    func oneRule() async throws {
        try await withCLI { cli in
            let past = "2020-01-01T00:00:00.000Z"
            let added = try cli.run(
                "add", "--id", "old", "--lat", "1", "--lon", "2", "--radius", "5", "--expires", past)
            #expect(added.status == 0, "\(added.stderr)")
            #expect(
                added.stderr
                    == "warning: region \"old\" expires at \(past), in the past: it expires at once (geofence add --replace with a later --expires to keep it)\n"
            )
            let file = cli.dir.file("regions.json")
            try
                #"{"regions":[{"id":"older","lat":1,"lon":2,"radius":5,"expires":"\#(past)"},{"id":"new","lat":1,"lon":2,"radius":5}]}"#
                .write(toFile: file, atomically: true, encoding: .utf8)
            let imported = try cli.run("import", file)
            #expect(imported.status == 0, "\(imported.stderr)")
            #expect(
                imported.stderr == "warning: 1 region(s) have an expiry in the past and expire at once: \"older\"\n")
            let regions = try cli.regions()
            #expect(
                regions.filter { $0["expires"]?.stringValue?.hasPrefix("2020-01-01T00:00:00") == true }.count == 2,
                "\(regions)")

            let fifo = cli.dir.file("fleet.fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            let daemon = try cli.daemon(["--source", "json:" + fifo])
            #expect(await daemon.waitForLog("event expired region=\"older\"", timeout: 10), "\(daemon.log)")
            #expect(daemon.log.contains("event expired region=\"old\""), "\(daemon.log)")
            _ = await daemon.stop()
            let statuses = try cli.regions().map {
                "\($0["id"]?.stringValue ?? ""): \($0["status"]?.stringValue ?? "")"
            }
            #expect(statuses.sorted() == ["new: monitoring", "old: expired", "older: expired"], "\(statuses)")

            let exported = try cli.run("export")
            let backup = cli.dir.file("backup.json")
            try exported.stdout.write(toFile: backup, atomically: true, encoding: .utf8)
            let restored = try cli.run("import", "--replace", backup)
            #expect(restored.status == 0, "a store with expired regions restores: \(restored.stderr)")
            #expect(try cli.run("export").stdout == exported.stdout)
        }
    }
}
