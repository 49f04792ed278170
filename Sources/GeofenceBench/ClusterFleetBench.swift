import Foundation
import GeofenceClusterSupport
import GeofenceCore
import GeofenceEngine
import GeofenceTestSupport

// `geofence-bench cluster-fleet` and `cluster-compare`: the fleet of issue 26's acceptance runs, published
// into a NATS cluster (`Scripts/nats-cluster.sh up DIR` prints the URL list), and the events stream compared
// with one `geofence replay` of the same fixes.

let clusterUsage = """
    USAGE: geofence-bench cluster-fleet --urls URLS --dir DIR [--vehicles N] [--interval SECONDS]
                                        [--minutes M] [--seed N] [--fast] [--no-publish]
           geofence-bench cluster-compare --urls URLS --dir DIR
           geofence-bench cluster-read --urls URLS --stream NAME

      cluster-fleet    writes DIR/regions.json (for geofence import) and DIR/fixes.jsonl (for geofence replay),
                       then publishes the fixes to geofence.fix.VEHICLE (JetStream, acknowledged; the stream
                       GEOFENCE_FIXES is created if missing), each once its time has come (--fast: at once,
                       fix times then run ahead of the clock: only for throughput). Defaults: 10000 vehicles,
                       one fix each every 10 s, for 5 minutes, seed 26.
      cluster-compare  imports DIR/regions.json and replays DIR/fixes.jsonl in a fresh state directory in
                       /dev/shm (run it once the last fix time has passed), reads the stream GEOFENCE_EVENTS and
                       prints what is missing and extra; exit status 1 when they differ.
      cluster-read     reads the stream NAME whole (as cluster-compare reads GEOFENCE_EVENTS) and prints how fast.
    """

/// Runs `cluster-fleet` or `cluster-compare` with the arguments after it; the process's exit status.
func runClusterCommand(_ command: String, _ arguments: [String]) -> Int32 {
    var options: [String: String] = [:]
    var flags = Set<String>()
    var rest = arguments[...]
    while let argument = rest.popFirst() {
        switch argument {
        case "--help", "-h":
            print(clusterUsage)
            return 0
        case "--fast", "--no-publish": flags.insert(argument)
        case "--urls", "--dir", "--vehicles", "--interval", "--minutes", "--seed", "--stream":
            guard let value = rest.popFirst() else {
                progress("Error: \(argument) needs a value\n\(clusterUsage)")
                return 64
            }
            options[argument] = value
        default:
            progress("Error: unknown argument \(argument)\n\(clusterUsage)")
            return 64
        }
    }
    if command == "cluster-read" {
        guard let urls = options["--urls"], let stream = options["--stream"] else {
            progress("Error: --urls and --stream are required\n\(clusterUsage)")
            return 64
        }
        do {
            let connection = try NATSConnection(urls: urls, name: "geofence-bench-read")
            let started = Date()
            var bytes = 0
            let count = try connection.readStream(stream) { bytes += $0.payload.count }
            let seconds = Date().timeIntervalSince(started)
            print(
                "read \(count) messages (\(bytes) bytes) of \(stream) in \(String(format: "%.2f", seconds)) s: "
                    + "\(Int(Double(count) / max(seconds, 1e-9)))/s")
            return 0
        } catch {
            progress("Error: \(error)")
            return 1
        }
    }
    guard let directory = options["--dir"], let urls = options["--urls"] ?? (flags.contains("--no-publish") ? "" : nil)
    else {
        progress("Error: --urls and --dir are required\n\(clusterUsage)")
        return 64
    }
    func number(_ name: String, _ fallback: Int, _ range: ClosedRange<Int>) -> Int? {
        guard let text = options[name] else { return fallback }
        guard let value = Int(text), range.contains(value) else {
            progress("Error: \(name) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
            return nil
        }
        return value
    }
    do {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let regionsPath = directory + "/regions.json"
        let fixesPath = directory + "/fixes.jsonl"
        if command == "cluster-compare" {
            return try compareCluster(urls: urls, directory: directory, regions: regionsPath, fixes: fixesPath)
        }
        guard let vehicles = number("--vehicles", 10_000, 1...1_000_000),
            let interval = number("--interval", 10, 1...3600), let minutes = number("--minutes", 5, 1...1440),
            let seed = number("--seed", 26, 0...Int.max)
        else { return 64 }
        let start = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        var configuration = ClusterFleet.Configuration(
            vehicles: vehicles, rounds: max(1, minutes * 60 / interval), start: start)
        configuration.interval = .seconds(interval)
        configuration.seed = UInt64(seed)
        let fleet = ClusterFleet(configuration)
        try fleet.regionsJSON.write(toFile: regionsPath, atomically: true, encoding: .utf8)
        let written = try fleet.writeJSONLines(to: fixesPath)
        progress(
            "\(fleet.regions.count) regions in \(regionsPath); \(written) fixes of \(vehicles) vehicles in \(fixesPath), "
                + "\(TimestampParser.format(start)) to \(TimestampParser.format(fleet.end))")
        guard !flags.contains("--no-publish") else { return 0 }
        let publisher = try FleetPublisher(urls: urls)
        try publisher.ensureFixStream()
        let statistics = try publisher.publish(
            fleet.fixes, pacing: flags.contains("--fast") ? .asFastAsPossible : .realTime,
            progress: { progress("published: \($0)") })
        progress("published: \(statistics)")
        print(
            "fixes \(statistics.fixes) seconds \(String(format: "%.2f", statistics.seconds)) "
                + "per-second \(Int(statistics.perSecond)) resent \(statistics.resends)")
        return 0
    } catch {
        progress("Error: \(error)")
        return 1
    }
}

private func compareCluster(urls: String, directory: String, regions: String, fixes: String) throws -> Int32 {
    var started = Date()
    let expected = try ExpectedEvents.replay(fixes: fixes, regions: regions)
    progress("replay: \(expected.count) events in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
    started = Date()
    let connection = try NATSConnection(urls: urls, name: "geofence-bench-compare")
    let read = try ClusterEventsRead(connection: connection)
    progress("stream read in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
    let comparison = EventComparison(expected: expected, actual: read.events)
    progress(
        "stream: \(read.messages) messages on \(read.perSubject.count) subjects, skipped \(read.skipped); "
            + "replay: \(expected.count) events")
    print(comparison.report())
    return comparison.isEqual ? 0 : 1
}
