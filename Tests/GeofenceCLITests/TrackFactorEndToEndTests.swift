import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

/// `run --track-factor` (and `GEOFENCE_TRACK_FACTOR`) reaches the monitor: the real binary, fed the poor
/// receiver's drive through the yard of the decisions on the track (`DecisionScenarios.approach`), gives what
/// the monitor gives in process for the same fixes with the same setting, and the setting changes the answer.
@Suite("run --track-factor, end to end")
struct TrackFactorEndToEndTests {
    /// A drive whose `enter` (and `exit`) only the track gives, with the default factor (1.5) and not with 3:
    /// the fixes alone give only the `determined` outside of the first fix (measured in process, seeds 1-20:
    /// 1-3, 8, 9, 12, 16, 17, 19 and 20 are such drives; checked again below).
    static let seed: UInt64 = 1

    /// The events the monitor gives in process for `fixes` in the yard, as `type state time` rows.
    static func inProcess(_ fixes: [Fix], fused: Bool, factor: Double = MonitorConfiguration().fusedFactor)
        -> [String]
    {
        var configuration = MonitorConfiguration()
        configuration.fusedDecisions = fused
        configuration.fusedFactor = factor
        return DecisionScenarios.monitored(fixes, regions: [DecisionScenarios.yard], configuration: configuration)
            .events.map { "\($0.type.rawValue) \($0.state?.rawValue ?? "-") \(TimestampParser.format($0.time))" }
    }

    @Test(
        "default and 1.5: the track's enter and exit; off (option or environment) or 3: the first fix's determined alone"
    )
    func trackFactorReachesTheMonitor() throws {
        // Stamped to the present (whole seconds, ending a few seconds ago), as a live producer stamps them.
        let start = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 - 40).rounded(.down))
        let drive = DecisionScenario(
            name: "approach", regions: [DecisionScenarios.yard],
            fixes: DecisionScenarios.approach(seed: Self.seed, start: start), required: [:])
        let on = Self.inProcess(drive.fixes, fused: true)
        let off = Self.inProcess(drive.fixes, fused: false)
        let wide = Self.inProcess(drive.fixes, fused: true, factor: 3)
        // The drive is one the setting decides: an `enter` with the track at 1.5, none without it or at 3.
        func types(_ rows: [String]) -> [String] { rows.map { String($0.prefix { $0 != " " }) } }
        #expect(types(on) == ["determined", "enter", "exit"], "\(on)")
        #expect(types(off) == ["determined"], "\(off)")
        #expect(wide == off, "\(wide)")
        let yard = DecisionScenarios.yard
        let runs: [(arguments: [String], environment: [String: String], expected: [String])] = [
            ([], [:], on),
            (["--track-factor", "1.5"], [:], on),
            (["--track-factor", "off"], [:], off),
            ([], ["GEOFENCE_TRACK_FACTOR": "off"], off),
            // The factor itself reaches the monitor, not only `off`: a band twice as wide decides nothing here.
            (["--track-factor", "3"], [:], wide),
        ]
        for run in runs {
            try withCLI { cli in
                let add = try cli.run(
                    "add", "--id", yard.id, "--lat", "\(yard.center.latitude)", "--lon", "\(yard.center.longitude)",
                    "--radius", "\(yard.radius)")
                #expect(add.status == 0, "\(add.stderr)")
                let file = cli.dir.file("van.json")
                try drive.tpvLines.write(toFile: file, atomically: true, encoding: .utf8)
                // A regular file: the engine takes every line and stops at its end.
                let engine = try cli.run(
                    ["run", "--source", "json:" + file] + run.arguments, environment: run.environment)
                #expect(engine.status == 0, "\(run.arguments) \(run.environment): \(engine.stderr)")
                let listed = try cli.run("events", "--json", "--subject", "van", "--region", yard.id)
                #expect(listed.status == 0, "\(listed.stderr)")
                let events = (try JSON.parse(listed.stdout).arrayValue ?? []).map {
                    "\($0["type"]?.stringValue ?? "-") \($0["event"]?["state"]?.stringValue ?? "-") \($0["time"]?.stringValue ?? "-")"
                }
                #expect(events == run.expected, "\(run.arguments) \(run.environment): \(engine.stderr)")
            }
        }
    }
}
