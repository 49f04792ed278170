import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Vehicles shuttling through regions, as gpsd TPV lines: subject k drives back and forth through region k,
/// 400 m either side of its centre, `passes` times (each pass after the first makes one enter and one exit).
enum HookTrack {
    static func lines(centres: [Coordinate], passes: Int, start: Date = Date(timeIntervalSince1970: 1_795_000_000))
        -> String
    {
        var out: [String] = []
        for pass in 0..<passes {
            for step in 0...40 {
                let north = pass % 2 == 0 ? 400 - 20 * Double(step) : -400 + 20 * Double(step)
                let time = TimestampParser.format(start.addingTimeInterval(Double(pass * 41 + step)))
                for (k, centre) in centres.enumerated() {
                    let p = offset(centre, north: north, east: 0)
                    out.append(
                        #"{"class":"TPV","device":"/dev/vehicle\#(k)","mode":3,"time":"\#(time)","lat":\#(p.latitude),"lon":\#(p.longitude),"eph":4.5,"speed":20.0}"#
                    )
                }
            }
        }
        return out.joined(separator: "\n") + "\n"
    }

    /// Region centres 5 km apart.
    static func centres(_ count: Int) -> [Coordinate] {
        (0..<count).map { offset(Coordinate(latitude: 48.2, longitude: 16.37), north: 0, east: 5000 * Double($0)) }
    }
}

extension CLI {
    /// `run` on a thread of its own: waiting for the binary must not hold one of Swift concurrency's few
    /// threads, which other tests (and the hook runner's own tasks) need.
    func exec(_ args: String..., stdin: String? = nil) async throws -> GeofenceBinary.Result {
        try await offThread { try run(args, stdin: stdin) }
    }

    /// `geofence events --json` as parsed JSON (every event).
    func events(_ extra: String...) async throws -> [JSONValue] {
        let args = ["events", "--json", "--limit", "100000"] + extra
        let result = try await offThread { try run(args) }
        #expect(result.status == 0, "\(result.stderr)")
        return try JSON.parse(result.stdout).arrayValue ?? []
    }

    /// One region per centre, ids `prefix0`, `prefix1`, …; each `add` must succeed.
    func addRegions(_ centres: [Coordinate], prefix: String = "r", radius: Double = 100) async throws {
        for (i, c) in centres.enumerated() {
            let added = try await exec(
                "add", "--id", "\(prefix)\(i)", "--lat", String(c.latitude), "--lon", String(c.longitude), "--radius",
                String(radius))
            #expect(added.status == 0, "\(added.stderr)")
        }
    }

