import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Names and other stored text never write terminal escapes (issue 23, items 6 and 7), through the real binary:
/// a name with ESC, BEL, CR, LF or U+202E is refused from `add` and from an import file; one already stored (a
/// store written before the rule) is shown escaped by `list` and `show`; a refused vehicle name is logged
/// escaped.
@Suite("terminal safety: names refused, stored text escaped")
struct TerminalSafetyTests {
    /// Bytes no output of the CLI may hold: C0 controls but line feed and tab, DEL, and U+202E in UTF-8.
    static func steering(_ text: String) -> [String] {
        var found: [String] = []
        for scalar in text.unicodeScalars {
            if scalar == "\n" || scalar == "\t" { continue }
            if scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value)
                || scalar.properties.generalCategory == .format || scalar.properties.isDefaultIgnorableCodePoint
            {
                found.append(String(scalar.value, radix: 16))
            }
        }
        return found
    }

    static let hostileNames = [
        "\u{1B}]0;pwned\u{07}", "clear\u{1B}[2J", "a\rb", "first\nsecond", "exe.\u{202E}gpj", "a\u{034F}b",
        "a\u{FE0F}", "\u{3164}", "x\u{115F}", "\u{FFA0}y", "a\u{17B4}b",
    ]

    @Test("add --name and import refuse control characters, bidi controls and invisible characters; nothing stored")
    func namesRefused() throws {
        try withCLI { cli in
            for (i, name) in Self.hostileNames.enumerated() {
                let added = try cli.run(
                    "add", "--id", "r\(i)", "--lat", "48.2", "--lon", "16.3", "--radius", "100", "--name", name)
                #expect(added.status == 64, "\(name.unicodeScalars.map(\.value)): \(added.stdout) \(added.stderr)")
                #expect(added.stderr.contains("name"), "\(added.stderr)")
                #expect(Self.steering(added.stderr).isEmpty, "\(added.stderr)")
            }
            let file = cli.dir.file("regions.json")
            let entries = Self.hostileNames.enumerated().map { i, name in
                JSONValue.object([
                    "id": .string("i\(i)"), "name": .string(name), "lat": 48.2, "lon": 16.3, "radius": 100,
                ])
            }
            try JSONValue.object(["regions": .array(entries)]).serialized().write(
                toFile: file, atomically: true, encoding: .utf8)
            let imported = try cli.run("import", file)
            #expect(imported.status == 65, "\(imported.stdout) \(imported.stderr)")
            #expect(Self.steering(imported.stderr).isEmpty, "\(imported.stderr)")
            #expect(imported.stderr.contains("regions[4]"), "\(imported.stderr)")
            #expect(try cli.ids().isEmpty)
        }
    }

    @Test("a name stored before the rule is shown escaped by list and show, and exactly by list --json")
    func storedNamesEscaped() throws {
        try withCLI { cli in
            #expect(
                try cli.run("add", "--id", "depot", "--lat", "48.2", "--lon", "16.3", "--radius", "100").status == 0)
            let raw = "\u{1B}]0;pwned\u{07}\u{1B}[2J\r\nexe.\u{202E}gpj\u{FE0F}"
            // Written as an older engine could have written it.
            do {
                let store = try StateStore(directory: cli.stateDir)
                try store.queue.write { db in try db.execute("UPDATE regions SET name = ? WHERE id = 'depot'", [raw]) }
            }
            let list = try cli.run("list")
            #expect(list.status == 0, "\(list.stderr)")
            #expect(Self.steering(list.stdout).isEmpty, "\(list.stdout.unicodeScalars.map(\.value))")
            #expect(list.stdout.contains(#"\u001B]0;pwned\u0007\u001B[2J\r\nexe.\u202Egpj\uFE0F"#), "\(list.stdout)")
            let show = try cli.run("show", "depot")
            #expect(show.status == 0, "\(show.stderr)")
            #expect(Self.steering(show.stdout).isEmpty, "\(show.stdout.unicodeScalars.map(\.value))")
            #expect(show.stdout.contains(#"\u001B]0;pwned"#), "\(show.stdout)")
            // JSON output stays JSON: the same name, escaped as JSON escapes it.
            let json = try cli.run("list", "--json")
            #expect(Self.steering(json.stdout).isEmpty)
            #expect(try JSON.parse(json.stdout).arrayValue?.first?["name"]?.stringValue == raw)
        }
    }

    @Test(
        "a refused vehicle name (an MQTT topic) with U+202E or U+2028 is logged escaped, never raw",
        .enabled(if: MosquittoBroker.isAvailable, "\(MosquittoBroker.unavailableReason)"))
    func refusedVehicleLoggedEscaped() async throws {
        try await withCLI { cli in
            let broker = try cli.broker()
            let daemon = try cli.daemon(["--source", "mqtt://127.0.0.1:\(broker.port)/in/#"])
            #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
            // TPVs without `device`: the topic names the vehicle, and these topics break the naming rule.
            let tpv = #"{"class":"TPV","mode":3,"time":"2026-11-30T00:00:00Z","lat":48.2,"lon":16.3}"#
            #expect(try broker.publish("in/exe.\u{202E}gpj", [tpv]) == 0)
            // Counted, not logged (the first of a kind is). A broker refuses C0 and C1 controls in topics.
            #expect(try broker.publish("in/first\u{2028}second", [tpv]) == 0)
            _ = try await FleetSourceTests.status(cli) { $0["data"]?["unusable"]?["bad-device"]?.intValue == 2 }
            #expect(await daemon.stop() != nil)
            #expect(daemon.log.contains(#"in/exe.\u202Egpj"#), "\(daemon.log)")
            #expect(Self.steering(daemon.log).isEmpty, "\(daemon.log.unicodeScalars.filter { $0.value > 0x7E })")
        }
    }
}
