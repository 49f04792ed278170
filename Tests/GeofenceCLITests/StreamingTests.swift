import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// `list` and `export` through a running engine are streamed: the CLI's memory stays small however big the
/// answer (it held the whole answer, and gave up on one over 64 MiB: Docs/benchmarks.md measures 1M regions).
@Suite("streamed answers", .serialized)
struct StreamingTests {
    @Test("list --json and export of 24 MB of regions through the engine, with the CLI under 40 MB")
    func bigAnswers() async throws {
        try await withCLI { cli in
            // 2,000 regions with three 4 KiB hooks each: 24 MB (the CLI alone needs about 20 MB).
            let hook = String(repeating: "h", count: 4_000)
            var text = #"{"regions": ["#
            for i in 0..<2_000 {
                if i > 0 { text += ",\n" }
                text +=
                    #"{"id": "r\#(i)", "lat": \#(Double(i % 170) * 0.5 - 42), "lon": 1, "radius": 50, "#
                    + #""hooks": {"enter": "\#(hook)", "exit": "\#(hook)", "dwell": "\#(hook)"}, "dwell": "1m"}"#
            }
            text += "]}\n"
            let file = cli.dir.file("big.json")
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            text = ""
            let imported = try cli.run("import", file)
            #expect(imported.status == 0, "\(imported.stderr)")
            try await withEngine(cli, ["--gpsd", "127.0.0.1:9"], timeout: 30) { daemon in

                for command in [["list", "--json"], ["export"]] {
                    let started = Date()
                    let result = try GeofenceBinary.run(
                        command + ["--state-dir", cli.stateDir], environment: cli.environment,
                        launcher: ["/usr/bin/time", "-f", "peak %M kB"])
                    #expect(result.status == 0, "\(command): \(result.stderr.suffix(300))")
                    #expect(result.stdout.utf8.count > 24_000_000, "\(command): \(result.stdout.utf8.count) bytes")
                    // Counted, not parsed: parsing 24 MB would be most of the test's time.
                    let ids = Self.count(command[0] == "export" ? #""id": "r"# : #""id":"r"#, in: result.stdout)
                    #expect(ids == 2_000, "\(command)")
                    #expect(
                        result.stdout.hasSuffix(command[0] == "export" ? "}\n  ]\n}\n" : "}]\n"), "\(command): whole")
                    let peak = result.stderr.split(separator: "\n").last { $0.hasPrefix("peak ") }
                        .flatMap { Int($0.dropFirst(5).prefix { $0.isNumber }) }
                    #expect((peak ?? .max) < 40 * 1024, "\(command): the CLI's peak was \(peak ?? -1) kB")
                    #expect(Date().timeIntervalSince(started) < 60, "\(command)")
                }
                _ = await daemon.stop()
            }
        }
    }

    /// How many times `pattern` occurs in `text` (bytes; patterns here never overlap themselves).
    static func count(_ pattern: String, in text: String) -> Int {
        let needle = Array(pattern.utf8)
        var found = 0
        var matched = 0
        for byte in text.utf8 {
            matched = byte == needle[matched] ? matched + 1 : (byte == needle[0] ? 1 : 0)
            if matched == needle.count {
                found += 1
                matched = 0
            }
        }
        return found
    }
}
