import Foundation
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Every shell example of the README and `Docs/` is run, so a doc never shows a command that fails.
///
/// What counts as an example: each fenced `sh` block of `README.md` and `Docs/*.md` (one script), and each
/// command under `EXAMPLES:` in `Docs/cli.md` (the built-in help, one command each). Each runs alone, in
/// `bash -e -o pipefail`, with the built `geofence` first on the `PATH`, a fresh private state directory and
/// control socket (nothing listens there: no engine), a gpsd address where nothing answers, and a working
/// directory holding `regions.example.json`, the same file as `regions.json` (the name the docs give a
/// user's own file) and `drive.json` (a recorded drive). An example that acts on something an earlier one
/// made gets it made first (`givens`).
///
/// An example that talks to the HTTP API at `http://127.0.0.1:9464/v1/` (Docs/http.md) gets an engine of its
/// own serving it (`run --api on`, fed nothing, on the sandbox's store), its real address put in place of
/// `127.0.0.1:9464`.
///
/// An example that needs what a test cannot have (gpsd, a running engine, root, systemd, Kafka, MQTT, a
/// network, the build itself, or one that runs until stopped) is skipped with its reason printed: in a
/// hand-written doc, by a `<!-- skip-example: REASON -->` line just before its block; in `Docs/cli.md`,
/// which is generated, by `cliSkips`.
@Suite("the docs' examples run")
struct DocExamplesTests {
    struct Example: CustomStringConvertible {
        var file: String
        var line: Int
        var script: String
        var skip: String?

        var description: String { "\(file):\(line)" }
    }

    static let marker = "<!-- skip-example:"

    /// Examples of `Docs/cli.md` (from the command tree's help) that cannot run here, and why.
    static let cliSkips: [String: String] = [
        "gpspipe -w | geofence replay -": "needs gpsd (gpspipe)",
        "geofence run": "the engine: needs gpsd, runs until stopped",
        "geofence run --gpsd 10.0.0.7:2947:/dev/ttyACM0": "the engine: needs a remote gpsd, runs until stopped",
        "geofence run --subject truck-7": "the engine: needs gpsd, runs until stopped",
        "geofence run --metrics 127.0.0.1:9464": "the engine: needs gpsd, runs until stopped (and a fixed port)",
        "geofence run --metrics 0.0.0.0:8443 --api on --tls-cert /etc/geofence/cert.pem --tls-key /etc/geofence/key.pem":
            "the engine: needs gpsd and the certificate files, runs until stopped (on a fixed port)",
        "kcat -C -b kafka:9092 -t fixes -u | geofence run --source json:-": "needs Kafka (kcat), runs until stopped",
        "sudo systemctl enable --now geofence": "needs root and systemd",
        "geofence run --source 'mqtt://engine@broker/fleet/#' --mqtt-password-file /etc/geofence/mqtt.pw":
            "needs an MQTT broker and its password file, runs until stopped",
        "geofence locate --accuracy 10 --timeout 20s": "needs gpsd with a receiver (else waits out its timeout)",
        "geofence locate --json || echo \"no location: exit $?\"":
            "needs gpsd with a receiver (else waits out its timeout)",
        "geofence status": "needs a running engine and gpsd (exits 69 without an engine: that is its point)",
        "geofence status --json": "needs a running engine and gpsd (exits 69 without an engine: that is its point)",
        "geofence watch | jq -c 'select(.type == \"enter\")'": "needs a running engine, streams until stopped",
        "sudo geofence services off": "needs root (sudo)",
        "sudo geofence permission grant alice": "needs root (sudo) and a user alice",
        "geofence add --id district-7 --polygon district-7.geojson": "needs a GeoJSON file of your own",
        "geofence import districts.geojson": "needs a GeoJSON file of your own",
        "geofence events --follow": "follows until stopped",
        "geofence sink add --mqtt mqtts://engine@broker.example --password-file /etc/geofence/sink.pw --on enter,exit":
            "needs the password file /etc/geofence/sink.pw",
        "geofence events retry 42": "needs a delivery 42: an engine that ran hooks",
        "geofence sink add --id backend --http https://fleet.example/geofence --secret-file /etc/geofence/webhook.secret --on enter,exit":
            "needs the secret file /etc/geofence/webhook.secret",
        "geofence deliver --from nats://10.0.0.1:4222,10.0.0.2:4222,10.0.0.3:4222":
            "needs a NATS cluster with the engines' event stream, runs until stopped",
        "geofence deliver --from nats://10.0.0.1:4222 --state-dir /var/lib/geofence-crm --consumer crm":
            "needs a NATS cluster with the engines' event stream, runs until stopped",
        "geofence status --nats nats://10.0.0.1:4222,10.0.0.2:4222": "needs a NATS cluster of engines",
        "geofence status --nats nats://ops@10.0.0.1:4222 --nats-password-file ~/.config/geofence/nats.pw":
            "needs a NATS cluster of engines and its password file",
        "geofence deliver --from nats://deliver@10.0.0.1:4222 --nats-password-file /etc/geofence/nats.pw":
            "needs a NATS cluster with the engines' event stream and its password file, runs until stopped",
        "geofence events retry 0193a4c2-7f1e-7c3a-9d2b-5e8f0a1b2c3d": "needs that event: an engine that ran hooks",
    ]

