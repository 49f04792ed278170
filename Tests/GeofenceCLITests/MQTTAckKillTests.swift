import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `--mqtt-ack commit` against a real broker: the engine killed with SIGKILL again and again while a fleet
/// publishes drives with brief passes through regions; what the broker had not been told was committed, it
/// sends again at the next start, so the events equal `replay` of the same fixes.
@Suite(
    "MQTT acknowledgement after commit, under kill -9", .serialized,
    .enabled(if: MosquittoBroker.isAvailable, "\(MosquittoBroker.unavailableReason)"))
struct MQTTAckKillTests {
    /// A vehicle driving to and fro along the street through the depot (radius 100 m) and the kiosk (radius
    /// 30 m, 250 m east of it: one fix inside a pass), 50 m every 5 s; `phase` staggers the fleet.
    static func tpv(vehicle: Int, step: Int) -> String {
        let phase = (step + vehicle * 5) % 32
        let eastward = phase >= 16
        let x = eastward ? -400 + 50 * Double(phase - 16) : 400 - 50 * Double(phase)
        let position =
            #""lat":48.85,"lon":\#(MQTTSourceTests.longitude(x)),"eph":5,"speed":10,"track":\#(eastward ? 90 : 270)"#
        return
            #"{"class":"TPV","device":"v\#(vehicle)","mode":3,"time":"\#(MQTTSourceTests.time(5 * step))",\#(position)}"#
    }

    static let regions = [
        ["add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100"],
        ["add", "--id", "kiosk", "--lat", "48.85", "--lon", "\(MQTTSourceTests.longitude(250))", "--radius", "30"],
    ]

    /// Publishes the fleet's drive a step at a time while the engine is killed at random moments and started
    /// again; then lets the last engine take the rest. Returns the kills and the stored region events, and
    /// those of `replay`, by then equal or not.
    static func soak(ack: String, vehicles: Int, steps: Int, seed: UInt64) async throws -> (
        kills: Int, live: [String], replayed: [String], log: String
    ) {
        let cli = try CLI()
        defer { cli.dir.remove() }
        // Nothing dropped by the broker for an engine that is down (its default keeps 1,000 messages).
        let broker = try cli.broker(settings: ["max_queued_messages 0"])
        for arguments in regions { #expect(try cli.run(arguments).status == 0) }
        let source = ["--source", "mqtt://127.0.0.1:\(broker.port)/fleet/#", "--mqtt-ack", ack]
        var daemon = try cli.daemon(source, log: "run-0.log")
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")

        let lines = (0..<steps).map { step in (0..<vehicles).map { tpv(vehicle: $0, step: step) } }
        let done = Done()
        let publisher = Task.detached {
            for step in lines {
                _ = try? broker.publish("fleet/all", step)
                // The fleet's pace, not a wait.
                try? await Task.sleep(for: .milliseconds(60))
            }
            done.set()
        }
        var rng = SeededGenerator(seed: seed)
        var kills = 0
        var logs = ""
        while true {
            // A kill at a random moment is the test: there is nothing to wait for.
            try await Task.sleep(for: .milliseconds(Int.random(in: 150...500, using: &rng)))
            let publishing = !done.isSet
            kill(daemon.pid, SIGKILL)
            await waitForExit(daemon.process)
            kills += 1
            logs += daemon.log
            daemon = try cli.daemon(source, log: "run-\(kills).log")
            _ = await daemon.waitForLog("running:", timeout: 10)
            if !publishing { break }
        }
        _ = await publisher.value

        let offline = try CLI()
        defer { offline.dir.remove() }
        for arguments in regions { #expect(try offline.run(arguments).status == 0) }
        // From a file: thousands of events on its standard output would fill a pipe the test writes to.
        let recording = offline.dir.file("fleet.jsonl")
        let text = lines.flatMap { $0 }.joined(separator: "\n") + "\n"
        try text.write(toFile: recording, atomically: true, encoding: .utf8)
        let replay = try offline.run(["replay", recording])
        #expect(replay.status == 0, "\(replay.stderr)")
        let replayed = try MQTTSourceTests.bodies(offline.stateDir)

        // The last engine takes what the broker still holds: until the events match, or they stop changing.
        var live: [String] = []
        var unchangedSince = Date()
        _ = try await Wait.until(timeout: 60, every: .milliseconds(200)) {
            let now = try MQTTSourceTests.bodies(cli.stateDir)
            if now == replayed {
                live = now
                return true
            }
            if now != live {
                live = now
                unchangedSince = Date()
            } else if Date().timeIntervalSince(unchangedSince) > 10 {
                return true
            }
            return false
        }
        #expect(await daemon.stop() != nil, "did not stop in 5 s: \(daemon.log)")
        return (kills, live, replayed, logs + daemon.log)
    }

    /// Set once the publisher has published every step.
    final class Done: @unchecked Sendable {
        private let lock = NSLock()
        private var value = false
        var isSet: Bool { lock.withLock { value } }
        func set() { lock.withLock { value = true } }
    }

    @Test("kill -9 while a fleet publishes through small regions: every event equals replay's, none lost")
    func nothingLostAcrossKills() async throws {
        // `GEOFENCE_TEST_MQTT_ACK=receipt` runs the same soak acknowledging on receipt (Docs/mqtt.md: what it
        // showed).
        let ack = ProcessInfo.processInfo.environment["GEOFENCE_TEST_MQTT_ACK"] ?? "commit"
        let result = try await Self.soak(
            ack: ack, vehicles: 40, steps: SoakScale.pick(short: 80, long: 400), seed: 23)
        #expect(result.kills >= 8)
        #expect(result.replayed.contains { $0.contains(#""region":"kiosk""#) && $0.contains(#""type":"enter""#) })
        #expect(result.replayed.count >= 100, "\(result.replayed.count) events")
        let missing = result.replayed.filter { !result.live.contains($0) }
        let extra = result.live.filter { !result.replayed.contains($0) }
        let account =
            "\(result.kills) kills; \(missing.count) of \(result.replayed.count) events missing or different: "
            + "\(missing.prefix(5)); extra: \(extra.prefix(5))"
        print("mqtt ack \(ack): \(account)")
        #expect(missing.isEmpty && extra.isEmpty && result.live.count == result.replayed.count, "\(account)")
    }
}
