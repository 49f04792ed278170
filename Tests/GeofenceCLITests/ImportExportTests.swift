import Foundation
import GeofenceCLI
import GeofenceCore
import GeofenceEngine
import GeofenceStore
import GeofenceTestSupport
import Testing

@Suite("geofence import and export")
struct ImportExportTests {
    private func goodRegions(_ count: Int) -> [String] {
        (0..<count).map { i in
            #"{"id":"r\#(i)","lat":\#(Double(i % 170) * 0.5 - 42),"lon":\#(Double(i % 350) * 0.5 - 87),"radius":\#(50 + i % 2000)}"#
        }
    }

    @Test("the example file imports, and export writes back what was imported")
    func example() throws {
        try withCLI { cli in
            let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            let example = repo.appendingPathComponent("regions.example.json").path
            let result = try cli.run("import", example)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(try cli.ids() == ["depot-north", "customer-acme-42", "fuel-a40"])

            let exported = try cli.run("export")
            #expect(exported.status == 0)
            let original = try JSON.parse(String(contentsOfFile: example, encoding: .utf8))
            let roundTrip = try JSON.parse(exported.stdout)
            // Same regions, same fields (export spells notify sorted and dwell canonically, as the example does).
            #expect(roundTrip == original)

            // Export, then import into a fresh store: identical.
            try withCLI { other in
                #expect(try other.run(["import", "-"], stdin: exported.stdout).status == 0)
                #expect(try other.run("export").stdout == exported.stdout)

                let geojson = try JSON.parse(try cli.run("export", "--format", "geojson").stdout)
                #expect(geojson["type"]?.stringValue == "FeatureCollection")
                let features = try #require(geojson["features"]?.arrayValue)
                #expect(features.count == 3)
                // A circle is drawn as a polygon of 64 vertices, and carried in its properties.
                #expect(features[0]["geometry"]?["type"]?.stringValue == "Polygon")
                #expect(features[0]["geometry"]?["coordinates"]?.arrayValue?.first?.arrayValue?.count == 65)
                #expect(features[0]["properties"]?["circle"] == ["lat": 51.5007, "lon": -0.1246, "radius": 200])
                // And a GeoJSON export imports back as the same regions.
                try withCLI { third in
                    let fromGeoJSON = try third.run(
                        ["import", "-"], stdin: try cli.run("export", "--format", "geojson").stdout)
                    #expect(fromGeoJSON.status == 0, "\(fromGeoJSON.stderr)")
                    #expect(try third.run("export").stdout == exported.stdout)
                }
            }
        }
    }

