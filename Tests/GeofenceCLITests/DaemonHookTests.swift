import Foundation
import GeofenceCore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Hooks run by the daemon itself (`geofence run`), killed and restarted, and under a large backlog.
@Suite("daemon hooks", .serialized)
struct DaemonHookTests {
    /// Queues events in the outbox by replaying a track (replay without --hooks leaves them to the engine).
    static func queue(_ cli: CLI, regions: Int, passes: Int) async throws -> Int {
        let centres = HookTrack.centres(regions)
        try await cli.addRegions(centres)
        let track = try cli.write(HookTrack.lines(centres: centres, passes: passes), to: "track.json")
        let replay = try await cli.exec("replay", track)
        #expect(replay.status == 0, "\(replay.stderr)")
        return replay.lines.count
    }

    /// The engine with gpsd pointed at a closed port: it runs, retries gpsd, and delivers hooks.
    static func engine(_ cli: CLI, log: String) throws -> DaemonProcess {
        try cli.daemon(["--gpsd", "127.0.0.1:9"], log: log)
    }

    @Test("SIGKILL the daemon at random points while 1,000 events are delivered: every id arrives")
    func killDaemonWhileDelivering() async throws {
        try await withCLI { cli in
            let queued = try await Self.queue(cli, regions: 8, passes: 63)
            #expect(queued >= 1_000, "\(queued) events queued")
            let log = cli.dir.file("delivered")
            let hook = try await cli.exec(
                "hook", "add", "--on", "all", "--command", #"echo "$GEOFENCE_EVENT_ID" >> '\#(log)'"#)
            #expect(hook.status == 0, "\(hook.stderr)")

            var rng = SeededGenerator(seed: 21)
            var kills = 0
            for round in 0..<SoakScale.pick(short: 12, long: 100) {
                let daemon = try Self.engine(cli, log: "run-\(round).log")
                // A kill at a random moment is the test: there is nothing to wait for.
                try await Task.sleep(for: .milliseconds(Int.random(in: 100...700, using: &rng)))
                kill(daemon.pid, SIGKILL)
                await waitForExit(daemon.process)
                kills += 1
            }
            // The last start delivers what is left and is stopped only when nothing is pending.
            let daemon = try Self.engine(cli, log: "run-last.log")
            var pending = -1
            _ = try await Wait.until(timeout: 60, every: .milliseconds(100)) {
                pending = try await cli.events("--pending").count
                return pending == 0
            }
            #expect(pending == 0)
            _ = await daemon.stop()

            let events = try await cli.events()
            let ids = events.compactMap { $0["id"]?.stringValue }
            let lines = (cli.read("delivered") ?? "").split(separator: "\n").map(String.init)
            let delivered = Set(lines)
            #expect(ids.count >= 1_000)
            #expect(ids.allSatisfy(delivered.contains), "an event never reached its hook")
            #expect(events.allSatisfy { $0["deliveries"]?.arrayValue?.first?["status"]?.stringValue == "done" })
            // Re-deliveries only of what was in flight at a kill: at most the concurrency bound (4) per kill.
            let duplicates = lines.count - delivered.count
            #expect(duplicates <= kills * 4, "\(duplicates) duplicates after \(kills) kills")
            print("daemon kill soak: \(kills) SIGKILLs, \(ids.count) events, all delivered, \(duplicates) duplicates")
        }
    }

    @Test("10,000 queued events: per-region order, within the concurrency bound, and status keeps answering")
    func backlog() async throws {
        try await withCLI { cli in
            // 8 regions x 626 passes x 2 events (an enter and an exit) = about 10,000 events.
            let queued = try await Self.queue(cli, regions: 8, passes: 626)
            #expect(queued >= 10_000, "\(queued) events queued")
            let log = cli.dir.file("delivered")
            // One short line per delivery, appended atomically (O_APPEND, under PIPE_BUF).
            let hook = try await cli.exec(
                "hook", "add", "--on", "enter,exit,determined", "--command",
                #"echo "$GEOFENCE_REGION $GEOFENCE_EVENT_ID" >> '\#(log)'"#)
            #expect(hook.status == 0, "\(hook.stderr)")

            let daemon = try Self.engine(cli, log: "run.log")
            var slowest = 0.0
            var answered = 0
            for _ in 0..<1_200 {
                let started = Date()
                let status = try await cli.exec("status", "--json", "--gpsd", "127.0.0.1:9", "--wait", "0.1s")
                slowest = max(slowest, Date().timeIntervalSince(started))
                // gpsd is unreachable: not ready (3), or no engine yet (69) while it starts; a report either way.
                #expect(status.status == 3 || status.status == 69, "\(status.stderr)")
                if (try? JSON.parse(status.stdout))?["engine"]?["running"] == true { answered += 1 }
                let lines = (cli.read("delivered") ?? "").split(separator: "\n").count
                if lines >= queued { break }
                // Paces the status requests, which are what this loop tests while the hooks deliver.
                try await Task.sleep(for: .milliseconds(250))
            }
            _ = await daemon.stop()
            #expect(answered >= 3, "status was asked only \(answered) times")
            #expect(slowest < 3, "status took \(slowest) s while hooks ran")

            let delivered = (cli.read("delivered") ?? "").split(separator: "\n").map { $0.split(separator: " ") }
            #expect(delivered.count == queued)
            // Per region, hooks ran in event order: event ids (UUIDv7) grow with the order they were made.
            var byRegion: [Substring: [Substring]] = [:]
            for parts in delivered where parts.count == 2 { byRegion[parts[0], default: []].append(parts[1]) }
            #expect(byRegion.count == 8)
            for (region, ids) in byRegion { #expect(ids == ids.sorted(), "\(region) out of order") }

            // Never more than the bound at once, by the attempts' own start and finish times.
            let events = try await cli.events()
            var edges: [(Date, Int)] = []
            for e in events {
                for d in e["deliveries"]?.arrayValue ?? [] {
                    guard let s = d["startedAt"]?.stringValue.flatMap({ try? TimestampParser.parse($0) }),
                        let f = d["finishedAt"]?.stringValue.flatMap({ try? TimestampParser.parse($0) })
                    else { continue }
                    edges.append((s, 1))
                    edges.append((f, -1))
                }
            }
            var running = 0
            var peak = 0
            for (_, step) in edges.sorted(by: { $0.0 < $1.0 || ($0.0 == $1.0 && $0.1 < $1.1) }) {
                running += step
                peak = max(peak, running)
            }
            #expect(peak <= 4, "\(peak) hooks ran at once")
            #expect(peak >= 2, "deliveries for different regions should overlap")
            print("daemon backlog: \(queued) events delivered, peak concurrency \(peak), slowest status \(slowest) s")
        }
    }
}
