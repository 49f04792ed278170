import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The hook runner against a real store and real `/bin/sh` hooks.
@Suite("hook runner")
struct HookRunnerTests {
    @Test("a region id and name full of shell syntax reach the hook only as data")
    func shellSyntaxIsData() async throws {
        try await withHookFixture { f in
            let marker = f.dir.file("pwned")
            let id = "r$(touch \(marker))`touch \(marker)`'\";touch \(marker)"
            // (A line break in a name is refused now, as in an id: `VisibleName`.)
            let name = "n second part $(touch \(marker)) `touch \(marker)` '\"; touch \(marker) & \\ $HOME"
            try f.addRegion(
                id, name: name,
                hooks: [
                    .enter: """
                    printf '%s' "$GEOFENCE_REGION" > \(f.shellPath("region")); \
                    printf '%s' "$GEOFENCE_REGION_NAME" > \(f.shellPath("name")); cat > \(f.shellPath("stdin"))
                    """
                ])
            try f.addHook("global", #"printf '%s' "$GEOFENCE_REGION" > "# + f.shellPath("global-region"))
            let events = try f.addEvents([(.enter, id)])

            let summary = await f.runner().drain()

            #expect(summary.delivered == 2, "\(f.log.text)")
            #expect(f.read("region") == id)
            #expect(f.read("global-region") == id)
            #expect(f.read("name") == name)
            let stdin = try JSON.parse(try #require(f.read("stdin")))
            #expect(stdin["region"]?.stringValue == id)
            #expect(stdin["id"]?.stringValue == events[0].id)
            #expect(!FileManager.default.fileExists(atPath: marker), "a value was run as a command")
        }
    }

    @Test("the environment: the event's fields, a few of the daemon's variables, nothing else")
    func environment() async throws {
        try await withHookFixture { f in
            try f.addRegion("depot", name: "North depot")
            try f.addHook(
                "env",
                """
                env > \(f.shellPath("env")); ls /proc/$$/fd; pwd > \(f.shellPath("pwd")); \
                exec grep -E '^Sig(Blk|Ign)' /proc/self/status > \(f.shellPath("signals"))
                """)
            let events = try f.addEvents([(.enter, "depot")])
            // What the daemon ignores must not be ignored by its hooks. (The masks are read by the process the runner
            // started, after `exec`: dash blocks signals while it waits for a child.)
            let previous = signal(SIGHUP, SIG_IGN)
            defer { signal(SIGHUP, previous) }

            let summary = await f.runner().drain()

            #expect(summary.delivered == 1, "\(f.log.text)")
            let lines = try #require(f.read("env")).split(separator: "\n").map(String.init)
            var env: [String: String] = [:]
            for line in lines {
                guard let eq = line.firstIndex(of: "=") else { continue }
                env[String(line[..<eq])] = String(line[line.index(after: eq)...])
            }
            let expected: [String: String] = [
                "GEOFENCE_EVENT": "enter", "GEOFENCE_EVENT_ID": events[0].id, "GEOFENCE_REGION": "depot",
                "GEOFENCE_REGION_NAME": "North depot", "GEOFENCE_SUBJECT": "/dev/ttyACM0",
                "GEOFENCE_TIME": TimestampParser.format(events[0].time), "GEOFENCE_LAT": "51.5001",
                "GEOFENCE_LON": "-0.1201", "GEOFENCE_ACCURACY": "4.2", "GEOFENCE_DISTANCE": "42.3",
                "GEOFENCE_RADIUS": "100", "GEOFENCE_STATE": "inside", "GEOFENCE_PREVIOUS": "outside",
                "GEOFENCE_INFERRED": "false", "GEOFENCE_SPEED": "8.1", "GEOFENCE_COURSE": "271.4", "GEOFENCE_MODE": "3",
                "GEOFENCE_ATTEMPT": "1", "GEOFENCE_HOOK": "env",
            ]
            for (key, value) in expected { #expect(env[key] == value, "\(key)") }
            #expect(env["GEOFENCE_DELIVERY_ID"].flatMap(Int.init) != nil)
            #expect(env["PATH"] != nil)
            let allowed = Set(HookConfiguration.inheritedNames + ["PWD", "SHLVL", "_", "OLDPWD"])
            let unexpected = env.keys.filter { !$0.hasPrefix("GEOFENCE_") && !allowed.contains($0) }
            #expect(unexpected.isEmpty, "variables leaked from the daemon: \(unexpected.sorted())")
            #expect(f.read("pwd") == "/\n")
            // Listed before any redirection (dash keeps a copy of stdout on fd 10 while one is in force).
            let fds = String(decoding: try #require(try f.deliveries().first).stdout, as: UTF8.self)
            #expect(fds.split(separator: "\n").sorted() == ["0", "1", "2"], "descriptors leaked")
            let masks = try #require(f.read("signals")).split(separator: "\n").map { line in
                UInt64(line.split(separator: "\t").last ?? "", radix: 16) ?? .max
            }
            #expect(masks.first == 0, "signals blocked")
            // glibc's posix_spawn leaves its two internal signals (32, 33) ignored; a new program resets them.
            #expect(masks.last.map { $0 & ~0x1_8000_0000 } == 0, "signals ignored")
        }
    }

    @Test("a hook that fails twice and then succeeds is delivered on its third attempt, after backoff")
    func failsTwiceThenSucceeds() async throws {
        try await withHookFixture { f in
            try f.addRegion(
                "depot", hooks: [.enter: #"echo "attempt $GEOFENCE_ATTEMPT" >&2; [ "$GEOFENCE_ATTEMPT" -ge 3 ]"#])
            try f.addEvents([(.enter, "depot")])

            let summary = await f.runner().drain()

            #expect(summary.delivered == 1)
            #expect(summary.failedAttempts == 2)
            let d = try #require(try f.deliveries().first)
            #expect(d.status == .done)
            #expect(d.attempts == 3)
            #expect(d.lastExit == 0)
            #expect(String(decoding: d.stderr, as: UTF8.self) == "attempt 3\n")
            #expect(d.history.map(\.exitCode) == [1, 1, 0])
            // Backoff 0.05 s, then 0.1 s (no jitter in tests): each retry waited at least that long.
            let first = d.history[0]
            let second = d.history[1]
            let retry1 = try #require(first.retryAt)
            let retry2 = try #require(second.retryAt)
            #expect(retry1.timeIntervalSince(first.startedAt) >= 0.049)  // times are kept to the millisecond
            #expect(retry2.timeIntervalSince(second.startedAt) >= 0.099)
            #expect(second.startedAt >= retry1.addingTimeInterval(-0.002))
            #expect(d.history[2].startedAt >= retry2.addingTimeInterval(-0.002))
            #expect(d.history[2].retryAt == nil)
            #expect(f.log.contains("delivered on attempt 3"))
        }
    }

    @Test("the runner reads the time from its clock: deliveries, attempts and retries are stamped with it")
    func injectedClock() async throws {
        try await withHookFixture { f in
            try f.addRegion("depot", hooks: [.enter: #"[ "$GEOFENCE_ATTEMPT" -ge 2 ]"#])
            try f.addEvents([(.enter, "depot")])
            let offset = 30 * 86_400.0
            let before = Date().addingTimeInterval(offset)

            let summary = await f.runner(clock: OffsetClock(offset: offset)).drain()

            let after = Date().addingTimeInterval(offset)
            #expect(summary.delivered == 1 && summary.failedAttempts == 1)
            let d = try #require(try f.deliveries().first)
            #expect(d.status == .done && d.attempts == 2)
            // Times are kept to the millisecond.
            let stamps =
                [d.createdAt, d.queuedAt, d.nextAttemptAt] + [d.startedAt, d.finishedAt].compactMap { $0 }
                + d.history.map(\.startedAt) + d.history.compactMap(\.retryAt)
            #expect(stamps.count == 8)
            for stamp in stamps {
                #expect(stamp >= before.addingTimeInterval(-0.002) && stamp <= after.addingTimeInterval(1), "\(stamp)")
            }
        }
    }

    @Test("deliveries an older geofence wrote, with the order key as text, are read as keys and run in order")
    func olderStoreOrderKeys() async throws {
        try await withHookFixture { f in
            let region = "a|region:b"
            let append = "printf '%s\\n' \"$GEOFENCE_EVENT_ID\" >> " + f.shellPath("order")
            try f.addRegion(region, hooks: [.enter: append, .exit: append])
            let events = try f.addEvents([(.enter, region), (.exit, region), (.enter, region)])
            // As an older geofence left them: the rows it made, the column in its text form, the cursor past them.
            try f.store.queue.write { db in
                for event in events {
                    try db.execute(
                        """
                        INSERT INTO deliveries (event_seq, hook, command, order_key, status, next_attempt_at,
                                                created_at, queued_at, change_seq)
                        SELECT seq, 'region', ?, ?, 'pending', 0, 0, 0, seq FROM events WHERE id = ?
                        """, [append, "region|region:" + region, event.id])
                }
                try db.execute("UPDATE hook_dispatch SET cursor = (SELECT max(seq) FROM events) WHERE id = 1")
            }

            let summary = await f.runner().drain()

            #expect(summary.delivered == 3, "\(f.log.text)")
            #expect(f.read("order") == events.map { $0.id + "\n" }.joined())
            let deliveries = try f.deliveries()
            #expect(deliveries.count == 3 && deliveries.allSatisfy { $0.status == .done })
            #expect(deliveries.allSatisfy { $0.orderKey == DeliveryOrderKey(hook: "region", scope: .region(region)) })
        }
    }

    @Test("while Location Services are off, a location event's hook is held, and runs once they are on")
    func locationHooksHeldWhileServicesOff() async throws {
        try await withHookFixture { f in
            let ran = f.dir.file("ran")
            try f.addRegion("depot", hooks: [.enter: "echo \"$GEOFENCE_EVENT\" >> \(f.shellPath("ran"))"])
            let runner = f.runner()
            runner.setLocationPaused(true)
            try f.addEvents([(.enter, "depot")])
            let held = await runner.drain()
            #expect(held.delivered == 0 && held.pending == 1, "\(held)")
            #expect(!FileManager.default.fileExists(atPath: ran), "a location hook ran while services were off")
            runner.setLocationPaused(false)
            let released = await runner.drain()
            #expect(released.delivered == 1, "\(released)")
            #expect(try String(contentsOfFile: ran, encoding: .utf8) == "enter\n")
        }
    }

    @Test("a graceful stop lets a running hook finish within the grace; one that does not is stopped and retried")
    func gracefulStopLetsRunningHooksFinish() async throws {
        try await withHookFixture { f in
            try f.addRegion("quick", hooks: [.enter: "sleep 0.2; echo quick >> \(f.shellPath("ran"))"])
            try f.addRegion("slow", hooks: [.enter: "sleep 30; echo slow >> \(f.shellPath("ran"))"])
            try f.addEvents([(.enter, "quick"), (.enter, "slow")])
            let runner = f.runner { $0.shutdownGrace = 1 }
            let run = Task { await runner.run() }
            _ = await Wait.until(timeout: 60) { runner.statistics.running >= 2 }
            let asked = ContinuousClock.now
            runner.finish()
            await run.value
            let took = ContinuousClock.now - asked
            #expect(took >= .seconds(1) && took < .seconds(5), "the grace, then the slow one was stopped: \(took)")
            #expect(try String(contentsOfFile: f.dir.file("ran"), encoding: .utf8) == "quick\n")
            let statuses = try f.deliveries().map(\.status)
            #expect(statuses.filter { $0 == .done }.count == 1, "\(statuses)")
            #expect(statuses.filter { $0 == .pending }.count == 1, "the slow one is retried at the next start")
        }
    }

    @Test("a hook that never exits is killed at its timeout with its children, and retried")
    func timeoutKillsTheGroup() async throws {
        try await withHookFixture { f in
            // The second attempt also ignores SIGTERM: SIGKILL must follow.
            try f.addHook(
                "stuck",
                """
                echo $$ > \(f.shellPath("pgid"))-$GEOFENCE_ATTEMPT; [ "$GEOFENCE_ATTEMPT" = 2 ] && trap '' TERM; \
                sleep 1000 & sleep 1000
                """)
            try f.addEvents([(.enter, "somewhere")])
            let runner = f.runner {
                $0.timeout = 0.3
                $0.killGrace = 0.3
                $0.retry.maxAttempts = 2
            }

            _ = await runner.drain()

            let d = try #require(try f.deliveries().first)
            #expect(d.status == .dead)
            #expect(d.attempts == 2)
            #expect(d.history.allSatisfy { $0.timedOut })
            #expect(d.history[0].signal == SIGTERM)
            #expect(d.history[1].signal == SIGKILL)
            for attempt in 1...2 {
                let pgid = try #require(
                    f.read("pgid-\(attempt)").flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) })
                #expect(
                    await eventually(2) { liveProcesses(inGroup: pgid).isEmpty },
                    "attempt \(attempt) left processes behind"
                )
            }
            // Killed at the timeout (0.3 s); the second one, deaf to SIGTERM, after the grace (0.3 s) too.
            #expect(d.history[0].duration >= 0.29 && d.history[0].duration < 1)
            #expect(d.history[1].duration >= 0.59 && d.history[1].duration < 1.3)
            #expect(f.log.contains("giving up after 2 attempts"))
        }
    }

    @Test("output is read to the end and kept only up to the cap")
    func outputCap() async throws {
        try await withHookFixture { f in
            try f.addHook("loud", "head -c 3000000 /dev/zero; echo oops >&2; exit 4")
            try f.addEvents([(.enter, "somewhere")])
            let runner = f.runner {
                $0.outputLimit = 1000
                $0.retry.maxAttempts = 1
            }

            _ = await runner.drain()

            let d = try #require(try f.deliveries().first)
            #expect(d.status == .dead)
            #expect(d.lastExit == 4)
            #expect(d.stdout.count == 1000)
            #expect(d.stdoutBytes == 3_000_000)
            #expect(String(decoding: d.stderr, as: UTF8.self) == "oops\n")
            #expect(f.log.contains("exit 4"))
            #expect(f.log.contains("oops"))
        }
    }

    @Test("a region removed before delivery leaves only the global hooks; filters pick event types")
    func removedRegionAndFilters() async throws {
        try await withHookFixture { f in
            try f.addRegion("gone", hooks: [.enter: "true", .exit: "true"])
            try f.addRegion("kept", hooks: [.exit: "true"])
            try f.addHook("exits", on: ["exit"], "true")
            try f.addHook("all", "true")
            try f.addEvents([(.enter, "gone"), (.exit, "gone"), (.enter, "kept"), (.exit, "kept"), (.dwell, "kept")])
            try f.store.outbox.append([
                StateEvent(id: "0193a4c2-0000-7000-8000-000000000001", type: .source, time: Date(), state: "lost")
            ])
            try f.store.regions.remove(id: "gone")

            let summary = await f.runner().drain()

            #expect(summary.delivered == 9)
            let byEvent = Dictionary(
                grouping: try f.store.deliveries.eventDeliveries(limit: 100),
                by: { "\($0.event.type):\($0.event.region ?? "-")" })
            func hooks(_ key: String) -> [String] { byEvent[key]?.first?.deliveries.map(\.hook).sorted() ?? [] }
            #expect(hooks("enter:gone") == ["hook:all"])
            #expect(hooks("exit:gone") == ["hook:all", "hook:exits"])
            #expect(hooks("enter:kept") == ["hook:all"])
            #expect(hooks("exit:kept") == ["hook:all", "hook:exits", "region"])
            #expect(hooks("dwell:kept") == ["hook:all"])
            #expect(hooks("source:-") == ["hook:all"])
        }
    }

    @Test("a retrying delivery holds back its key's later deliveries, not other keys'")
    func orderWithRetries() async throws {
        try await withHookFixture { f in
            let log = f.shellPath("log")
            try f.addHook(
                "h",
                """
                echo "$GEOFENCE_REGION $GEOFENCE_EVENT $GEOFENCE_ATTEMPT" >> \(log); \
                [ "$GEOFENCE_REGION $GEOFENCE_EVENT" != "a enter" ] || [ "$GEOFENCE_ATTEMPT" -ge 3 ]
                """)
            try f.addEvents([(.enter, "a"), (.enter, "b"), (.dwell, "a"), (.dwell, "b"), (.exit, "a"), (.exit, "b")])

            _ = await f.runner { $0.retry.initialDelay = 0.2 }.drain()

            let lines = try #require(f.read("log")).split(separator: "\n").map(String.init)
            #expect(
                lines.filter { $0.hasPrefix("a ") } == ["a enter 1", "a enter 2", "a enter 3", "a dwell 1", "a exit 1"])
            #expect(lines.filter { $0.hasPrefix("b ") } == ["b enter 1", "b dwell 1", "b exit 1"])
            // b was not held back by a's retries: it finished before a's second attempt.
            #expect(lines.firstIndex(of: "b exit 1")! < lines.firstIndex(of: "a enter 2")!)
        }
    }

    @Test("one region's backlog takes turns with the others")
    func fairness() async throws {
        try await withHookFixture { f in
            try f.addHook("h", #"echo "$GEOFENCE_REGION" >> "# + f.shellPath("log"))
            try f.addEvents(Array(repeating: (.enter, "a"), count: 10) + Array(repeating: (.enter, "b"), count: 3))

            _ = await f.runner { $0.concurrency = 1 }.drain()

            let lines = try #require(f.read("log")).split(separator: "\n").map(String.init)
            #expect(lines.count == 13)
            // b's three deliveries do not wait for all of a's ten.
            #expect(lines.lastIndex(of: "b").map { $0 < 8 } == true, "\(lines)")
        }
    }

    @Test("10,000 queued events are delivered in per-region order within the concurrency bound")
    func tenThousand() async throws {
        try await withHookFixture { f in
            let log = f.shellPath("log")
            // Appends of a short line with O_APPEND are atomic, so the file's order is the order things happened:
            // S when a hook starts, E when it ends.
            try f.addHook(
                "log",
                #"echo "S $GEOFENCE_REGION $GEOFENCE_EVENT_ID" >> "# + log + #"; echo "E $GEOFENCE_REGION" >> "#
                    + log)
            let regions = (0..<20).map { "region-\($0)" }
            var specs: [(type: RegionEventType, region: String)] = []
            for i in 0..<10_000 { specs.append((i % 3 == 0 ? .enter : .exit, regions[(i * 7 + i / 20) % 20])) }
            let events = try f.addEvents(specs)
            let runner = f.runner { $0.concurrency = 4 }

            let clock = ContinuousClock()
            let elapsed = await clock.measure { _ = await runner.drain() }

            let stats = runner.statistics
            #expect(stats.delivered == 10_000, "\(f.log.text)")
            #expect(stats.maxConcurrent <= 4)
            let lines = try #require(f.read("log")).split(separator: "\n")
            #expect(lines.count == 20_000)
            var expectedOrder: [String: [String]] = [:]
            for e in events { expectedOrder[e.region, default: []].append(e.id) }
            var seen: [String: [String]] = [:]
            var open: [String: Bool] = [:]
            var running = 0
            var maxRunning = 0
            var interleaved = false
            for line in lines {
                let parts = line.split(separator: " ").map(String.init)
                if parts[0] == "S" {
                    if open[parts[1]] == true { interleaved = true }
                    open[parts[1]] = true
                    seen[parts[1], default: []].append(parts[2])
                    running += 1
                    maxRunning = max(maxRunning, running)
                } else {
                    open[parts[1]] = false
                    running -= 1
                }
            }
            #expect(!interleaved, "two deliveries of one region overlapped")
            #expect(maxRunning <= 4)
            for region in regions { #expect(seen[region] == expectedOrder[region], "order of \(region)") }
            #expect(try f.store.deliveries.countsByStatus() == [.done: 10_000])
            print("10,000 deliveries in \(elapsed), at most \(stats.maxConcurrent) at once")
        }
    }

    @Test("deliveries are created once per (event, hook) and every event is delivered, across restarts")
    func restarts() async throws {
        try await withHookFixture { f in
            let log = f.shellPath("log")
            for i in 0..<10 {
                try f.addRegion("r\(i)", hooks: [.enter: #"echo "region $GEOFENCE_EVENT_ID" >> "# + log])
            }
            try f.addHook("g", #"echo "global $GEOFENCE_EVENT_ID" >> "# + log)
            let events = try f.addEvents((0..<1_000).map { (.enter, "r\($0 % 10)") })

            func lineCount() -> Int { f.read("log")?.split(separator: "\n").count ?? 0 }
            var stops = 0
            for threshold in [1, 150, 700, 1_300] {
                let runner = f.runner()
                let task = Task { await runner.run() }
                _ = await eventually(60) { lineCount() >= threshold }
                task.cancel()
                await task.value
                stops += 1
            }
            let summary = await f.runner().drain()
            #expect(summary.pending == 0)

            let deliveries = try f.deliveries()
            #expect(deliveries.count == 2_000)
            #expect(Set(deliveries.map { "\($0.eventSeq) \($0.hook)" }).count == 2_000)
            #expect(deliveries.allSatisfy { $0.status == .done })
            let lines = try #require(f.read("log")).split(separator: "\n").map(String.init)
            let counts = Dictionary(lines.map { ($0, 1) }, uniquingKeysWith: +)
            for e in events {
                #expect(counts["region \(e.id)", default: 0] >= 1)
                #expect(counts["global \(e.id)", default: 0] >= 1)
            }
            // Only what was running at a stop runs twice: at most `concurrency` per stop.
            #expect(lines.count - 2_000 <= stops * 4)
        }
    }

    @Test("stopping kills running hooks at once; their deliveries run again at the next start")
    func stopIsPrompt() async throws {
        try await withHookFixture { f in
            try f.addHook("slow", "echo $$ >> \(f.shellPath("pgids")); [ -e \(f.shellPath("released")) ] || sleep 1000")
            try f.addEvents([(.enter, "a"), (.enter, "b"), (.enter, "c"), (.enter, "d"), (.enter, "e")])
            let runner = f.runner()
            let task = Task { await runner.run() }
            // Generous: the runner's task needs a thread of the cooperative pool to start, and tests that block it
            // may hold them all for a while.
            #expect(await eventually(60) { f.read("pgids")?.split(separator: "\n").count == 4 })

            let pgids = try #require(f.read("pgids")).split(separator: "\n").compactMap { Int32($0) }
            #expect(pgids.count == 4)

            // Timed on this thread, not by awaiting the task: the stop needs none of the cooperative pool, which
            // other tests may keep busy.
            let clock = ContinuousClock()
            let start = clock.now
            task.cancel()
            _ = Wait.blocking(timeout: 5) {
                runner.statistics.running == 0 && !pgids.contains(where: { !liveProcesses(inGroup: $0).isEmpty })
            }
            #expect(clock.now - start < .seconds(2))
            await task.value
            for pgid in pgids { #expect(liveProcesses(inGroup: pgid).isEmpty) }
            let interrupted = try f.deliveries().filter { $0.status == .pending && $0.attempts == 1 }
            #expect(interrupted.count == 4)
            #expect(interrupted.allSatisfy { $0.lastError?.hasPrefix("interrupted") == true })

            _ = FileManager.default.createFile(atPath: f.dir.file("released"), contents: nil)
            let summary = await f.runner().drain()
            #expect(summary.delivered == 5)
        }
    }

    @Test("a delivery's history keeps its last 20 attempts")
    func historyIsBounded() async throws {
        try await withHookFixture { f in
            try f.addHook("failing", "exit 2")
            try f.addEvents([(.enter, "a")])
            _ = await f.runner {
                $0.retry.initialDelay = 0.001
                $0.retry.maxDelay = 0.001
                $0.retry.maxAttempts = 25
            }.drain()
            let d = try #require(try f.deliveries().first)
            #expect(d.status == .dead)
            #expect(d.attempts == 25)
            #expect(d.history.map(\.number) == Array(6...25))
            #expect(d.history.allSatisfy { $0.exitCode == 2 })
        }
    }

    @Test("dead deliveries are kept and can be retried by hand")
    func deadAndRetried() async throws {
        try await withHookFixture { f in
            try f.addHook("picky", "[ -e \(f.shellPath("ok")) ]")
            let events = try f.addEvents([(.enter, "a"), (.exit, "a")])
            _ = await f.runner { $0.retry.maxAttempts = 2 }.drain()
            var all = try f.deliveries()
            #expect(all.map(\.status) == [.dead, .dead])
            #expect(try f.store.deliveries.eventDeliveries(filter: .dead).count == 2)

            _ = FileManager.default.createFile(atPath: f.dir.file("ok"), contents: nil)
            #expect(try f.store.deliveries.retry(String(all[0].id)) == [all[0].id])
            #expect(try f.store.deliveries.find(id: all[0].id)?.attempts == 0)
            _ = await f.runner().drain()
            all = try f.deliveries()
            #expect(all.map(\.status) == [.done, .dead])

            #expect(try f.store.deliveries.retry(events[1].id) == [all[1].id])
            #expect(throws: HookStoreError.nothingToRetry("delivery \(all[0].id) is done")) {
                try f.store.deliveries.retry(String(all[0].id))
            }
            #expect(throws: HookStoreError.deliveryNotFound("nope")) { try f.store.deliveries.retry("nope") }
            _ = await f.runner().drain()
            #expect(try f.deliveries().map(\.status) == [.done, .done])
        }
    }

    @Test("a delivery older than the maximum age is given up after its next failure")
    func maxAge() async throws {
        try await withHookFixture { f in
            try f.addHook("failing", "exit 1")
            try f.addEvents([(.enter, "a")])
            _ = await f.runner {
                $0.retry.maxAttempts = nil
                $0.retry.maxAge = 0.3
            }.drain()
            let d = try #require(try f.deliveries().first)
            #expect(d.status == .dead)
            #expect(d.attempts >= 2)
            #expect(d.history.last?.retryAt == nil)
        }
    }

    @Test("events not yet dispatched count as pending while a hook exists, so nobody stops too soon")
    func undispatchedEventsArePending() async throws {
        try await withHookFixture { f in
            // No hook at all: an event owes nothing.
            try f.addEvents([(.enter, "a")])
            #expect(try f.store.deliveries.eventDeliveries(filter: .pending).isEmpty)
            try f.dispatch()
            // A hook, and an event committed just before a crash: its deliveries are not made yet, but it is owed.
            try f.addHook("h", "true")
            try f.addEvents([(.exit, "a")])
            let owed = try f.store.deliveries.eventDeliveries(filter: .pending)
            #expect(owed.map(\.event.type) == ["exit"])
            #expect(owed.first?.dispatched == false)
            try f.dispatch()
            let made = try f.store.deliveries.eventDeliveries(filter: .pending)
            #expect(made.count == 1 && made.first?.dispatched == true && made.first?.deliveries.count == 1)
            // A region hook alone also makes events owed.
            _ = try f.store.deliveries.removeHooks(ids: ["h"])
            try f.addRegion("b", hooks: [.enter: "true"])
            try f.addEvents([(.enter, "b")])
            #expect(
                try f.store.deliveries.eventDeliveries(filter: .pending).contains {
                    !$0.dispatched && $0.event.region == "b"
                })
        }
    }

    @Test("removing a hook stops its waiting deliveries")
    func removeHook() async throws {
        try await withHookFixture { f in
            try f.addHook("h", "exit 1")
            try f.addEvents([(.enter, "a"), (.enter, "b")])
            try f.dispatch()
            let removed = try f.store.deliveries.removeHooks(ids: ["h"])
            #expect(removed.map(\.stopped) == [2])
            #expect(try f.deliveries().allSatisfy { $0.status == .dead && $0.lastError == "hook removed" })
            #expect(throws: HookStoreError.hookNotFound("h")) { try f.store.deliveries.removeHooks(ids: ["h"]) }
        }
    }

    @Test("prune deletes old events whose deliveries are finished, never a waiting one")
    func prune() async throws {
        try await withHookFixture { f in
            try f.addHook("h", "[ \"$GEOFENCE_REGION\" = a ]")
            try f.addEvents([(.enter, "a"), (.enter, "b")])
            _ = await f.runner {
                $0.retry.initialDelay = 60
                $0.retry.maxDelay = 60
            }.drain()
            #expect(try f.deliveries().map(\.status) == [.done, .pending])

            #expect(try f.store.outbox.prune(before: Date().addingTimeInterval(-3600)) == (0, 0))
            let pruned = try f.store.outbox.prune(before: Date().addingTimeInterval(1))
            #expect(pruned == (1, 1))
            #expect(try f.store.outbox.count() == 1)
            #expect(try f.deliveries().map(\.status) == [.pending])
        }
    }

    @Test("a second runner on the same state directory does not run hooks")
    func oneRunnerPerDirectory() async throws {
        try await withHookFixture { f in
            let first = f.runner()
            let task = Task { await first.run() }
            defer { task.cancel() }
            #expect(await eventually(60) { FileManager.default.fileExists(atPath: f.dir.file("state/hooks.lock")) })
            // The file exists a moment before the runner's flock holds it, and a probe with flock could take the
            // lock from the runner: nothing to observe safely, so a little time.
            try await Task.sleep(for: .milliseconds(100))
            let summary = await f.runner().drain()
            #expect(summary.busy)
            task.cancel()
            await task.value
            #expect(await f.runner().drain().busy == false)
        }
    }

    @Test("a delivery with run-as runs as that user", .enabled(if: getuid() == 0, "needs root"))
    func runAs() async throws {
        try await withHookFixture { f in
            chmod(f.dir.path, 0o777)
            try f.addHook("who", "id -u > \(f.shellPath("uid"))")
            try f.addEvents([(.enter, "a")])
            try f.dispatch()
            try f.store.queue.write { db in try db.execute("UPDATE deliveries SET run_as = 65534") }
            let summary = await f.runner().drain()
            #expect(summary.delivered == 1, "\(f.log.text)")
            #expect(f.read("uid") == "65534\n")
        }
    }

    @Test("wake() starts delivery of new events at once")
    func wake() async throws {
        try await withHookFixture { f in
            try f.addHook("h", "true")
            let runner = f.runner { $0.pollInterval = 30 }
            let task = Task { await runner.run() }
            defer { task.cancel() }
            // Time for the runner's first pass to end, so that the wake is what starts the next: no signal shows
            // the runner idle.
            try await Task.sleep(for: .milliseconds(200))
            try f.addEvents([(.enter, "a")])
            runner.wake()
            #expect(await eventually(60) { runner.statistics.delivered == 1 })
            task.cancel()
            await task.value
        }
    }
}

@Suite("retry schedule and scheduler")
struct HookScheduleTests {
    @Test("backoff starts at 1 s, doubles, and stops at 5 minutes")
    func backoff() {
        let retry = HookConfiguration().retry
        #expect((1...10).map { retry.backoff(afterAttempt: $0) } == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300])
        #expect(retry.backoff(afterAttempt: 10_000) == 300)
        #expect(retry.delay(afterAttempt: 3, unit: 0) == 2)
        #expect(retry.delay(afterAttempt: 3, unit: 1) == 4)
        var full = retry
        full.jitter = .full
        #expect(full.delay(afterAttempt: 3, unit: 0) == 0)
        // The defaults as the one backoff type: the delay after attempt n is its retry n - 1.
        #expect(retry.schedule == ReconnectBackoff(base: 1, cap: 300, multiplier: 2, jitter: .equal))
        #expect(retry.givesUp(afterAttempt: 100, age: 1))
        #expect(!retry.givesUp(afterAttempt: 99, age: 86_399))
        #expect(retry.givesUp(afterAttempt: 2, age: 86_400))
    }

    @Test("one head per key, earliest due first, later deliveries wait behind their head")
    func scheduler() {
        var s = DeliveryScheduler()
        let t0 = Date(timeIntervalSince1970: 1000)
        let a = DeliveryOrderKey(hook: "hook:a", scope: .region("r1"))
        let b = DeliveryOrderKey(hook: "hook:b", scope: .eventType("source"))
        s.offer(DeliveryHead(id: 1, orderKey: a, nextAttemptAt: t0))
        s.offer(DeliveryHead(id: 2, orderKey: a, nextAttemptAt: t0))
        s.offer(DeliveryHead(id: 3, orderKey: b, nextAttemptAt: t0.addingTimeInterval(5)))
        #expect(s.takeDue(now: t0, limit: 10).map(\.id) == [1])
        #expect(s.nextDue() == t0.addingTimeInterval(5))
        s.setHead(DeliveryHead(id: 1, orderKey: a, nextAttemptAt: t0.addingTimeInterval(10)), for: a)
        #expect(s.takeDue(now: t0.addingTimeInterval(6), limit: 10).map(\.id) == [3])
        s.setHead(nil, for: b)
        #expect(s.takeDue(now: t0.addingTimeInterval(20), limit: 10).map(\.id) == [1])
        #expect(s.nextDue() == nil)
        #expect(s.keyCount == 1)
    }
}
