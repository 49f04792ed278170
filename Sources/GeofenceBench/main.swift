import Foundation
import GeofenceCore

// `swift run -c release geofence-bench [--quick] [--only NAME[,NAME…]]`: every comparison is measured in
// the same run; the table (Markdown) goes to standard output, progress to standard error.

let sections = [
    "fix", "polygons", "memory", "vehicles", "geodesic", "import", "start", "commands", "replay", "outbox", "metrics",
    "hook-latency", "webhooks",
]
// Run only when asked for: `--only layouts`, the measurements behind Docs/spatial-index.md; `--only checkpoint`,
// a partition's hand-over state (issue 26). `cluster-regions` needs a NATS cluster: GEOFENCE_BENCH_NATS=URLS
// (Scripts/nats-cluster.sh up DIR).
let extraSections = ["layouts", "checkpoint", "cluster-regions"]
var quick = false
var only = Set(sections)
// `--reference DIR`: the C reference programs of DIR beside geofence's index (ReferenceBench.swift, issue 29).
var referenceDirectory: String?
var referenceRegions: Int?
var referenceQueries: Int?
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "cluster-fleet", "cluster-compare", "cluster-read":
        // Issue 26's fleet into a NATS cluster, and the events stream against a replay (ClusterFleetBench.swift).
        exit(runClusterCommand(argument, Array(arguments)))
    case "--monitor-child":
        // The fix evaluation of `hugePageFixEvaluation`, in a process of its own (see there); also a way to
        // profile it alone: `perf record geofence-bench --monitor-child 1000000 driving` (`driving-motion`: the
        // drive's fixes with speed and course, as receivers report them).
        let n = arguments.popFirst().flatMap(Int.init) ?? 1_000_000
        let kind = arguments.first
        runMonitorChild(
            n: n, driving: kind == "driving" || kind == "driving-motion", withMotion: kind == "driving-motion")
        exit(0)
    case "--reference-child":
        // geofence's side of `--reference`, in a process of its own pinned like the C programs.
        let n = arguments.popFirst().flatMap(Int.init) ?? 1_000_000
        let queries = arguments.popFirst().flatMap(Int.init) ?? 200_000
        let prefix = arguments.popFirst().flatMap { Int($0.replacingOccurrences(of: "prefix=", with: "")) } ?? 0
        guard n > 0, queries > 0, n < 1 << 30 else {
            progress("Error: --reference-child N NQ needs 0 < N < 2^30 and NQ > 0")
            exit(64)
        }
        runReferenceChild(n: n, queries: queries, prefix: prefix)
        exit(0)
    case "--reference":
        guard let directory = arguments.popFirst() else {
            progress("Error: --reference needs the folder of the C reference programs (../shared/perf-reference)")
            exit(64)
        }
        referenceDirectory = directory
    case "--reference-n", "--reference-queries":
        guard let value = arguments.popFirst().flatMap(Int.init), value > 0, value < 1 << 30 else {
            progress("Error: \(argument) needs a count from 1 to 2^30")
            exit(64)
        }
        if argument == "--reference-n" { referenceRegions = value } else { referenceQueries = value }
    case "--quick":
        quick = true
    case "--only":
        guard let names = arguments.popFirst() else {
            progress("Error: --only needs a section name (\(sections.joined(separator: ", ")))")
            exit(64)
        }
        only = Set(names.split(separator: ",").map(String.init))
        if let unknown = only.subtracting(sections + extraSections + ["reference"]).first {
            progress(
                "Error: no section \"\(unknown)\" (there are \((sections + extraSections).joined(separator: ", ")), "
                    + "and reference with --reference DIR)")
            exit(64)
        }
    case "--help", "-h":
        print(
            """
            USAGE: geofence-bench [--quick] [--only NAME[,NAME...]] [--reference DIR [--reference-n N]
                                  [--reference-queries NQ]]
                   geofence-bench cluster-fleet | cluster-compare | cluster-read ... (cluster-fleet --help)

            Sections: \(sections.joined(separator: ", ")); and, only with --only, \(extraSections.joined(separator: ", ")).
              --quick   smaller sizes, for a smoke run (the full run takes a few minutes)
              --only    run only these sections
              --reference DIR
                        also run the C reference programs of DIR (../shared/perf-reference) and the same
                        scenario through geofence's index, pinned alike, and compare (section "reference";
                        `--only reference` runs it alone); N regions (default 1000000, 100000 with
                        --quick) and NQ queries (default 200000, 20000 with --quick)
            """)
        exit(0)
    default:
        progress("Error: unknown argument \(argument) (see --help)")
        exit(64)
    }
}