    func write(_ text: String, to name: String) throws -> String {
        let path = dir.file(name)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func read(_ name: String) -> String? {
        FileManager.default.contents(atPath: dir.file(name)).map { String(decoding: $0, as: UTF8.self) }
    }
}

/// Runs blocking work on a new thread and waits for it without blocking the caller's.
func offThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// Waits for a process to end without blocking a thread of the cooperative pool.
func waitForExit(_ process: Process) async {
    _ = await Wait.until(timeout: 600, every: .milliseconds(20)) { !process.isRunning }
    process.waitUntilExit()
}

/// A text table's row, cut at runs of two or more spaces (cells hold single spaces).
private func cells(_ row: Substring) -> [String] {
    row.split(separator: "  ", omittingEmptySubsequences: true).map { $0.trimmingCharacters(in: .whitespaces) }
        .filter { !$0.isEmpty }
}

@Suite("geofence hook and events")
struct HookCommandTests {
    @Test("hook add, list and remove, with their errors")
    func hookCommands() async throws {
        try await withCLI { cli in
            let added = try await cli.exec(
                "hook", "add", "--on", "exit, enter", "--command", "echo hi", "--id", "backend")
            #expect(added.status == 0, "\(added.stderr)")
            #expect(added.stdout == "Added hook \"backend\": on enter,exit runs: echo hi\n")
            let all = try await cli.exec("hook", "add", "--on", "all", "--command", "cat", "--json")
            let generated = try JSON.parse(all.stdout)
            #expect(generated["id"]?.stringValue?.hasPrefix("hook-") == true)
            #expect(generated["on"] == ["all"])

            let listed = try JSON.parse(try await cli.exec("hook", "list", "--json").stdout).arrayValue ?? []
            #expect(listed.compactMap { $0["id"]?.stringValue } == ["backend", generated["id"]?.stringValue ?? ""])
            #expect(listed.first?["on"] == ["enter", "exit"])
            #expect(listed.first?["deliveries"]?["pending"]?.intValue == 0)
            let row = try await cli.exec("hook", "list").stdout.split(separator: "\n").first {
                $0.hasPrefix("backend ")
            }
            #expect(row.map(cells) == ["backend", "enter,exit", "0", "0", "0", "echo hi"])

            let badType = try await cli.exec("hook", "add", "--on", "enter,arrive", "--command", "true")
            #expect(badType.status == 64)
            #expect(badType.stderr.hasPrefix("Error: invalid value for --on: \"arrive\" is not an event type"))
            #expect(try await cli.exec("hook", "add", "--on", "enter", "--command", "  ").status == 64)
            #expect(try await cli.exec("hook", "add", "--on", "enter", "--command", "true", "--id", "a b").status == 64)
            #expect(try await cli.exec("hook", "add", "--on", "enter").status == 64)
            let duplicate = try await cli.exec("hook", "add", "--on", "enter", "--command", "true", "--id", "backend")
            #expect(duplicate.status == 65)
            #expect(duplicate.stderr == "Error: a hook with id \"backend\" already exists (remove it first)\n")

            let missing = try await cli.exec("hook", "remove", "backend", "nope")
            #expect(missing.status == 66)
            #expect(missing.stderr == "Error: no hook with id \"nope\"\n")
            #expect(try await cli.exec("hook", "list", "--json").stdout.contains("backend"), "all or nothing")
            let removed = try await cli.exec("hook", "remove", "backend", "--json")
            #expect(removed.status == 0)
            #expect(try JSON.parse(removed.stdout)["removed"] == ["backend"])
            #expect(try await cli.exec("hook", "--help").stdout.contains("GEOFENCE_EVENT_ID"))
        }
    }

    @Test("a region whose id and name hold shell syntax reaches its hooks only as data")
    func injection() async throws {
        try await withCLI { cli in
            let marker = cli.dir.file("pwned")
            let id = "d$(touch \(marker))`touch \(marker)`'\";touch \(marker)"
            // (No line break: names refuse control characters, issue 23.)
            let name = "N $(touch \(marker)) `touch \(marker)` \"'; touch \(marker) | \\"
            let out = { (file: String) in "'" + cli.dir.file(file) + "'" }
            let centre = HookTrack.centres(1)[0]
            let added = try await cli.exec(
                "add", "--id", id, "--name", name, "--lat", String(centre.latitude), "--lon", String(centre.longitude),
                "--radius", "100",
                "--on-enter",
                #"printf %s "$GEOFENCE_REGION" > \#(out("id")); printf %s "$GEOFENCE_REGION_NAME" > \#(out("name")); cat > \#(out("stdin"))"#
            )
            #expect(added.status == 0, "\(added.stderr)")
            #expect(
                try await cli.exec(
                    "hook", "add", "--on", "all", "--command", #"printf '%s\n' "$GEOFENCE_REGION" >> \#(out("all"))"#
                )
                .status == 0)
            let track = try cli.write(HookTrack.lines(centres: [centre], passes: 1), to: "track.json")

            let replay = try await cli.exec("replay", "--hooks", track)

            #expect(replay.status == 0, "\(replay.stderr)")
            #expect(replay.stderr.contains("hooks: 4 delivered"), "\(replay.stderr)")
            #expect(cli.read("id") == id)
            #expect(cli.read("name") == name)
            #expect(cli.read("all") == String(repeating: id + "\n", count: 3))
            let stdin = try JSON.parse(try #require(cli.read("stdin")))
            #expect(stdin["region"]?.stringValue == id)
            #expect(stdin["type"]?.stringValue == "enter")
            #expect(!FileManager.default.fileExists(atPath: marker), "event data was run as a command")
        }
    }

