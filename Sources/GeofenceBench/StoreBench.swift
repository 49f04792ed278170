import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

/// `import` of `n` regions through `store.regions.addAll`, then the daemon's start with them: opening
/// the store and `FixPipeline.load()`, once right after the import (every region still waiting for an
/// engine) and once more as a plain restart.
func runStore(n: Int, importing: Bool, starting: Bool, report: Report) throws {
    let name = sizeName(n)
    let directory = TemporaryDirectory("store")
    defer { directory.remove() }
    let regions = Country.regions(n, seed: 1)

    progress("import, \(name) regions")
    let store = try StateStore(directory: directory.path)
    let importTime = try seconds { try store.regions.addAll(regions) }
    try store.queue.close()
    if importing {
        report.add(
            "store, \(name) regions", "import (regions.addAll)", "\(grouped(importTime, decimals: 2)) s",
            "\(grouped(Double(n) / importTime)) regions/s")
        let bytes =
            (try? FileManager.default.attributesOfItem(atPath: directory.path + "/" + StateStore.fileName)[.size])
            as? Int ?? 0
        report.add(
            "store, \(name) regions", "database size", "\(grouped(Double(bytes) / Double(n), decimals: 1)) B/region")
    }
    guard starting else { return }

    for label in ["first start after the import", "restart"] {
        progress("daemon start, \(name) regions, \(label)")
        var loaded = 0
        let time = try seconds {
            let store = try StateStore(directory: directory.path)
            let pipeline = FixPipeline(store: store)
            try pipeline.load()
            loaded = pipeline.monitor.regionCount
        }
        report.add(
            "store, \(name) regions", "daemon start (open + FixPipeline.load), \(label)",
            "\(grouped(time, decimals: 2)) s", "\(grouped(Double(loaded))) regions monitored")
    }
}

/// What a user times: the `geofence` binary itself (found next to this executable, or `GEOFENCE_BIN`).
/// `geofence import FILE` of `n` regions with no engine running (straight into the store) and through a
/// running engine (over its control socket), as whole commands; and `geofence run`, from its exec to its
/// "running" log line, first after the import and as a restart.
func runCommands(n: Int, report: Report) throws {
    let name = sizeName(n)
    let section = "commands, \(name) regions"
    guard let binary = geofenceBinary() else {
        report.add(section, "geofence import and run", "skipped", "no geofence binary next to the benchmark")
        return
    }
    let directory = TemporaryDirectory("commands")
    defer { directory.remove() }
    progress("commands: writing a regions file of \(name) regions")
    let file = directory.path + "/regions.json"
    try writeRegionsFile(Country.regions(n, seed: 1), to: file)
    let megabytes = Double((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0) / 1e6

    progress("commands: geofence import, no engine")
    let alone = directory.path + "/alone"
    let nowhere = directory.path + "/none.sock"
    let importAlone = try seconds {
        try runToEnd(binary, ["import", file, "--state-dir", alone, "--socket", nowhere])
    }
    report.add(
        section, "`geofence import FILE`, no engine running (whole command)", "\(grouped(importAlone, decimals: 2)) s",
        "\(grouped(megabytes, decimals: 0)) MB file: read, checked, stored")
    for label in ["first start after the import", "restart"] {
        progress("commands: geofence run, \(label)")
        let engine = try Engine(
            binary, stateDirectory: alone, socket: directory.path + "/alone.sock", log: directory.path + "/run.log")
        let ready = try engine.waitFor("running:", timeout: 60)
        engine.stop()
        report.add(
            section, "`geofence run`, exec to running, \(label)", "\(grouped(ready, decimals: 2)) s",
            "store opened, regions loaded, reconciled")
    }

    progress("commands: geofence import through a running engine")
    let socket = directory.path + "/engine.sock"
    let engine = try Engine(
        binary, stateDirectory: directory.path + "/engine", socket: socket, log: directory.path + "/engine.log")
    _ = try engine.waitFor("running:", timeout: 60)
    let importEngine = try seconds { try runToEnd(binary, ["import", file, "--socket", socket]) }
    let imported = engine.now()
    let monitored = try engine.waitFor("regions changed", timeout: 120) - imported
    engine.stop()
    report.add(
        section, "`geofence import FILE` through a running engine (whole command)",
        "\(grouped(importEngine, decimals: 2)) s", "sent in parts over the control socket, stored by the engine")
    report.add(
        section, "… then monitored by that engine", "\(grouped(max(0, monitored), decimals: 2)) s later",
        "the engine follows the import as one change")
}

private func geofenceBinary() -> String? {
    if let path = ProcessInfo.processInfo.environment["GEOFENCE_BIN"] { return path }
    let next = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("geofence").path
    return FileManager.default.isExecutableFile(atPath: next) ? next : nil
}

private func writeRegionsFile(_ regions: [Region], to path: String) throws {
    var text = "{\"regions\": [\n"
    text.reserveCapacity(regions.count * 80)
    for (i, region) in regions.enumerated() {
        text += JSONValue.object(RegionJSON.encode(region)).serialized()
        text += i == regions.count - 1 ? "\n" : ",\n"
    }
    text += "]}\n"
    try text.write(toFile: path, atomically: false, encoding: .utf8)
}

private struct CommandFailed: Error, CustomStringConvertible {
    var description: String
}

private func runToEnd(_ binary: String, _ arguments: [String]) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: binary)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    let errors = Pipe()
    process.standardError = errors
    try process.run()
    let message = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw CommandFailed(
            description:
                "geofence \(arguments.joined(separator: " ")) failed: \(String(decoding: message, as: UTF8.self))")
    }
}

/// A `geofence run` on a source that is never there (its regions are loaded all the same), timed from its
/// exec by what it logs.
private final class Engine {
    let process = Process()
    let log: String
    let started: UInt64

    init(_ binary: String, stateDirectory: String, socket: String, log: String) throws {
        self.log = log
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["run", "--gpsd", "127.0.0.1:9", "--state-dir", stateDirectory, "--socket", socket]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle(forWritingAtPath: log)
        started = nanoseconds()
        try process.run()
    }

    /// Seconds since the exec.
    func now() -> Double { Double(nanoseconds() - started) / 1e9 }

    /// Seconds from the exec until the log holds `text` (polled every 5 ms).
    func waitFor(_ text: String, timeout: Double) throws -> Double {
        while true {
            let now = now()
            if let content = try? String(contentsOfFile: log, encoding: .utf8), content.contains(text) { return now }
            guard process.isRunning, now < timeout else {
                let content = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                throw CommandFailed(description: "geofence run never logged \"\(text)\":\n\(content)")
            }
            usleep(5000)
        }
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}