    @Test(
        "a bad file imports nothing and names the problem",
        arguments: [
            ("not json at all", "not valid JSON"),
            (#"{"regions": [{"id": "a", "lat": 1, "lon": 2, "radius": 3}"#, "not valid JSON"),
            (#"{"regions": {"id": "a"}}"#, "\"regions\" must be an array"),
            (#"[{"id": "a", "lat": "north", "lon": 2, "radius": 3}]"#, "regions[0].lat"),
            (
                #"[{"id": "a", "lat": 1, "lon": 2, "radius": 3}, {"id": "a", "lat": 1, "lon": 2, "radius": 3}]"#,
                "regions[1].id"
            ),
            (#"[{"id": "a", "lat": 1, "lon": 2, "radius": 3, "radious": 4}]"#, "regions[0].radious"),
            (#"[{"id": "a", "lat": 1, "lon": 2}]"#, "regions[0].radius"),
            (#"[{"id": "a", "lat": 1, "lon": 2, "radius": 3, "hooks": {"arrive": "x"}}]"#, "regions[0].hooks.arrive"),
            ("", "not valid JSON"),
        ])
    func badFiles(text: String, expected: String) throws {
        try withCLI { cli in
            try cli.run("add", "--lat", "1", "--lon", "1", "--radius", "10", "--id", "existing")
            let file = cli.dir.file("bad.json")
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            let result = try cli.run("import", file)
            #expect(result.status == 65, "\(result.stderr)")
            #expect(result.stderr.hasPrefix("Error: nothing imported"))
            #expect(result.stderr.contains(expected), "\(result.stderr)")
            #expect(try cli.ids() == ["existing"])
        }
    }

    @Test("one bad entry among 1,000 good ones: nothing is imported, the bad one is named")
    func oneBadAmongMany() throws {
        try withCLI { cli in
            var entries = goodRegions(1000)
            entries[617] = #"{"id":"r617","lat":12,"lon":13,"radius":-4}"#
            let file = cli.dir.file("many.json")
            try ("{\"regions\":[" + entries.joined(separator: ",\n") + "]}").write(
                toFile: file, atomically: true, encoding: .utf8)
            let result = try cli.run("import", file)
            #expect(result.status == 65)
            #expect(result.stderr.contains("regions[617].radius"), "\(result.stderr)")
            #expect(result.stderr.contains("r617"))
            #expect(try cli.ids().isEmpty)

            entries[617] = #"{"id":"r617","lat":12,"lon":13,"radius":4}"#
            try ("{\"regions\":[" + entries.joined(separator: ",\n") + "]}").write(
                toFile: file, atomically: true, encoding: .utf8)
            let good = try cli.run("import", file)
            #expect(good.status == 0, "\(good.stderr)")
            #expect(try cli.ids().count == 1000)
            // Importing again collides with every id: refused as a whole, unless --replace.
            let again = try cli.run("import", file)
            #expect(again.status == 65)
            #expect(again.stderr.contains("1000 regions already exist"))
            #expect(try cli.run("import", "--replace", file).status == 0)
            #expect(try cli.ids().count == 1000)
        }
    }

    @Test("through a running engine: a file of several parts is stored and monitored; a bad part fails it all")
    func throughTheEngine() async throws {
        try await withCLI { cli in
            let daemon = try await engine(cli)
            let file = cli.dir.file("many.json")
            try ("{\"regions\":[" + goodRegions(20_000).joined(separator: ",\n") + "]}").write(
                toFile: file, atomically: true, encoding: .utf8)
            let result = try cli.run("import", file)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("Imported 20000 regions"), "\(result.stdout)")
            #expect(await daemon.waitForLog("regions changed: 20000", timeout: 20), "\(daemon.log)")
            let store = try StateStore(directory: cli.stateDir)
            // The engine logs the change before it writes the statuses that follow from it: wait for them.
            _ = await Wait.until(timeout: 20) { (try? store.regions.countsByStatus()) == ["monitoring": 20_000] }
            #expect(try store.regions.countsByStatus() == ["monitoring": 20_000])

            // Bad entries in a later part: the CLI stops sending at the first, still reports every one, and the
            // engine stores nothing of the parts it was sent.
            var entries = (0..<20_000).map { i in #"{"id":"y\#(i)","lat":1,"lon":2,"radius":30}"# }
            entries[15_000] = #"{"id":"y15000","lat":1,"lon":2,"radius":-3}"#
            entries[19_999] = #"{"id":"y0","lat":1,"lon":2,"radius":30}"#
            let bad = cli.dir.file("bad.json")
            try ("[" + entries.joined(separator: ",\n") + "]").write(toFile: bad, atomically: true, encoding: .utf8)
            let refused = try cli.run("import", bad)
            #expect(refused.status == 65, "\(refused.stderr)")
            #expect(refused.stderr.hasPrefix("Error: nothing imported from \(bad): 2 problems"), "\(refused.stderr)")
            #expect(refused.stderr.contains("regions[15000].radius (id \"y15000\")"), "\(refused.stderr)")
            #expect(refused.stderr.contains("regions[19999].id: \"y0\" repeats the id of regions[0]"))
            #expect(try store.regions.count() == 20_000, "nothing of the refused file was stored")

            // A client that sends a bad entry in its second part: the engine refuses the whole import, naming the
            // entry by its place in the whole list, and stores none of it.
            func part(_ ids: Range<Int>, final: Bool, bad: Int? = nil) -> String {
                let entries = ids.map { i in
                    #"{"id":"x\#(i)","lat":1,"lon":2,"radius":\#(i == bad ? -1 : 30)}"#
                }
                return #"{"method":"import","params":{"final":\#(final),"regions":["#
                    + entries.joined(separator: ",") + "]}}"
            }
            let answers = try ControlClient(path: cli.socket).call(lines: [
                part(0..<100, final: false), part(100..<200, final: false, bad: 150), part(200..<300, final: true),
            ])
            #expect(answers.count == 3)
            guard case .failure(let error) = answers.last?.result else {
                Issue.record("the import must fail: \(answers)")
                return
            }
            #expect(error.message.contains("regions[150].radius"), "\(error.message)")
            #expect(try store.regions.count() == 20_000, "nothing of the bad import was stored")
            _ = await daemon.stop()
        }
    }

    /// One request line of an import in parts: regions `x<i>` (radius 30, or -1 for `bad`).
    private func part(
        _ ids: Range<Int>, final: Bool, bad: Int? = nil, prefix: String = "x", flags: String = ""
    ) -> String {
        let entries = ids.map { i in #"{"id":"\#(prefix)\#(i)","lat":1,"lon":2,"radius":\#(i == bad ? -1 : 30)}"# }
        return #"{"method":"import","params":{"final":\#(final)\#(flags),"regions":["#
            + entries.joined(separator: ",") + "]}}"
    }

    private func failure(_ response: ControlResponse?) -> ControlError? {
        if case .failure(let error)? = response?.result { return error }
        return nil
    }

    @Test("through a running engine: a client gone mid-import leaves nothing stored, and the next import works")
    func clientGoneMidImport() async throws {
        try await withCLI { cli in
            let daemon = try await engine(cli)
            let client = try RawClient(cli.socket)
            for range in [0..<500, 500..<1000] {
                let answer = try JSON.parse(try client.exchange(part(range, final: false)))
                #expect(answer["result"]?["staged"]?.intValue == range.upperBound, "\(answer)")
            }
            client.close()
            // The engine let go of the import (and the store's write lock with it): the next import is stored at
            // once, where a lock still held would make it wait and fail (busy).
            let file = cli.dir.file("next.json")
            try ("[" + goodRegions(3000).joined(separator: ",") + "]").write(
                toFile: file, atomically: true, encoding: .utf8)
            let started = Date()
            let result = try cli.run("import", file)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(Date().timeIntervalSince(started) < 4)
            let store = try StateStore(directory: cli.stateDir)
            #expect(try store.regions.count() == 3000)
            #expect(try store.regions.find(id: "x1") == nil)
            #expect(try cli.run("add", "--id", "later", "--lat", "1", "--lon", "1", "--radius", "9").status == 0)
            #expect(daemon.isRunning)
            _ = await daemon.stop()
        }
    }

    @Test(
        "an engine stopped in the middle of an import stops at once, with its last state committed, and stores none of it"
    )
    func stoppedMidImport() async throws {
        try await withCLI { cli in
            let daemon = try await engine(cli)
            let client = try RawClient(cli.socket)
            defer { client.close() }
            let answer = try JSON.parse(try client.exchange(part(0..<500, final: false)))
            #expect(answer["result"]?["staged"]?.intValue == 500, "\(answer)")
            // The client keeps the connection (and the import, and the store's write lock) open.
            let took = await daemon.stop(timeout: 10)
            #expect(took.map { $0 < 3 } == true, "took \(String(describing: took)) s: \(daemon.log)")
            #expect(daemon.process.terminationStatus == 0, "\(daemon.log)")
            #expect(!daemon.log.contains("database is locked"), "\(daemon.log)")
            let store = try StateStore(directory: cli.stateDir)
            #expect(try store.regions.count() == 0)
        }
    }

    @Test("through a running engine: a later part that breaks the protocol fails the whole import")
    func malformedLaterPart() async throws {
        try await withCLI { cli in
            let daemon = try await engine(cli)
            let store = try StateStore(directory: cli.stateDir)
            // A part without regions: it used to be answered with an error and skipped, and the rest committed.
            var answers = try ControlClient(path: cli.socket).call(lines: [
                part(0..<100, final: false), #"{"method":"import","params":{"final":false}}"#,
                part(100..<200, final: true),
            ])
            #expect(failure(answers[1])?.message.contains("params.regions") == true, "\(answers)")
            #expect(failure(answers.last)?.code == .badRequest, "\(answers)")
            #expect(try store.regions.count() == 0)
            // The same as the first part: the rest must not be taken for a new import and committed.
            answers = try ControlClient(path: cli.socket).call(lines: [
                #"{"method":"import","params":{"final":false}}"#, part(0..<100, final: false),
                part(100..<200, final: true),
            ])
            #expect(failure(answers.last)?.message.contains("part 1 has none") == true, "\(answers)")
            #expect(try store.regions.count() == 0)
            // A line that is not a request at all, between parts: it may have been one, so nothing is imported.
            answers = try ControlClient(path: cli.socket).call(lines: [
                part(0..<100, final: false), #"{"method":"import","params":{"final":false,"regions":[{"id":"#,
                part(100..<200, final: true),
            ])
            #expect(failure(answers.last)?.message.contains("could not be read") == true, "\(answers)")
            #expect(try store.regions.count() == 0)
            // A part whose flags differ from the first's: the import takes them from the first, so it says so.
            answers = try ControlClient(path: cli.socket).call(lines: [
                part(0..<100, final: false), part(100..<200, final: false),
                part(200..<300, final: true, flags: #","replace":true"#),
            ])
            let refused = try #require(failure(answers.last), "\(answers)")
            #expect(refused.code == .badRequest)
            #expect(refused.message.contains("replace"), "\(refused.message)")
            #expect(refused.message.contains("every part"), "\(refused.message)")
            #expect(try store.regions.count() == 0)
            // A bad entry in a later part of a large import: nothing of it is stored.
            answers = try ControlClient(path: cli.socket).call(
                lines: (0..<10).map { i in part(i * 2000..<(i + 1) * 2000, final: i == 9, bad: 17_345) })
            #expect(failure(answers.last)?.message.contains("regions[17345].radius") == true, "\(answers.last!)")
            #expect(try store.regions.count() == 0)
            _ = await daemon.stop()
        }
    }

    @Test("through a running engine: --replace, and replace and dryRun taken from the first part")
    func replaceAndDryRunThroughTheEngine() async throws {
        try await withCLI { cli in
            let daemon = try await engine(cli)
            let store = try StateStore(directory: cli.stateDir)
            let file = cli.dir.file("some.json")
            try ("[" + goodRegions(15_000).joined(separator: ",\n") + "]").write(
                toFile: file, atomically: true, encoding: .utf8)
            #expect(try cli.run("import", file).status == 0)
            let again = try cli.run("import", file)
            #expect(again.status == 65)
            #expect(again.stderr.contains("15000 regions already exist"), "\(again.stderr)")
            // The same ids, wider: replaced through the engine, in parts.
            try
                ("[" + (0..<15_000).map { #"{"id":"r\#($0)","lat":1,"lon":2,"radius":777}"# }.joined(separator: ",\n")
                + "]").write(toFile: file, atomically: true, encoding: .utf8)
            let replaced = try cli.run("import", "--replace", file)
            #expect(replaced.status == 0, "\(replaced.stderr)")
            #expect(try store.regions.count() == 15_000)
            #expect(try store.regions.find(id: "r14999")?.region.radius == 777)

            // A client that gives replace with its first part only: it holds for the whole import.
            var answers = try ControlClient(path: cli.socket).call(lines: [
                part(0..<100, final: false, prefix: "r", flags: #","replace":true"#),
                part(100..<200, final: true, prefix: "r"),
            ])
            #expect(failure(answers.last) == nil, "\(answers)")
            #expect(try store.regions.find(id: "r150")?.region.radius == 30)

            // A dry run in parts checks everything and stores nothing.
            answers = try ControlClient(path: cli.socket).call(lines: [
                part(0..<100, final: false, prefix: "d", flags: #","dryRun":true"#),
                part(100..<200, final: true, prefix: "d"),
            ])
            #expect(answers.last?.result == .success(["checked": 200, "imported": 0]), "\(answers)")
            #expect(try store.regions.find(id: "d1") == nil)
            // The CLI's --dry-run with an engine running stores nothing either.
            #expect(try cli.run("import", "--dry-run", file).status == 0)
            #expect(try store.regions.count() == 15_000)
            _ = await daemon.stop()
        }
    }

    @Test("through a running engine: its own writes wait for an import in progress and are kept")
    func engineWritesDuringAnImport() async throws {
        try await withCLI { cli in
            let daemon = try await engine(cli)
            let client = try RawClient(cli.socket)
            defer { client.close() }
            #expect(try JSON.parse(try client.exchange(part(0..<1000, final: false)))["result"]?["staged"] == 1000)
            // The engine writes the switch and its event while the import holds the write lock...
            let switching = Task { try cli.run("services", "off") }
            // Time for the switch to reach the lock and wait there: that it waits shows only as time passing.
            try await Task.sleep(for: .seconds(1))
            // ...they wait for it, and neither ends up in the other's transaction.
            let answer = try JSON.parse(try client.exchange(part(1000..<2000, final: true)))
            #expect(answer["result"]?["imported"] == 2000, "\(answer)")
            let switched = try await switching.value
            #expect(switched.status == 0, "\(switched.stderr)")
            let store = try StateStore(directory: cli.stateDir)
            #expect(try store.regions.count() == 2000)
            #expect(try store.permissions.servicesOn() == false)
            #expect(try GeofenceStoreProbe.events(cli.stateDir).contains { $0.contains(#""type":"services""#) })
            _ = await daemon.stop()
        }
    }

    @Test("the parts sent to the engine carry the file's entries as written, one line each")
    func partsCutFromTheFile() throws {
        let entries = (0..<40).map { i in
            """
            {
              "id": "p\(i)", "lat": 1.5, "lon": -2,
              "radius": \(10 + i), "hooks": {"enter": "echo \\"[{\\" \\\\n"}
            }
            """
        }
        for (text, cut) in [
            ("{\"note\": [\"]\"],\n \"regions\": [\n" + entries.joined(separator: ",\n") + "\n]}\n", true),
            ("{\"regi\\u006fns\": [" + entries.joined(separator: ",") + "]}", false),
        ] {
            let bytes = Array(text.utf8)
            let regions = try RegionJSON.decodeFile(bytes, now: Date()).get()
            #expect(regions.count == 40)
            #expect((RegionJSON.entryRanges(in: bytes) != nil) == cut)
            let lines = Array(ImportParts(file: bytes, regions: regions, replace: true, limit: 400) { _ in })
            #expect(lines.count >= 8, "\(lines.count)")
            var sent: [JSONValue] = []
            for (i, line) in lines.enumerated() {
                #expect(!line.contains("\n"))
                #expect(line.utf8.count < 400 + 100)
                let request = try #require(try? ControlRequest.parse(Array(line.utf8)).get())
                #expect(request.method == .importRegions)
                #expect(request.params["final"]?.boolValue == (i == lines.count - 1))
                #expect(request.params["replace"]?.boolValue == true)
                sent += request.params["regions"]?.arrayValue ?? []
            }
            let decoded = try RegionJSON.decodeEntries(sent, now: Date()).get()
            #expect(decoded.map(\.id) == regions.map(\.id))
            #expect(decoded.map(\.hooks) == regions.map(\.hooks))
        }
    }

    @Test("through a running engine: an exported (pretty-printed) file imports into another store identically")
    func exportImportThroughTheEngine() async throws {
        try await withCLI { cli in
            let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            #expect(try cli.run("import", repo.appendingPathComponent("regions.example.json").path).status == 0)
            let exported = try cli.run("export")
            try await withCLI { other in
                let daemon = try other.daemon(["--gpsd", "127.0.0.1:9"])
                #expect(await daemon.waitForLog("control socket at", timeout: 20), "\(daemon.log)")
                let imported = try other.run(["import", "-"], stdin: exported.stdout)
                #expect(imported.status == 0, "\(imported.stderr)")
                #expect(try other.run("export").stdout == exported.stdout)
                _ = await daemon.stop()
            }
        }
    }

    @Test("--dry-run checks and stores nothing")
    func dryRun() throws {
        try withCLI { cli in
            let file = cli.dir.file("some.json")
            try ("[" + goodRegions(5).joined(separator: ",") + "]").write(
                toFile: file, atomically: true, encoding: .utf8)
            let result = try cli.run("import", "--dry-run", file)
            #expect(result.status == 0)
            #expect(result.stdout.contains("5 regions checked"))
            #expect(try cli.ids().isEmpty)
        }
    }
}

/// `geofence run` for `cli`'s state directory and socket, once its control socket answers.
private func engine(_ cli: CLI, sourceLocation: SourceLocation = #_sourceLocation) async throws -> DaemonProcess {
    let daemon = try cli.daemon(["--gpsd", "127.0.0.1:9"])
    #expect(
        await daemon.waitForLog("control socket at", timeout: 20), "\(daemon.log)", sourceLocation: sourceLocation)
    return daemon
}