    @Test("a hook that fails twice, then succeeds: three attempts and the backoff in geofence events")
    func retriedThenDelivered() async throws {
        try await withCLI { cli in
            let centre = HookTrack.centres(1)[0]
            #expect(
                try await cli.exec(
                    "add", "--id", "depot", "--lat", String(centre.latitude), "--lon", String(centre.longitude),
                    "--radius",
                    "100", "--on-enter", #"echo "try $GEOFENCE_ATTEMPT" >&2; [ "$GEOFENCE_ATTEMPT" -ge 3 ]"#
                ).status == 0)
            let track = try cli.write(HookTrack.lines(centres: [centre], passes: 1), to: "track.json")

            let replay = try await cli.exec("replay", "--hooks", "--hook-retry-initial", "200ms", track)

            #expect(replay.status == 0)
            #expect(replay.stderr.contains("failed on attempt 1 (exit 1), retrying in"), "\(replay.stderr)")
            #expect(replay.stderr.contains("delivered on attempt 3"))
            #expect(replay.stderr.contains("hooks: 1 delivered, 2 failed attempts, 0 dead, 0 pending"))
            let enter = try #require(try await cli.events().first { $0["type"]?.stringValue == "enter" })
            let delivery = try #require(enter["deliveries"]?.arrayValue?.first)
            #expect(delivery["status"]?.stringValue == "done")
            #expect(delivery["attempts"]?.intValue == 3)
            #expect(delivery["stderr"]?.stringValue == "try 3\n")
            let history = try #require(delivery["history"]?.arrayValue)
            #expect(history.compactMap { $0["exit"]?.intValue } == [1, 1, 0])
            func time(_ value: JSONValue?) throws -> Date {
                try TimestampParser.parse(try #require(value?.stringValue))
            }
            // Equal jitter: the first retry waits 100-200 ms, the second 200-400 ms.
            let wait1 = try time(history[0]["retryAt"]).timeIntervalSince(try time(history[0]["startedAt"]))
            let wait2 = try time(history[1]["retryAt"]).timeIntervalSince(try time(history[1]["startedAt"]))
            #expect(wait1 >= 0.099 && wait1 < 0.3, "\(wait1)")
            #expect(wait2 >= 0.199 && wait2 < 0.5, "\(wait2)")
            #expect(try time(history[1]["startedAt"]) >= time(history[0]["retryAt"]).addingTimeInterval(-0.002))
            let text = try await cli.exec("events").stdout
            let row = text.split(separator: "\n").first { $0.contains(" enter ") }
            #expect(row.map(cells)?.suffix(5) == ["region", "done", "3", "exit 0", "try 3"], "\(text)")
        }
    }