    /// The address the docs give the HTTP API.
    static let apiAddress = "127.0.0.1:9464"

    static let depot = "geofence add --id depot --lat 51.5007 --lon -0.1246 --radius 200"

    /// What an example acts on that another example made: run first, in the example's own state.
    static let givens: [String: String] = [
        "geofence remove depot": depot,
        "geofence show depot": depot,
        "geofence hook remove journal": "geofence hook add --id journal --on all --command true",
        "geofence sink remove local": "geofence sink add --id local --mqtt mqtt://localhost",
        "geofence import phone.otrw": """
        echo '{"_type":"waypoints","waypoints":[{"_type":"waypoint","desc":"Home","lat":51.5007,\
        "lon":-0.1246,"rad":150,"tst":1700000000}]}' > phone.otrw
        """,
        "geofence token remove dashboard": "geofence token add dashboard > /dev/null",
    ]

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// The fenced `sh` blocks of a hand-written doc, with their skip markers.
    static func shellBlocks(file: String, text: String) -> (examples: [Example], stray: [Int]) {
        var examples: [Example] = []
        var stray: [Int] = []
        var skip: (line: Int, reason: String)?
        var block: (line: Int, lines: [String])?
        var inOtherFence = false
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if var open = block {
                if line == "```" {
                    examples.append(
                        Example(
                            file: file, line: open.line, script: open.lines.joined(separator: "\n"),
                            skip: skip?.reason))
                    skip = nil
                    block = nil
                } else {
                    open.lines.append(String(raw))
                    block = open
                }
                continue
            }
            if inOtherFence {
                if line == "```" { inOtherFence = false }
                continue
            }
            if let pending = skip, !line.isEmpty, !line.hasPrefix("```") {
                stray.append(pending.line)  // a marker must stand just before its block
                skip = nil
            }
            if line.hasPrefix(marker), line.hasSuffix("-->") {
                let reason = line.dropFirst(marker.count).dropLast(3).trimmingCharacters(in: .whitespaces)
                skip = (index + 1, reason)
            } else if line.hasPrefix("```") {
                let info = line.dropFirst(3).trimmingCharacters(in: .whitespaces)
                if ["sh", "bash", "shell"].contains(info) {
                    block = (index + 1, [])
                } else {
                    if let pending = skip { stray.append(pending.line) }
                    skip = nil
                    inOtherFence = true
                }
            }
        }
        return (examples, stray)
    }

    /// The commands under `EXAMPLES:` in `Docs/cli.md`: indented four spaces below their caption.
    static func cliExamples(text: String) -> [Example] {
        var examples: [Example] = []
        var inExamples = false
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if raw == "EXAMPLES:" {
                inExamples = true
            } else if raw.hasPrefix("```") {
                inExamples = false
            } else if inExamples, raw.hasPrefix("    ") {
                let command = raw.trimmingCharacters(in: .whitespaces)
                examples.append(Example(file: "Docs/cli.md", line: index + 1, script: command, skip: cliSkips[command]))
            }
        }
        return examples
    }

    static func allExamples() throws -> (examples: [Example], stray: [String]) {
        var examples: [Example] = []
        var stray: [String] = []
        let docs = try FileManager.default.contentsOfDirectory(atPath: repository + "/Docs").filter {
            $0.hasSuffix(".md")
        }
        for file in ["README.md"] + docs.sorted().map({ "Docs/" + $0 }) {
            let text = try String(contentsOfFile: repository + "/" + file, encoding: .utf8)
            if file == "Docs/cli.md" {
                examples += cliExamples(text: text)
            } else {
                let found = shellBlocks(file: file, text: text)
                examples += found.examples
                stray += found.stray.map { "\(file):\($0)" }
            }
        }
        return (examples, stray)
    }

    /// A fresh place for one example: its working directory (with the fixtures), state, socket and `PATH`.
    struct Sandbox {
        let dir: TemporaryDirectory
        var work: String { dir.file("work") }

        init(drive: String) throws {
            dir = try TemporaryDirectory("geofence-doc")
            let fm = FileManager.default
            try fm.createDirectory(atPath: work, withIntermediateDirectories: true)
            try fm.createDirectory(atPath: dir.file("bin"), withIntermediateDirectories: true)
            try fm.createSymbolicLink(atPath: dir.file("bin/geofence"), withDestinationPath: GeofenceBinary.path)
            for name in ["regions.example.json", "regions.json"] {
                try fm.copyItem(atPath: repository + "/regions.example.json", toPath: work + "/" + name)
            }
            try drive.write(toFile: work + "/drive.json", atomically: true, encoding: .utf8)
        }

        func environment(gpsd: String) -> [String: String] {
            var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("GEOFENCE_") }
            env["JOURNAL_STREAM"] = nil
            env["PATH"] = dir.file("bin") + ":" + (env["PATH"] ?? "/usr/bin:/bin")
            env["HOME"] = dir.path
            env["XDG_RUNTIME_DIR"] = dir.path
            env["XDG_STATE_HOME"] = dir.file("xdg-state")
            env["GEOFENCE_STATE_DIR"] = dir.file("state")
            env["GEOFENCE_SOCKET"] = dir.file("control.sock")
            env["GEOFENCE_POLICY"] = dir.file("policy.json")
            env["GEOFENCE_GPSD"] = gpsd
            return env
        }

        /// An engine serving the HTTP API on a free port, on this sandbox's store, fed nothing (through a FIFO
        /// it holds open): the engine, the feed to close, and the address it serves.
        func apiEngine(gpsd: String) async throws -> (DaemonProcess, FleetFeed, String) {
            let fifo = dir.file("fixes.fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            let daemon = try DaemonProcess(
                ["run", "--source", "json:" + fifo, "--metrics", "127.0.0.1:0", "--api", "on"],
                logPath: dir.file("engine.log"), environment: environment(gpsd: gpsd))
            let feed = try FleetFeed(fifo: fifo)
            guard await daemon.waitForLog("HTTP API at", timeout: 10),
                let range = daemon.log.range(of: #"127\.0\.0\.1:[0-9]+/v1/"#, options: .regularExpression)
            else {
                feed.close()
                throw DocExampleFailure(description: "the engine did not start its API:\n\(daemon.log)")
            }
            return (daemon, feed, String(daemon.log[range].dropLast(4)))
        }

        /// Runs `script` in bash, killed (with all it started) after `timeout` seconds.
        func run(_ script: String, gpsd: String, timeout: Int = 10) throws -> (
            status: Int32, stdout: String, stderr: String
        ) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
            process.arguments = ["-s", "KILL", String(timeout), "/bin/bash", "-e", "-o", "pipefail", "-c", script]
            process.currentDirectoryURL = URL(fileURLWithPath: work)
            process.environment = environment(gpsd: gpsd)
            process.standardInput = FileHandle.nullDevice
            let out = dir.file("stdout")
            let err = dir.file("stderr")
            for path in [out, err] { _ = FileManager.default.createFile(atPath: path, contents: nil) }
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: err))
            try GPSDHarness.withUnblockedSignals { try process.run() }
            process.waitUntilExit()
            return (
                status: process.terminationStatus,
                stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
                stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
            )
        }
    }

    /// A short recorded drive, as `gpspipe -w` writes it: a truck passing the depot.
    static var drive: String {
        (0..<12).map { i in
            let lat = 51.4990 + Double(i) * 0.0003
            let time = String(format: "2026-11-30T10:00:%02d.000Z", i * 4)
            return
                #"{"class":"TPV","device":"/dev/ttyACM0","mode":3,"time":"\#(time)","lat":\#(lat),"lon":-0.1246,"eph":5}"#
        }.joined(separator: "\n") + "\n"
    }

    struct DocExampleFailure: Error, CustomStringConvertible {
        var description: String
    }

    @Test("every shell example in README.md and Docs/*.md runs, or says why it cannot")
    func examplesRun() async throws {
        let (examples, stray) = try Self.allExamples()
        #expect(stray.isEmpty, "skip markers not just before a shell block: \(stray)")
        // The lists name real examples: an entry left behind when a doc changed is an error, not dead weight.
        let scripts = Set(examples.map(\.script))
        for key in Self.cliSkips.keys.sorted() where !scripts.contains(key) {
            Issue.record("cliSkips names no example of Docs/cli.md: \(key)")
        }
        for key in Self.givens.keys.sorted() where !scripts.contains(key) {
            Issue.record("givens names no example: \(key)")
        }

        let gpsd = try FleetSourceTests.deadGPSD()["GEOFENCE_GPSD"]!
        var ran = 0
        for example in examples {
            if let reason = example.skip {
                print("skipped \(example): \(reason)")
                continue
            }
            // Never run as root what a doc runs with sudo: such an example must be marked.
            let lines = example.script.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            if lines.contains(where: { $0.hasPrefix("sudo ") }) {
                Issue.record("\(example) uses sudo: mark it with \(Self.marker) REASON -->")
                continue
            }
            let sandbox = try Sandbox(drive: Self.drive)
            defer { sandbox.dir.remove() }
            var script = (Self.givens[example.script].map { $0 + "\n" } ?? "") + example.script
            var engine: (DaemonProcess, FleetFeed, String)?
            if script.contains(Self.apiAddress) {
                engine = try await sandbox.apiEngine(gpsd: gpsd)
                script = script.replacingOccurrences(of: Self.apiAddress, with: engine?.2 ?? Self.apiAddress)
            }
            let result = try sandbox.run(script, gpsd: gpsd)
            if let (daemon, feed, _) = engine {
                feed.close()
                #expect(await daemon.stop() != nil, "the API's engine did not stop:\n\(daemon.log)")
            }
            ran += 1
            #expect(
                result.status == 0,
                "\(example) exits \(result.status):\n\(example.script)\n\(result.stderr)\(result.stdout.prefix(2000))")
        }
        // The extraction itself works: most of the examples are found and run.
        #expect(ran >= 30, "only \(ran) examples ran")
        print("ran \(ran) doc examples, skipped \(examples.count - ran)")
    }
}