if only.contains("reference") && referenceDirectory == nil {
    progress("Error: the section reference needs --reference DIR (the C reference programs' folder)")
    exit(64)
}

let report = Report()
var failed = false
let started = nanoseconds()
report.add("machine", "load average at the start (1, 5, 15 min)", loadAverage(), "other processes share the 2 cores")
do {
    // Memory first, while the process has freed nothing it could reuse.
    if only.contains("memory") { runMemory(n: quick ? 100_000 : 1_000_000, report: report) }
    if only.contains("vehicles") { try runVehicleMemory(n: quick ? 20_000 : 200_000, report: report) }
    if only.contains("fix") {
        try runFixEvaluation(sizes: quick ? [1000, 10_000, 100_000] : [1000, 100_000, 1_000_000], report: report)
    }
    if let directory = referenceDirectory {
        do {
            try runReference(
                directory: directory, regions: referenceRegions ?? (quick ? 100_000 : 1_000_000),
                queries: referenceQueries ?? (quick ? 20_000 : 200_000), report: report)
        } catch {
            // The other sections still run; the bench exits non-zero at the end.
            progress("Error: \(error)")
            report.add("beside the C reference", "FAILED", "-", "\(error)")
            failed = true
        }
    }
    if only.contains("polygons") { runPolygons(n: quick ? 10_000 : 100_000, report: report) }
    if only.contains("geodesic") { runGeodesic(report: report, quick: quick) }
    if only.contains("import") || only.contains("start") {
        try runStore(
            n: quick ? 100_000 : 1_000_000, importing: only.contains("import"), starting: only.contains("start"),
            report: report)
    }
    if only.contains("outbox") {
        try runOutbox(n: quick ? 20_000 : 200_000, regions: quick ? 100_000 : 1_000_000, report: report)
    }
    if only.contains("commands") { try runCommands(n: quick ? 100_000 : 1_000_000, report: report) }
    if only.contains("layouts") { runLayouts(report: report) }
    if only.contains("cluster-regions") { try runClusterRegions(n: quick ? 100_000 : 1_000_000, report: report) }
    if only.contains("checkpoint") { runCheckpoint(n: quick ? 10_000 : 100_000, report: report) }
    if only.contains("replay") {
        try runReplay(
            lines: quick ? 100_000 : 1_000_000, subjects: quick ? 1000 : 10_000, regions: quick ? 10_000 : 100_000,
            report: report)
    }
    if only.contains("metrics") {
        try runMetricsCost(
            lines: quick ? 50_000 : 300_000, subjects: quick ? 500 : 3000, regions: quick ? 10_000 : 100_000,
            rounds: quick ? 3 : 5, report: report)
    }
    // Commit to hook start, engine otherwise idle (HookLatencyBench.swift, issue 29).
    if only.contains("hook-latency") { try runHookLatency(events: quick ? 2000 : 10_000, rate: 50, report: report) }
    // The HTTP sink against a curl hook per event, same receiver (WebhookBench.swift, issue 28).
    if only.contains("webhooks"), try !runWebhooks(events: quick ? 500 : 2000, report: report) { failed = true }
} catch {
    progress("Error: \(error)")
    exit(1)
}
report.add("machine", "load average at the end (1, 5, 15 min)", loadAverage())
progress("done in \(grouped(Double(nanoseconds() - started) / 1e9, decimals: 1)) s")
print(report.markdown(), terminator: "")
if failed { exit(1) }