    @Test("a hook printing 100 MB does not grow the runner's memory beyond the cap")
    func hundredMegabytes() async throws {
        try await withCLI { cli in
            let centre = HookTrack.centres(1)[0]
            // On `determined`: the runner's peak RSS so far, then 100 MB of output. On `enter` (after it, in order):
            // the peak again. $PPID is the process running the hooks.
            let hook = """
                if [ "$GEOFENCE_EVENT" = determined ]; then grep VmHWM /proc/$PPID/status > '\(cli.dir.file("before"))'; \
                head -c 100000000 /dev/zero; else grep VmHWM /proc/$PPID/status > '\(cli.dir.file("after"))'; fi
                """
            #expect(
                try await cli.exec(
                    "add", "--id", "depot", "--lat", String(centre.latitude), "--lon", String(centre.longitude),
                    "--radius",
                    "100"
                ).status == 0)
            #expect(try await cli.exec("hook", "add", "--on", "determined,enter", "--command", hook).status == 0)
            let track = try cli.write(HookTrack.lines(centres: [centre], passes: 1), to: "track.json")

            let replay = try await cli.exec("replay", "--hooks", track)

            #expect(replay.status == 0, "\(replay.stderr)")
            func kilobytes(_ name: String) throws -> Int {
                let line = try #require(cli.read(name))
                return try #require(Int(line.split(whereSeparator: { !$0.isNumber }).first ?? ""))
            }
            let growth = try kilobytes("after") - kilobytes("before")
            #expect(growth < 16 * 1024, "peak RSS grew by \(growth) kB while a hook printed 100 MB")
            let determined = try #require(try await cli.events().first { $0["type"]?.stringValue == "determined" })
            let delivery = try #require(determined["deliveries"]?.arrayValue?.first)
            #expect(delivery["stdoutBytes"]?.intValue == 100_000_000)
            #expect(delivery["stdout"]?.stringValue?.utf8.count == 65_536)
        }
    }

    @Test("events filters, retry by hand, prune")
    func retryAndPrune() async throws {
        try await withCLI { cli in
            let centres = HookTrack.centres(2)
            try await cli.addRegions(centres)
            let ok = cli.dir.file("ok")
            #expect(
                try await cli.exec("hook", "add", "--id", "gate", "--on", "enter", "--command", "[ -e '\(ok)' ]").status
                    == 0)
            let track = try cli.write(HookTrack.lines(centres: centres, passes: 1), to: "track.json")
            let replay = try await cli.exec("replay", "--hooks", "--hook-max-attempts", "1", track)
            #expect(replay.stderr.contains("0 delivered, 2 failed attempts, 2 dead"), "\(replay.stderr)")

            let dead = try await cli.events("--dead")
            #expect(dead.count == 2)
            #expect(dead.allSatisfy { $0["deliveries"]?.arrayValue?.count == 1 })
            #expect(try await cli.events("--pending").isEmpty)
            #expect(try await cli.exec("events", "--dead", "--failed").status == 64)
            let row = try await cli.exec("events").stdout.split(separator: "\n").first { $0.contains(" enter ") }
            #expect(row.map(cells)?.suffix(4) == ["gate", "dead", "1", "exit 1"])

            let first = try #require(dead[0]["deliveries"]?.arrayValue?.first?["id"]?.intValue)
            #expect(try await cli.exec("events", "retry").status == 64)
            #expect(try await cli.exec("events", "retry", "999").status == 66)
            let retried = try await cli.exec("events", "retry", String(first))
            #expect(retried.status == 0)
            #expect(
                retried.stdout
                    == "Retrying delivery \(first) when the engine next runs (geofence run, or geofence replay --hooks).\n"
            )
            #expect(try await cli.events("--pending").count == 1)
            _ = FileManager.default.createFile(atPath: ok, contents: nil)
            let empty = try cli.write("", to: "empty.json")
            #expect(try await cli.exec("replay", "--hooks", empty).stderr.contains("hooks: 1 delivered"))
            let again = try await cli.exec("events", "retry", String(first))
            #expect(again.status == 65)
            #expect(again.stderr == "Error: nothing to retry: delivery \(first) is done\n")
            let all = try await cli.exec("events", "retry", "--all-dead", "--json")
            #expect(try JSON.parse(all.stdout)["retried"]?.intValue == 1)
            #expect(try await cli.exec("replay", "--hooks", empty).stderr.contains("hooks: 1 delivered"))

