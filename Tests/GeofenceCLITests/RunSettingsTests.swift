import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// `geofence run`'s settings from the environment (the unit's /etc/default/geofence), their precedence, and
/// `run --print-config`.
@Suite("run settings from the environment")
struct RunSettingsTests {
    /// `run --print-config --json` as rows by name.
    static func settings(_ result: GeofenceBinary.Result) throws -> [String: JSONObject] {
        let rows = try #require(try JSON.parse(Array(result.stdout.utf8)).objectValue?["settings"]?.arrayValue)
        var byName: [String: JSONObject] = [:]
        for row in rows {
            let o = try #require(row.objectValue)
            byName[try #require(o["name"]?.stringValue)] = o
        }
        return byName
    }

    @Test func commandLineThenEnvironmentThenDefault() throws {
        try withCLI { cli in
            let result = try cli.run(
                ["run", "--print-config", "--json", "--max-regions", "5"],
                environment: [
                    "GEOFENCE_MAX_REGIONS": "7", "GEOFENCE_STALE_AFTER": "30s", "GEOFENCE_HOOK_TIMEOUT": "5s",
                    "GEOFENCE_GPSD": "127.0.0.1:1", "GEOFENCE_LOG_LEVEL": "",
                ])
            #expect(result.status == 0, "\(result.stderr)")
            let s = try Self.settings(result)
            func row(_ name: String) -> (String?, String?) {
                (s[name]?["value"]?.stringValue, s[name]?["from"]?.stringValue)
            }
            #expect(row("--max-regions") == ("5", "command-line"))
            #expect(row("--stale-after") == ("30s", "environment"))
            #expect(row("--hook-timeout") == ("5s", "environment"))
            #expect(row("--gpsd") == ("127.0.0.1:1", "environment"))
            // An empty variable (a line of the environment file left blank) is no setting.
            #expect(row("--log-level") == ("info", "default"))
            #expect(row("--min-margin") == ("5", "default"))
            #expect(row("--state-dir") == (cli.stateDir, "command-line"))
            #expect(row("--socket") == (cli.socket, "environment"))
            #expect(row("--max-accuracy").1 == "default")
            // Nothing was started or created: it only printed.
            #expect(!FileManager.default.fileExists(atPath: cli.stateDir))
        }
    }

    /// Every valued option of `run` has its own variable, GEOFENCE_ and the option's name.
    @Test func everyRunOptionHasOneVariable() throws {
        try withCLI { cli in
            let s = try Self.settings(try cli.run(["run", "--print-config", "--json"]))
            #expect(s.count >= 20)
            var seen = Set<String>()
            for (name, row) in s where name.hasPrefix("--") {
                let variable = try #require(row["variable"]?.stringValue, "\(name) has no variable")
                #expect(
                    variable == "GEOFENCE_" + name.dropFirst(2).uppercased().replacingOccurrences(of: "-", with: "_"))
                #expect(seen.insert(variable).inserted)
            }
            let help = try cli.run(["run", "--help"]).stdout
            for variable in seen { #expect(help.contains(variable), "\(variable) is not in run --help") }
        }
    }

    /// The package's /etc/default/geofence lists every variable, commented out (the defaults apply).
    @Test func theShippedSettingsFileListsEveryVariable() throws {
        try withCLI { cli in
            let s = try Self.settings(try cli.run(["run", "--print-config", "--json"]))
            let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            let file = try String(
                contentsOf: repo.appendingPathComponent("Packaging/geofence.default"), encoding: .utf8)
            let lines = file.split(separator: "\n")
            #expect(!lines.contains { !$0.hasPrefix("#") && !$0.trimmingCharacters(in: .whitespaces).isEmpty })
            let variables =
                s.values.compactMap { $0["variable"]?.stringValue } + [
                    "GEOFENCE_MQTT_PASSWORD", "GEOFENCE_NATS_PASSWORD",
                ]
            for variable in variables {
                #expect(lines.contains { $0.hasPrefix("#\(variable)=") }, "\(variable) is not in geofence.default")
            }
        }
    }

    @Test(arguments: [
        (
            "GEOFENCE_MAX_REGIONS", "0",
            "Error: invalid value for GEOFENCE_MAX_REGIONS (--max-regions): must be more than 0"
        ),
        (
            "GEOFENCE_STALE_AFTER", "soon",
            "Error: invalid value for GEOFENCE_STALE_AFTER (--stale-after): unexpected 's' in duration 'soon'"
        ),
        (
            "GEOFENCE_SOURCE", "serial",
            "Error: invalid value for GEOFENCE_SOURCE (--source): \"serial\" is not gpsd, json:PATH, mqtt://"
        ),
        ("GEOFENCE_LOG_LEVEL", "loud", "Error: invalid value for GEOFENCE_LOG_LEVEL (--log-level): \"loud\" is not"),
        (
            "GEOFENCE_MQTT_ACK", "sometimes",
            "Error: invalid value for GEOFENCE_MQTT_ACK (--mqtt-ack): \"sometimes\" is not commit or receipt"
        ),
        (
            "GEOFENCE_TRACK_FACTOR", "0",
            "Error: invalid value for GEOFENCE_TRACK_FACTOR (--track-factor): must be more than 0"
        ),
        (
            "GEOFENCE_TRACK_FACTOR", "inf",
            "Error: invalid value for GEOFENCE_TRACK_FACTOR (--track-factor)"
        ),
        (
            "GEOFENCE_HOOK_CONCURRENCY", "1000",
            "Error: invalid value for GEOFENCE_HOOK_CONCURRENCY (--hook-concurrency)"
        ),
    ])
    func aBadValueInTheEnvironmentIsOneLineNamingTheVariable(variable: String, value: String, expected: String) throws {
        try withCLI { cli in
            for arguments in [["run"], ["run", "--print-config"]] {
                let result = try cli.run(arguments, environment: [variable: value])
                #expect(result.status == 64)
                let lines = result.stderr.split(separator: "\n")
                #expect(lines.count == 1, "\(result.stderr)")
                #expect(result.stderr.hasPrefix(expected), "\(result.stderr)")
                #expect(!FileManager.default.fileExists(atPath: cli.stateDir))
            }
            // The same value on the command line is the usual usage error, which names the option.
            let option =
                "--" + variable.dropFirst("GEOFENCE_".count).lowercased().replacingOccurrences(of: "_", with: "-")
            let result = try cli.run(["run", option, value])
            #expect(result.status == 64)
            #expect(result.stderr.hasPrefix("Error: invalid value for \(option)"), "\(result.stderr)")
            #expect(result.stderr.contains("Usage: geofence run"))
        }
    }

    /// `--track-factor`: a factor, or `off` (the decisions on the track, Docs/events.md), from either place.
    @Test func theTrackFactorIsAFactorOrOff() throws {
        try withCLI { cli in
            let byDefault = try Self.settings(try cli.run(["run", "--print-config", "--json"]))
            #expect(byDefault["--track-factor"]?["value"]?.stringValue == "1.5")
            let off = try cli.run(["run", "--print-config", "--json", "--track-factor", "off"])
            #expect(off.status == 0, "\(off.stderr)")
            #expect(try Self.settings(off)["--track-factor"]?["value"]?.stringValue == "off")
            let two = try cli.run(["run", "--print-config", "--json"], environment: ["GEOFENCE_TRACK_FACTOR": "2"])
            #expect(two.status == 0, "\(two.stderr)")
            let row = try Self.settings(two)["--track-factor"]
            #expect(row?["value"]?.stringValue == "2" && row?["from"]?.stringValue == "environment")
        }
    }

    /// `--pass-turn-acceleration`: m/s², or `off` (the turning bound of an inferred pass, Docs/events.md).
    @Test func thePassTurnAccelerationIsANumberOrOff() throws {
        try withCLI { cli in
            let byDefault = try Self.settings(try cli.run(["run", "--print-config", "--json"]))
            #expect(byDefault["--pass-turn-acceleration"]?["value"]?.stringValue == "8")
            let off = try cli.run(["run", "--print-config", "--json", "--pass-turn-acceleration", "off"])
            #expect(off.status == 0, "\(off.stderr)")
            #expect(try Self.settings(off)["--pass-turn-acceleration"]?["value"]?.stringValue == "off")
            let zero = try cli.run(["run", "--print-config", "--pass-turn-acceleration", "0"])
            #expect(zero.status == 64)
            let four = try cli.run(
                ["run", "--print-config", "--json"], environment: ["GEOFENCE_PASS_TURN_ACCELERATION": "4"])
            #expect(four.status == 0, "\(four.stderr)")
            let row = try Self.settings(four)["--pass-turn-acceleration"]
            #expect(row?["value"]?.stringValue == "4" && row?["from"]?.stringValue == "environment")
        }
    }

    @Test func passwordsAreNeverPrinted() throws {
        try withCLI { cli in
            let fromURL = try cli.run(
                ["run", "--print-config"],
                environment: ["GEOFENCE_SOURCE": "mqtt://engine:hunter2@127.0.0.1:1/fleet/#"])
            #expect(fromURL.status == 0, "\(fromURL.stderr)")
            #expect(!fromURL.stdout.contains("hunter2"))
            #expect(fromURL.stdout.contains("mqtt://engine:(set)@127.0.0.1:1/fleet/#"))
            #expect(fromURL.stdout.contains("mqtt-password"))

            let file = cli.dir.file("mqtt.pw")
            try "hunter3\n".write(toFile: file, atomically: true, encoding: .utf8)
            for environment in [
                ["GEOFENCE_MQTT_PASSWORD": "hunter3"], ["GEOFENCE_MQTT_PASSWORD_FILE": file],
            ] {
                let result = try cli.run(
                    ["run", "--print-config", "--json", "--source", "mqtt://engine@127.0.0.1:1/fleet/#"],
                    environment: environment)
                #expect(result.status == 0, "\(result.stderr)")
                #expect(!result.stdout.contains("hunter3"))
                let s = try Self.settings(result)
                #expect(s["mqtt-password"]?["value"]?.stringValue == "(set)")
                #expect(s["mqtt-password"]?["from"]?.stringValue == "environment")
            }

            // A NATS cluster's: from the variable, or the file of --nats-password-file (or its variable).
            for (arguments, environment, from) in [
                ([], ["GEOFENCE_NATS_PASSWORD": "hunter3"], "environment"),
                ([], ["GEOFENCE_NATS_PASSWORD_FILE": file], "environment"),
                (["--nats-password-file", file], [:], "command-line"),
            ] as [([String], [String: String], String)] {
                let result = try cli.run(
                    ["run", "--print-config", "--json", "--source", "nats://engine@127.0.0.1:1", "--partitions", "4"]
                        + arguments, environment: environment)
                #expect(result.status == 0, "\(result.stderr)")
                #expect(!result.stdout.contains("hunter3"))
                let s = try Self.settings(result)
                #expect(s["nats-password"]?["value"]?.stringValue == "(set)", "\(result.stdout)")
                #expect(s["nats-password"]?["from"]?.stringValue == from, "\(result.stdout)")
            }
        }
    }

    /// Not only printed: a setting from the environment is what the engine runs with.
    @Test func theEngineRunsWithTheEnvironmentsSettings() async throws {
        try await withCLI { cli in
            let fixes = cli.dir.file("fixes.jsonl")
            _ = FileManager.default.createFile(atPath: fixes, contents: Data())
            let daemon = try DaemonProcess(
                ["run", "--state-dir", cli.stateDir], logPath: cli.dir.file("run.log"),
                environment: cli.environment.merging([
                    "GEOFENCE_SOURCE": "json:\(fixes)", "GEOFENCE_LOG_LEVEL": "notice",
                    "GEOFENCE_GPSD": try FleetSourceTests.deadGPSD()["GEOFENCE_GPSD"]!,
                ]) { $1 })
            #expect(await daemon.waitForLog("stopped:", timeout: 20), "\(daemon.log)")
            _ = await daemon.stop()
            #expect(daemon.log.contains("fixes from JSON lines from \(fixes)"), "\(daemon.log)")
            // notice: the info lines (the control socket's path) are not logged.
            #expect(!daemon.log.contains("control socket at"), "\(daemon.log)")
        }
    }
}
