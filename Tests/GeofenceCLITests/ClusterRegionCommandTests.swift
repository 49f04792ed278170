import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence add`, `remove` and `import` with `--nats`, run as the built binary against a real 3-server
/// JetStream cluster: the same checks, errors and exit codes as on the local store, nothing written on an
/// error, an import re-run under its request id writing only the rest.
@Suite(
    "geofence add, remove, import --nats against a 3-server cluster", .serialized,
    .enabled(if: NATSCluster.isAvailable, "\(NATSCluster.unavailableReason)"))
struct ClusterRegionCommandTests {
    static func withCluster(_ body: (CLI, NATSCluster, ClusterRegionStore) throws -> Void) throws {
        try withCLI { cli in
            let cluster = try NATSCluster(directory: cli.dir.path)
            defer { try? cluster.stop() }
            try body(cli, cluster, try ClusterRegionStore(connection: try NATSConnection(urls: cluster.urls)))
        }
    }

    /// Every key's latest write: what must not change when a command is refused.
    static func snapshot(_ store: ClusterRegionStore) throws -> [String: String] {
        try store.scan(values: false).mapValues { "\($0.revision) \($0.live)" }
    }

    /// The live keys, read from a replica with as many keys as the leader (one just back answers with what
    /// it has applied so far).
    static func live(_ store: ClusterRegionStore) throws -> Set<String> {
        Set(try store.settledScan(values: false).filter(\.value.live).keys)
    }

    /// The regions of `regionsFile(ids)`, decoded as the CLI decodes a file.
    static func regions(_ ids: [String]) throws -> [Region] {
        guard case .success(let regions) = RegionJSON.decodeFile(Array(regionsFile(ids).utf8), now: Date()) else {
            throw GPSDHarness.Failure.startFailed("the regions file of \(ids.prefix(3)) does not decode")
        }
        return regions
    }

    static func regionsFile(_ ids: [String]) -> String {
        let entries = ids.enumerated().map { i, id in
            #"{"id":\#(JSONValue.string(id).serialized()),"lat":\#(Double(i % 80)),"lon":\#(Double(i % 170)),"radius":150}"#
        }
        return #"{"regions":[\#(entries.joined(separator: ","))]}"#
    }

    @Test("refusals say and exit the same as on the local store, and change nothing in the bucket")
    func sameRefusals() throws {
        try Self.withCluster { cli, cluster, store in
            let nats = ["--nats", cluster.urls]
            let depot = ["add", "--id", "depot", "--lat", "51.5007", "--lon", "-0.1246", "--radius", "200"]
            let local = try cli.run(depot)
            let remote = try cli.run(depot + nats)
            #expect(local.status == 0 && remote.status == 0, "\(local.stderr) \(remote.stderr)")
            #expect(remote.stdout == local.stdout, "the same report")
            #expect(remote.stdout.hasPrefix("Added region \"depot\": 51.5007, -0.1246, radius 200 m"))

            let bad = cli.dir.file("bad.json")
            try
                #"{"regions":[{"id":"a","lat":1,"lon":2,"radius":3},{"id":"b","lat":95,"lon":2,"radius":3},{"id":"c","lat":1,"lon":2}]}"#
                .write(toFile: bad, atomically: true, encoding: .utf8)
            let existing = cli.dir.file("existing.json")
            try Self.regionsFile(["fresh", "depot"]).write(toFile: existing, atomically: true, encoding: .utf8)
            let repeated = cli.dir.file("repeated.json")
            try Self.regionsFile(["x1", "x2", "x1"]).write(toFile: repeated, atomically: true, encoding: .utf8)
            let cases: [[String]] = [
                ["add", "--id", "depot", "--lat", "1", "--lon", "2", "--radius", "3"],
                ["add", "--id", "depot", "--lat", "1", "--lon", "2", "--radius", "3", "--json"],
                ["add", "--id", "x", "--lat", "91", "--lon", "0", "--radius", "10"],
                ["add", "--id", "x", "--lat", "0", "--lon", "0", "--radius", "1e9"],
                ["add", "--id", "tab\there", "--lat", "0", "--lon", "0", "--radius", "10"],
                ["add", "--id", "x", "--polygon", "0,0 0,1"],
                ["remove", "depot", "nothere"],
                ["remove", "nothere", "--json"],
                ["import", bad],
                ["import", existing],
                ["import", repeated],
                ["import", existing, "--json"],
            ]
            let before = try Self.snapshot(store)
            #expect(before.count == 1)
            for args in cases {
                let local = try cli.run(args)
                let remote = try cli.run(args + nats)
                #expect(local.status != 0, "\(args)")
                #expect(remote.status == local.status, "\(args): \(remote.stderr)")
                #expect(remote.stderr == local.stderr, "\(args)")
                #expect(remote.stdout == local.stdout, "\(args)")
                #expect(try Self.snapshot(store) == before, "\(args) changed the bucket")
            }
            #expect(try cli.ids() == ["depot"], "nor the store")

            // The cluster's own refusals: a password on the command line (never echoed), a password file
            // without --nats, a cluster that cannot be reached.
            let password = try cli.run(depot + ["--nats", "nats://engine:s3cret@127.0.0.1:4222"])
            #expect(password.status == 64)
            #expect(password.stderr.contains("--nats-password-file") && !password.stderr.contains("s3cret"))
            let orphan = try cli.run(depot + ["--nats-password-file", "/nonexistent"])
            #expect(orphan.status == 64 && orphan.stderr.contains("--nats-password-file is for --nats"))
            let unreadable = try cli.run(depot + nats + ["--nats-password-file", cli.dir.file("none")])
            #expect(unreadable.status == 66 && unreadable.stderr.contains("cannot read the NATS password file"))
            let away = try cli.run([
                "add", "--id", "y", "--lat", "1", "--lon", "1", "--radius", "3", "--nats", "127.0.0.1:1",
            ])
            #expect(
                away.status == 69 && away.stderr.hasPrefix("Error: NATS: connect to nats://127.0.0.1:1"),
                "\(away.stderr)")
            #expect(try Self.snapshot(store) == before)
        }
    }

    @Test("adds, replaces, removes and imports; a command re-run under its request id is made once")
    func changes() throws {
        try Self.withCluster { cli, cluster, store in
            let nats = ["--nats", cluster.urls]
            let added = try cli.run(
                [
                    "add", "--id", "café.1/a", "--lat", "1", "--lon", "2", "--radius", "3", "--json", "--request-id",
                    "R0",
                ]
                    + nats)
            #expect(added.status == 0, "\(added.stderr)")
            let first = try JSON.parse(added.stdout)
            #expect(first["id"]?.stringValue == "café.1/a" && first["radius"]?.doubleValue == 3)
            #expect(try Self.live(store) == ["caf=C3=A9=2E1=2Fa"])
            // The same add again under its request id is answered from its entry, not refused or written again.
            let again = try cli.run(
                [
                    "add", "--id", "café.1/a", "--lat", "1", "--lon", "2", "--radius", "3", "--json", "--request-id",
                    "R0",
                ]
                    + nats)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(try store.scan(values: false)["caf=C3=A9=2E1=2Fa"]?.revision == 1)
            let replaced = try cli.run(
                ["add", "--id", "café.1/a", "--lat", "1", "--lon", "2", "--radius", "30", "--replace"] + nats)
            #expect(replaced.status == 0, "\(replaced.stderr)")
            let value = try #require(try store.scan(values: true)["caf=C3=A9=2E1=2Fa"])
            // (Revision 2 is the barrier the re-run wrote before it answered from the entry.)
            #expect(value.revision == 3)
            #expect(try store.scan(values: false)[ClusterRegionCodec.barrierKey]?.revision == 2)
            #expect(try JSON.parse(value.value)["radius"]?.doubleValue == 30)

            let removed = try cli.run(["remove", "café.1/a", "--json", "--request-id", "R1"] + nats)
            #expect(removed.status == 0, "\(removed.stderr)")
            #expect(try JSON.parse(removed.stdout)["removed"] == .array([.string("café.1/a")]))
            #expect(try Self.live(store).isEmpty)
            let removedAgain = try cli.run(["remove", "café.1/a", "--request-id", "R1"] + nats)
            #expect(removedAgain.status == 0 && removedAgain.stdout == "Removed region \"café.1/a\"\n")
            #expect(try cli.run(["remove", "café.1/a"] + nats).status == 66)

            // An import; the same file again is refused as locally.
            let ids = (0..<2000).map { "j\($0)" }
            let file = cli.dir.file("regions.json")
            try Self.regionsFile(ids).write(toFile: file, atomically: true, encoding: .utf8)
            let imported = try cli.run(["import", file, "--json"] + nats)
            let local = try cli.run(["import", file, "--json"])
            #expect(imported.status == 0 && local.status == 0, "\(imported.stderr)")
            #expect(imported.stdout == local.stdout && imported.stdout.contains(#""imported":2000"#))
            #expect(try Self.live(store) == Set(ids))
            let twiceLocal = try cli.run(["import", file])
            let twice = try cli.run(["import", file] + nats)
            #expect(twice.status == 65 && twice.stderr == twiceLocal.stderr)

            // An import that broke off after 700 of 2000 regions (written as the CLI writes them, under its
            // request id): the same command under that id writes only the other 1300.
            let more = (0..<2000).map { "k\($0)" }
            let moreFile = cli.dir.file("more.json")
            try Self.regionsFile(more).write(toFile: moreFile, atomically: true, encoding: .utf8)
            let regions = try Self.regions(more)
            try store.importAll(Array(regions.prefix(700)), replace: false, requestID: "R2")
            let before = try store.scan(values: false)
            let rerun = try cli.run(["import", moreFile, "--request-id", "R2"] + nats)
            #expect(rerun.status == 0, "\(rerun.stderr)")
            let after = try store.scan(values: false)
            #expect(Set(after.filter(\.value.live).keys) == Set(ids + more))
            for id in more.prefix(700) { #expect(after[id]?.revision == before[id]?.revision, "\(id) written again") }
            // Under another request id the 700 are what they are: regions that exist.
            let other = try cli.run(["import", moreFile] + nats)
            #expect(other.status == 65 && other.stderr.hasPrefix("Error: 2000 regions already exist"))
        }
    }

    @Test("an import reads the bucket back and writes again what the stream dropped, not what others changed")
    func importReadBack() throws {
        try Self.withCluster { _, _, store in
            // The run that broke off wrote 300 of the 1000 under R3. The re-run reads them as written; then
            // (as nats-server 2.9 did in CI when the stream's leader changed after a loss of quorum) five of
            // them are gone before its writes. Meanwhile another client removes one of the 300, under its own
            // request id: that remove is a change made after the import began, and the read-back keeps it.
            let ids = (0..<1000).map { "r\($0)" }
            let regions = try Self.regions(ids)
            try store.importAll(Array(regions.prefix(300)), replace: false, requestID: "R3")
            let dropped = ["r3", "r50", "r51", "r150", "r299"]
            let outcome = try store.importAll(regions, replace: false, requestID: "R3") {
                _ in
            } afterScan: {
                for id in dropped {
                    try store.connection.purge(
                        stream: ClusterRegionCodec.stream,
                        subject: ClusterRegionCodec.subjectPrefix + ClusterRegionCodec.key(for: id), keep: 0)
                }
                #expect(try store.remove(ids: ["r7"], requestID: "other") == ["r7"])
            }
            #expect(outcome.written == 700 && outcome.alreadyWritten == 300)
            #expect(outcome.rewritten == 5)
            let after = try store.scan(values: false)
            let live = Set(after.filter(\.value.live).keys)
            #expect(live == Set(ids).subtracting(["r7"]), "missing: \(Set(ids).subtracting(live).sorted())")
            for id in dropped { #expect(after[id]?.request == "R3") }
            // Run again, the import writes only the region removed since (the file has it), and reads back
            // everything where it should be.
            let again = try store.importAll(regions, replace: false, requestID: "R3")
            #expect(again.written == 1 && again.alreadyWritten == 999 && again.rewritten == 0)
            #expect(Set(try store.scan(values: false).filter(\.value.live).keys) == Set(ids))

            // Nothing left to write: a barrier is (an acknowledged write for the read-back to wait for), and
            // what was dropped meanwhile is written again; nothing else.
            let before = try store.scan(values: false)
            let complete = try store.importAll(regions, replace: false, requestID: "R3") {
                _ in
            } afterScan: {
                for id in ["r10", "r900"] {
                    try store.connection.purge(
                        stream: ClusterRegionCodec.stream,
                        subject: ClusterRegionCodec.subjectPrefix + ClusterRegionCodec.key(for: id), keep: 0)
                }
            }
            #expect(complete.written == 0 && complete.alreadyWritten == 1000 && complete.rewritten == 2)
            let now = try store.scan(values: false)
            #expect(Set(now.filter(\.value.live).keys) == Set(ids))
            let unchanged = ids.filter { now[$0]?.revision == before[$0]?.revision }
            #expect(Set(ids).subtracting(unchanged) == ["r10", "r900"])
            #expect(now[ClusterRegionCodec.barrierKey]?.live == false)

            // An id twice under replace (the API's; a file refuses it): only its last region is written, once.
            let twice = try Self.regions(["d"]) + Self.regions(["x", "d"]).suffix(1)
            let replaced = try store.importAll(twice, replace: true, requestID: "R4")
            #expect(replaced.written == 1)
            let stored = try #require(try store.scan(values: true)["d"])
            #expect(try JSON.parse(stored.value)["lat"]?.doubleValue == 1)
        }
    }

    @Test("an add or remove re-run under its request id is answered from its entry only if it is still there")
    func rerunAfterDrop() throws {
        try Self.withCluster { _, _, store in
            func region(_ id: String) throws -> Region { try Self.regions([id])[0] }
            func drop(_ id: String) throws {
                try store.connection.purge(
                    stream: ClusterRegionCodec.stream,
                    subject: ClusterRegionCodec.subjectPrefix + ClusterRegionCodec.key(for: id), keep: 0)
            }
            // The add's entry is read, then dropped (as nats-server 2.9.10 dropped entries of a broken import):
            // the re-run writes it again rather than answer from an entry no longer there.
            let first = try store.add(try region("p1"), replace: false, requestID: "R6")
            let again = try store.add(try region("p1"), replace: false, requestID: "R6") { try drop("p1") }
            let entry = try #require(try store.scan(values: false)["p1"])
            #expect(entry.live && entry.request == "R6" && again.seq == Int64(entry.revision))
            #expect(again.seq > first.seq)
            // Still there: answered from it, nothing written.
            let third = try store.add(try region("p1"), replace: false, requestID: "R6")
            #expect(third.seq == again.seq)
            #expect(try store.scan(values: false)["p1"]?.revision == entry.revision)

            // The remove's marker is read, then dropped and the region is there again: the re-run removes it.
            _ = try store.add(try region("p2"), replace: false, requestID: nil)
            #expect(try store.remove(ids: ["p2"], requestID: "R7") == ["p2"])
            let removed = try store.remove(ids: ["p2"], requestID: "R7") {
                try drop("p2")
                _ = try store.add(try region("p2"), replace: false, requestID: nil)
            }
            #expect(removed == ["p2"])
            #expect(try store.scan(values: false)["p2"]?.live == false)
            // The marker is dropped and nothing is left under the key (the region it replaced was gone with
            // it): removed all the same, as the first run said, not "no region".
            _ = try store.add(try region("p3"), replace: false, requestID: nil)
            #expect(try store.remove(ids: ["p3"], requestID: "R8") == ["p3"])
            #expect(try store.remove(ids: ["p3"], requestID: "R8") { try drop("p3") } == ["p3"])
            #expect(try store.scan(values: false)["p3"] == nil)
        }
    }

    @Test("an import cut off by the loss of the cluster's quorum says so, and its re-run writes the rest")
    func brokenImport() throws {
        try Self.withCluster { cli, cluster, store in
            let ids = (0..<100_000).map { "b\($0)" }
            let file = cli.dir.file("big.json")
            try Self.regionsFile(ids).write(toFile: file, atomically: true, encoding: .utf8)
            let arguments = ["import", file, "--nats", cluster.urls]
            let outcome = Mutex<GeofenceBinary.Result?>(nil)
            let finished = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                let result = try? cli.run(arguments)
                outcome.withLock { $0 = result }
                finished.signal()
            }
            // Two of the three servers go away once the writes have begun: the bucket has no quorum. The import
            // is held (SIGSTOP) from its first writes until they are gone, or a fast import would be done first.
            let began = ContinuousClock.now
            func stored() -> UInt64 {
                (try? store.connection.streamInfo(name: ClusterRegionCodec.stream))??.messages ?? 0
            }
            var importer: pid_t?
            while ContinuousClock.now - began < .seconds(30) {
                if importer == nil { importer = Self.process(withArgument: file) }
                if let importer, stored() >= 100 {
                    kill(importer, SIGSTOP)
                    break
                }
                Thread.sleep(forTimeInterval: 0.005)
            }
            let held = try #require(importer, "the import's process was not found")
            try cluster.kill(server: 2)
            try cluster.kill(server: 3)
            kill(held, SIGCONT)
            #expect(finished.wait(timeout: .now() + 60) == .success)
            let broken = try #require(outcome.withLock { $0 })
            #expect(broken.status == 69, "\(broken.stderr)")
            #expect(broken.stderr.contains("the import broke off after"), "\(broken.stderr)")
            let stderr = broken.stderr
            let match = stderr.firstMatch(of: #/request id \((req-[0-9a-z]+)\)/#)
            let requestID = try #require(match.map { String($0.1) }, "\(stderr)")
            try cluster.restart(server: 2)
            try cluster.restart(server: 3)
            // The bucket's stream elects a leader again some seconds after its servers are back.
            let back = ContinuousClock.now
            while (try? store.connection.streamInfo(name: ClusterRegionCodec.stream))??.leader.isEmpty ?? true,
                ContinuousClock.now - back < .seconds(30)
            {
                Thread.sleep(forTimeInterval: 0.1)
            }
            let partial = try Self.live(store).count
            #expect(partial < ids.count, "some regions were not written")
            let rerun = try cli.run(arguments + ["--request-id", requestID])
            #expect(rerun.status == 0, "\(rerun.stderr)")
            let written = try Self.live(store)
            if written != Set(ids) {
                // Read again after a pause, to tell a read that came too early from a write that was lost, and
                // ask each server for its own copy of the stream.
                Thread.sleep(forTimeInterval: 5)
                let again = try Self.live(store)
                let info = try? store.connection.streamInfo(name: ClusterRegionCodec.stream)
                let missing = Set(ids).subtracting(written).compactMap { Int($0.dropFirst()) }.sorted()
                let replicas = (1...3).map { cluster.streamState(server: $0, stream: ClusterRegionCodec.stream) }
                let counts = Set(replicas.map { $0?.split(separator: " ").first.map(String.init) ?? "?" })
                let logs = (1...3).map { n in
                    "n\(n): "
                        + cluster.log(server: n).split(separator: "\n")
                        .filter {
                            ($0.contains("[WRN]") || $0.contains("[ERR]") || $0.contains("leader"))
                                && !$0.contains("connect to route")
                        }
                        .suffix(25).joined(separator: "\n    ")
                }
                let report =
                    "after the re-run \(written.count) of \(ids.count) live (missing \(missing.count), b\(missing.first ?? -1)...b\(missing.last ?? -1), none extra: \(written.isSubset(of: Set(ids)))); 5 s later \(again.count); the stream: \(String(describing: info)); each server's copy: \(replicas.map { $0 ?? "none" }); the re-run said: \(rerun.stdout.suffix(300)) \(rerun.stderr.suffix(600))\n\(logs.joined(separator: "\n"))"
                // The stream's leader (which alone answers a message get) holds every missing one: the test's
                // own read was served by a replica that differs from it, as nats-server 2.9.10's replicas can
                // after a loss of quorum (Docs/cluster.md, "Import, read back"). Upstream, and nothing lost.
                // A region the leader does not hold is lost: that fails, whatever the replicas say.
                let checked = missing.prefix(2000)
                let onLeader = checked.filter { index in
                    let subject = ClusterRegionCodec.subjectPrefix + ClusterRegionCodec.key(for: "b\(index)")
                    let last = try? store.connection.lastMessage(stream: ClusterRegionCodec.stream, subject: subject)
                    return last.map { $0.headers["KV-Operation"] == nil } ?? false
                }
                if onLeader.count == checked.count, counts.count > 1 {
                    withKnownIssue("nats-server 2.9.10: a replica differs from the leader", isIntermittent: true) {
                        Issue.record(Comment(rawValue: report))
                    }
                } else {
                    Issue.record(
                        Comment(
                            rawValue: "\(checked.count - onLeader.count) of \(checked.count) not on the leader; "
                                + report))
                }
            }
            // nats-server 2.9.10 sometimes shows the re-run entries of the broken run that its stream then drops
            // (in 7 of 122 runs here): the re-run's read-back finds them gone and writes them again.
            let readBack =
                rerun.stderr.firstMatch(of: #/(\d+) regions were not there/#).map {
                    " (\($0.1) written again after the read-back)"
                } ?? ""
            print(
                "NATS import of \(ids.count) regions cut off with \(partial) stored; the re-run wrote the rest\(readBack)"
            )
        }
    }

    /// The process whose command line has `argument` (the test's own file: unique to it), from /proc.
    static func process(withArgument argument: String) -> pid_t? {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let pid = pid_t(entry), pid != getpid(),
                let line = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline")
            else { continue }
            if line.split(separator: 0).contains(where: { String(decoding: $0, as: UTF8.self) == argument }) {
                return pid
            }
        }
        return nil
    }
}