            #expect(try await cli.exec("events", "prune", "--older-than", "1h").stdout.hasPrefix("Pruned 0 events"))
            let pruned = try await cli.exec("events", "prune", "--older-than", "0s", "--json")
            #expect(try JSON.parse(pruned.stdout)["events"]?.intValue == 6)
            #expect(try await cli.events().isEmpty)
        }
    }

    @Test("SIGKILL while 1,000 events are delivered: every event reaches the hook, duplicates only from kills")
    func killedWhileDelivering() async throws {
        try await withCLI { cli in
            let centres = HookTrack.centres(8)
            try await cli.addRegions(centres)
            let track = try cli.write(HookTrack.lines(centres: centres, passes: 63), to: "track.json")
            #expect(try await cli.exec("replay", track).status == 0)
            let log = cli.dir.file("delivered")
            #expect(
                try await cli.exec(
                    "hook", "add", "--on", "all", "--command", #"echo "$GEOFENCE_EVENT_ID" >> '\#(log)'"#
                )
                .status
                    == 0)
            let empty = try cli.write("", to: "empty.json")

            var rng = SeededGenerator(seed: 4)
            var kills = 0
            for _ in 0..<12 {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: GeofenceBinary.path)
                process.arguments = ["replay", "--hooks", empty, "--state-dir", cli.stateDir]
                process.environment = cli.environment
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                try process.run()
                // A kill at a random moment is the test: there is nothing to wait for.
                try await Task.sleep(for: .milliseconds(Int.random(in: 50...400, using: &rng)))
                if process.isRunning {
                    kill(process.processIdentifier, SIGKILL)
                    kills += 1
                }
                await waitForExit(process)
            }
            let last = try await cli.exec("replay", "--hooks", empty)
            #expect(last.stderr.contains("0 pending"), "\(last.stderr)")

            let events = try await cli.events()
            #expect(events.count >= 1_000)
            let ids = events.compactMap { $0["id"]?.stringValue }
            let lines = try #require(cli.read("delivered")).split(separator: "\n").map(String.init)
            let delivered = Set(lines)
            #expect(ids.allSatisfy(delivered.contains), "an event never reached its hook")
            // Each event has exactly one delivery, done; re-runs only of what ran at a kill (at most 4 at once).
            #expect(events.allSatisfy { $0["deliveries"]?.arrayValue?.count == 1 })
            #expect(events.allSatisfy { $0["deliveries"]?.arrayValue?.first?["status"]?.stringValue == "done" })
            #expect(lines.count - ids.count <= kills * 4, "\(lines.count - ids.count) duplicates after \(kills) kills")
        }
    }

    @Test("the runner's memory stays flat over a thousand deliveries")
    func flatMemory() async throws {
        try await withCLI { cli in
            let centres = HookTrack.centres(8)
            try await cli.addRegions(centres)
            let track = try cli.write(HookTrack.lines(centres: centres, passes: 63), to: "track.json")
            #expect(try await cli.exec("replay", track).status == 0)
            // $PPID is the runner: its resident size after 300 deliveries, and after 1,000.
            let rss = { (name: String) in "grep VmRSS /proc/$PPID/status > '\(cli.dir.file(name))'" }
            let hook =
                #"case $GEOFENCE_DELIVERY_ID in 300) \#(rss("early"));; 1000) \#(rss("late"));; esac; echo $GEOFENCE_EVENT_ID"#
            #expect(try await cli.exec("hook", "add", "--on", "all", "--command", hook).status == 0)
            let empty = try cli.write("", to: "empty.json")

            let replay = try await cli.exec("replay", "--hooks", empty)

            #expect(replay.stderr.contains("0 failed attempts, 0 dead, 0 pending"), "\(replay.stderr)")
            func kilobytes(_ name: String) throws -> Int {
                let line = try #require(cli.read(name))
                return try #require(Int(line.split(whereSeparator: { !$0.isNumber }).first ?? ""))
            }
            let growth = try kilobytes("late") - kilobytes("early")
            #expect(growth < 2048, "resident size grew by \(growth) kB over 700 deliveries")
        }
    }

    @Test("events --follow prints events and delivery changes as they happen")
    func follow() async throws {
        try await withCLI { cli in
            let centre = HookTrack.centres(1)[0]
            #expect(
                try await cli.exec(
                    "add", "--id", "depot", "--lat", String(centre.latitude), "--lon", String(centre.longitude),
                    "--radius",
                    "100", "--on-enter", "echo welcome"
                ).status == 0)
            let output = cli.dir.file("follow.out")
            _ = FileManager.default.createFile(atPath: output, contents: nil)
            let follower = Process()
            follower.executableURL = URL(fileURLWithPath: GeofenceBinary.path)
            follower.arguments = ["events", "--follow", "--state-dir", cli.stateDir]
            follower.environment = cli.environment
            follower.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
            try follower.run()
            defer {
                // SIGKILL: Foundation's Process starts the child with the spawning thread's signals blocked
                // (swift-corelibs-foundation#4772), so SIGTERM would wait forever.
                kill(follower.processIdentifier, SIGKILL)
                follower.waitUntilExit()
            }
            try await Task.sleep(for: .milliseconds(300))
            let track = try cli.write(HookTrack.lines(centres: [centre], passes: 1), to: "track.json")
            #expect(try await cli.exec("replay", "--hooks", track).status == 0)

            var text = ""
            _ = await Wait.until(timeout: 5) {
                text = cli.read("follow.out") ?? ""
                return text.contains("done on attempt 1")
            }
            #expect(text.contains("event #2 enter \"depot\""), "\(text)")
            #expect(text.contains("(enter \"depot\", hook region): done on attempt 1"), "\(text)")
            #expect(text.contains(": welcome"), "\(text)")
        }
    }

    @Test("replay --hooks from a stream runs hooks as the events are stored, not only at the end")
    func liveReplay() async throws {
        try await withCLI { cli in
            let centre = HookTrack.centres(1)[0]
            let marker = cli.dir.file("entered")
            #expect(
                try await cli.exec(
                    "add", "--id", "depot", "--lat", String(centre.latitude), "--lon", String(centre.longitude),
                    "--radius",
                    "100", "--on-enter", "touch '\(marker)'"
                ).status == 0)
            let lines = HookTrack.lines(centres: [centre], passes: 2).split(separator: "\n")
            let process = Process()
            process.executableURL = URL(fileURLWithPath: GeofenceBinary.path)
            process.arguments = ["replay", "--hooks", "-", "--state-dir", cli.stateDir]
            process.environment = cli.environment
            let input = Pipe()
            process.standardInput = input
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
            // The first pass enters the region (at its middle) and leaves it; the input stays open.
            input.fileHandleForWriting.write(Data((lines[0..<41].joined(separator: "\n") + "\n").utf8))
            let entered = await Wait.until(timeout: 5) { FileManager.default.fileExists(atPath: marker) }
            #expect(entered, "the enter hook did not run while the input was open")
            #expect(process.isRunning)
            input.fileHandleForWriting.write(Data((lines[41...].joined(separator: "\n") + "\n").utf8))
            try input.fileHandleForWriting.close()
            await waitForExit(process)
            #expect(process.terminationStatus == 0)
            let enters = try await cli.events().filter { $0["type"]?.stringValue == "enter" }
            #expect(enters.count == 2)
            #expect(enters.allSatisfy { $0["deliveries"]?.arrayValue?.first?["status"]?.stringValue == "done" })
        }
    }

    @Test("bad hook options are refused before anything is replayed")
    func badOptions() async throws {
        try await withCLI { cli in
            let track = try cli.write(HookTrack.lines(centres: HookTrack.centres(1), passes: 1), to: "track.json")
            let bad = try await cli.exec("replay", "--hooks", "--hook-concurrency", "0", track)
            #expect(bad.status == 64)
            #expect(bad.stderr.hasPrefix("Error: invalid value for --hook-concurrency: must be between 1 and 256"))
            #expect(bad.stdout.isEmpty)
            #expect(try await cli.exec("replay", "--hooks", "--hook-timeout", "soon", track).status == 64)
        }
    }
}
