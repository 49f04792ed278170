import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence import`: regions from a regions file or GeoJSON, all or nothing.
struct ImportCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "import",
        abstract: "Add regions from a regions file (JSON), a GeoJSON FeatureCollection or an OwnTracks .otrw.",
        discussion: """
            The file holds {"regions": [ ... ]} (see Docs/regions-format.md and regions.example.json), or \
            is a GeoJSON FeatureCollection of Polygon and MultiPolygon features whose properties carry \
            id, name, notify, dwell, expires and hooks (what export --format geojson writes), or an \
            OwnTracks waypoints file (.otrw, a phone's regions: each waypoint the region owntracks/TST). \
            Import is all or nothing: every entry is checked first, each problem is reported with its \
            position and field, and nothing is stored unless every entry is good. Ids already in the \
            store are an error unless --replace is given. \
            With --nats, into a cluster's bucket instead (Docs/cluster.md): checked the same way, and \
            nothing is written unless every entry is good. If the connection breaks while the regions are \
            being written, part of them are stored: the same command again under the same --request-id \
            (the error says it) writes only the rest. Once written, the regions are read back and any \
            the cluster dropped are written again (standard error says how many).
            """,
        options: [
            .flag("--replace", help: "Replace regions whose ids already exist."),
            .flag("--dry-run", help: "Check the file and report, store nothing."),
            CommandTree.requestID,
        ] + ClusterTarget.options,
        arguments: [.required("file", help: "The regions file, or - for standard input.")],
        examples: [
            Example("The example file:", "geofence import regions.example.json"),
            Example("Check a file only:", "geofence import --dry-run regions.json"),
            Example("Districts drawn in a GIS:", "geofence import districts.geojson"),
            Example("The regions of an OwnTracks phone (its exported waypoints):", "geofence import phone.otrw"),
        ])

    let file: String
    let dryRun: Bool
    let replace: Bool
    /// `--request-id` as given: checked only when the regions go to an engine, as before.
    let requestIDText: String?
    /// `--nats`: the cluster's bucket instead of the local store.
    let cluster: ClusterTarget?

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        file = try a.required("file")
        dryRun = a.flag("--dry-run")
        replace = a.flag("--replace")
        requestIDText = a.value("--request-id")
        cluster = try ClusterTarget(parsing: a, context: c)
    }

    func run(_ c: CommandContext) throws {
        let file = self.file
        let bytes = try RegionCommands.readInput(file)
        let name = file == "-" ? "standard input" : file
        if c.console.stderrIsTerminal && bytes.count > 1 << 20 {
            c.console.writeError("checking \(name) (\(bytes.count >> 20) MiB)...\n")
        }
        // Checked here first (one clear report of every bad entry, before anything is sent), and again by
        // whoever stores them.
        let regions: [Region]
        switch RegionJSON.decodeFile(bytes, now: c.now, createdBy: getuid()) {
        case .success(let decoded): regions = decoded
        case .failure(let error):
            if error.problems.count == 1 {
                throw DataError("nothing imported from \(name): \(error.problems[0])")
            }
            throw DataError(
                "nothing imported from \(name): \(error.problems.count) problems\n"
                    + error.problems.prefix(50).map { "  \($0)" }.joined(separator: "\n")
                    + (error.problems.count > 50 ? "\n  ... and \(error.problems.count - 50) more" : ""))
        }
        let expired = regions.filter { $0.expires.map { $0 <= c.now } ?? false }.map(\.id)

        let started = Date()
        if dryRun {
            report(c, "\(regions.count) regions checked, all good; nothing stored (--dry-run)", count: regions.count)
            if !expired.isEmpty { c.console.message(RegionCommands.pastExpiryWarning(expired)) }
            return
        }
        if let cluster {
            try importToCluster(cluster, regions, c)
        } else if let path = try c.engineSocket() {
            // Through the engine, in parts under the 1 MiB request limit: the engine checks and stores each
            // part while the next is made, and commits them all with the last.
            let progress = ProgressBar(console: c.console, total: regions.count, label: "sending")
            let total = regions.count
            let requestID = try RegionCommands.requestID(requestIDText, c)
            let parts = ImportParts(
                file: bytes, regions: regions, replace: replace, requestID: requestID, limit: 768 * 1024
            ) { sent in
                progress.update(sent)
                guard sent == total, c.console.stderrIsTerminal else { return }
                progress.finish()
                c.console.writeError("the engine is storing them...\n")
            }
            let responses: [ControlResponse] = try c.interruptible(requestID: requestID, check: "geofence list") {
                do throws(ControlError) {
                    return try ControlClient(path: path).call(lines: parts)
                } catch let error where error.message == ControlClient.closedEarly {
                    // An import is committed only with its last part, which the engine never had.
                    throw CommandFailure(
                        "the engine closed the connection during the import, before its last part: nothing was "
                            + "imported. Run it again; under the same request id (\(requestID)) it is made once "
                            + "whatever happened: \(c.retryCommand(requestID: requestID))", exitCode: .unavailable)
                } catch {
                    throw CommandFailure(
                        error.message, exitCode: ExitCode(rawValue: error.exitStatus) ?? .unavailable)
                }
            }
            // The last answer is the import's (the earlier ones only say a part was staged).
            if let failed = responses.last(where: { if case .failure = $0.result { true } else { false } }),
                case .failure(let error) = failed.result
            {
                throw CommandFailure(error.message, exitCode: ExitCode(rawValue: error.exitStatus) ?? .failure)
            }
        } else {
            // No engine: straight into the store, in one transaction, with a progress bar.
            let progress = ProgressBar(console: c.console, total: regions.count, label: "importing")
            try c.openStore().regions.addAll(regions, replace: replace, now: c.now) { progress.update($0) }
            progress.finish()
        }
        let seconds = Date().timeIntervalSince(started)
        report(c, "Imported \(regions.count) regions in \(String(format: "%.1f", seconds)) s", count: regions.count)
        if !expired.isEmpty { c.console.message(RegionCommands.pastExpiryWarning(expired)) }
    }

    /// `import --nats`: checked against the bucket as the store checks an import, then written pipelined.
    /// A break while writing leaves part of the regions stored; the error names the request id under which
    /// the same command writes only the rest. What the read-back wrote again is said on standard error.
    private func importToCluster(_ cluster: ClusterTarget, _ regions: [Region], _ c: CommandContext) throws {
        let requestID = try RegionCommands.requestID(requestIDText, c)
        let store = try cluster.connect()
        let progress = ProgressBar(console: c.console, total: regions.count, label: "writing")
        var outcome: ClusterRegionStore.ImportOutcome?
        do {
            try ClusterTarget.perform {
                outcome = try store.importAll(regions, replace: replace, requestID: requestID) { progress.update($0) }
            }
        } catch let interrupted as ClusterRegionStore.ImportInterrupted where interrupted.checking {
            throw CommandFailure(
                "every region was written, but reading them back did not finish (\(interrupted.error)): some may "
                    + "be missing. Run it again under the same request id (\(requestID)), which writes only what "
                    + "is missing: " + c.retryCommand(requestID: requestID), exitCode: .unavailable)
        } catch let interrupted as ClusterRegionStore.ImportInterrupted {
            throw CommandFailure(
                "the import broke off after \(interrupted.written) of \(interrupted.total) regions were acknowledged "
                    + "(\(interrupted.error)): the cluster holds part of the file. Run it again under the same "
                    + "request id (\(requestID)), which writes only the rest: "
                    + c.retryCommand(requestID: requestID), exitCode: .unavailable)
        }
        progress.finish()
        guard let outcome else { return }
        if outcome.alreadyWritten > 0 {
            c.console.message(
                "\(outcome.alreadyWritten) regions were already written under request id \(requestID) by an "
                    + "earlier run of this import; \(outcome.written) written now")
        }
        if outcome.rewritten > 0 {
            c.console.message(
                "warning: reading the bucket back after the writes, \(outcome.rewritten) regions were not there "
                    + "(the cluster dropped entries it had shown or acknowledged); they were written again and "
                    + "read back")
        }
    }

    private func report(_ c: CommandContext, _ text: String, count: Int) {
        if c.json {
            c.console.print(
                JSONValue.object([
                    "imported": .number(Double(dryRun ? 0 : count)),
                    "checked": .number(Double(count)),
                ]).serialized())
        } else {
            c.console.print(text)
        }
    }
}
