import Foundation
import GeofenceCore
import GeofenceEngine
import Synchronization
import Testing

@Suite("metrics: the exposition text, the histogram, the address, health")
struct MetricsUnitTests {
    @Test("a histogram counts each value in its bucket, cumulatively, and refuses to trap on odd values")
    func histogram() {
        var h = LatencyHistogram()
        for v in [0.00005, 0.0003, 0.0003, 0.2, 30, -1, .nan, .infinity] { h.observe(v) }
        #expect(h.count == 8)
        let cumulative = h.cumulative
        // -1, NaN and infinity count as 0 (the first bucket), with 0.00005.
        #expect(cumulative.first?.count == 4)
        #expect(cumulative.first(where: { $0.bound == 0.0005 })?.count == 6)
        #expect(cumulative.first(where: { $0.bound == 0.25 })?.count == 7)
        #expect(cumulative.last?.count == 7)
        #expect(h.overflow == 1)
        #expect(abs(h.sum - (0.00005 + 0.0006 + 0.2 + 30)) < 1e-9)
        #expect(zip(cumulative, cumulative.dropFirst()).allSatisfy { $0.count <= $1.count })
    }

    @Test("label values are escaped; every family has HELP and TYPE; counters end in _total")
    func exposition() {
        var snapshot = EngineMetrics.Snapshot()
        snapshot.fixes.accepted = 7
        snapshot.fixes.rejected[.implausibleJump] = 2
        snapshot.events = ["enter": 3]
        snapshot.lastBeat = 0
        let health = EngineHealth(snapshot, now: 1, stallLimit: 5)
        var report = MetricsReport(
            version: "1.2\"3\\\n", started: Date(timeIntervalSince1970: 10), engine: snapshot, health: health)
        report.sinks = [(id: "a\"b", connected: true, lag: 4)]
        let text = PrometheusText.render(report)
        #expect(text.contains(#"geofence_build_info{version="1.2\"3\\\n"} 1"#), "\(text)")
        #expect(text.contains(#"geofence_fixes_total{result="accepted"} 7"#))
        #expect(text.contains(#"geofence_fixes_total{reason="implausible-jump",result="refused"} 2"#))
        #expect(text.contains(#"geofence_fixes_total{reason="stale",result="refused"} 0"#))
        #expect(text.contains(#"geofence_events_total{type="enter"} 3"#))
        #expect(text.contains(#"geofence_events_total{type="exit"} 0"#))
        #expect(text.contains(#"geofence_sink_lag_events{sink="a\"b"} 4"#))
        #expect(text.contains(#"geofence_fix_commit_seconds_bucket{le="+Inf"} 0"#))
        #expect(text.contains("geofence_healthy 1\n"))
        // Each family is declared once, before its samples.
        var declared = Set<String>()
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# TYPE ") {
                let name = String(line.split(separator: " ")[2])
                #expect(declared.insert(name).inserted, "declared twice: \(name)")
            } else if !line.hasPrefix("#") {
                let name = String(line.prefix { $0 != "{" && $0 != " " })
                let family = ["_bucket", "_sum", "_count"].reduce(name) {
                    $0.hasSuffix($1) && declared.contains(String($0.dropLast($1.count)))
                        ? String($0.dropLast($1.count)) : $0
                }
                #expect(declared.contains(family), "a sample before its family: \(line)")
            }
        }
    }

    @Test("addresses: IP and port, [IPv6]:port, a port alone for loopback; host names and bad ports refused")
    func addresses() throws {
        #expect(try MetricsAddress(parsing: "127.0.0.1:9464") == MetricsAddress(host: "127.0.0.1", port: 9464))
        #expect(try MetricsAddress(parsing: "9464") == MetricsAddress(host: "127.0.0.1", port: 9464))
        #expect(try MetricsAddress(parsing: "localhost:1") == MetricsAddress(host: "127.0.0.1", port: 1))
        #expect(try MetricsAddress(parsing: "[::1]:9464") == MetricsAddress(host: "::1", port: 9464))
        #expect(try MetricsAddress(parsing: "0.0.0.0:0").description == "0.0.0.0:0")
        #expect(try MetricsAddress(parsing: "[::1]:80").description == "[::1]:80")
        for bad in [
            "", "example.com:80", "127.0.0.1:65536", "127.0.0.1:-1", "[::1]", "[::1]80", "1.2.3:4", "127.0.0.1:x",
        ] {
            #expect(throws: MetricsAddress.Invalid.self, "\(bad)") { try MetricsAddress(parsing: bad) }
        }
    }

    @Test("health: a loop that stops beating, a store that refuses, a silent or disconnected source")
    func health() {
        let clock = Mutex(100.0)
        let metrics = EngineMetrics(stallLimit: 5, monotonic: { clock.withLock { $0 } })
        #expect(metrics.health().problems == ["monitor: not started"])
        metrics.beat()
        #expect(metrics.health().ok)
        clock.withLock { $0 = 104.9 }
        #expect(metrics.health().ok)
        clock.withLock { $0 = 106 }
        #expect(!metrics.health().monitorOK)
        #expect(metrics.health().problems == ["monitor: its loop has not run for 6.0 s"])
        metrics.beat()
        metrics.publish {
            $0.storeProblem = "disk full"
            $0.liveness = .silent
            $0.livenessReason = "no sky"
        }
        let h = metrics.health()
        #expect(h.monitorOK)
        #expect(h.problems == ["store: refuses writes (disk full)", "source: silent (no sky)"])
        metrics.publish {
            $0.storeProblem = nil
            $0.sourceConnected = false
            $0.sourceProblem = "gpsd is not reachable"
        }
        #expect(metrics.health().problems == ["source: not connected (gpsd is not reachable)"])
        metrics.publish {
            $0.sourceConnected = true
            $0.liveness = .receiving
        }
        #expect(metrics.health().ok)
    }
}

@Suite("fixes that arrive and are all refused")
struct RefusalWatchTests {
    static func stats(accepted: Int, _ refused: [FixRejection: Int]) -> FixFilterStatistics {
        var s = FixFilterStatistics()
        s.accepted = accepted
        s.rejected = refused
        return s
    }

    @Test("the advice names the main reason in an operator's words, with the age of a stale fix")
    func advice() throws {
        let stale = try #require(RefusalAdvice(refused: [.stale: 64], age: 15 * 86_400 + 3600))
        #expect(
            stale.text == "fixes arrive but are 15 days old: check the receiver's clock or gpsd's time (all 64 refused)"
        )
        let future = try #require(RefusalAdvice(refused: [.future: 3, .duplicate: 1], age: -7200))
        #expect(future.reason == .future)
        #expect(future.text.hasPrefix("fixes arrive dated 2 h ahead of this machine's clock"))
        #expect(future.text.hasSuffix("(3 of 4 refused)"))
        #expect(RefusalAdvice(refused: [:], age: nil) == nil)
        #expect(RefusalAdvice(refused: [.stale: 0], age: nil) == nil)
        // Any age, however absurd, gives words and no trap.
        for age in [Double.infinity, -.infinity, .nan, 1e300, -1e300, 0] {
            #expect(RefusalAdvice(refused: [.stale: 1], age: age) != nil)
        }
    }

    @Test("silent at the first-fix deadline, not before; restored by the next accepted fix; lost after staleness")
    func watch() throws {
        let start = Date(timeIntervalSince1970: 1_000_000)
        var watch = RefusalWatch(liveness: .init(firstFixDeadline: 60, stalenessLimit: 10), startedAt: start)
        watch.lastAge = 15 * 86_400
        #expect(watch.advance(Self.stats(accepted: 0, [.stale: 5]), at: start.addingTimeInterval(59)) == .none)
        guard
            case .refusing(.silent, let advice) = watch.advance(
                Self.stats(accepted: 0, [.stale: 9]), at: start.addingTimeInterval(60))
        else {
            Issue.record("not silent at the deadline")
            return
        }
        #expect(advice.reason == .stale && advice.count == 9)
        // Said once.
        #expect(watch.advance(Self.stats(accepted: 0, [.stale: 20]), at: start.addingTimeInterval(70)) == .none)
        #expect(watch.advance(Self.stats(accepted: 1, [.stale: 20]), at: start.addingTimeInterval(71)) == .accepting)
        // Accepted fixes, then only refusals (counted from the last acceptance) for the staleness limit: lost.
        #expect(watch.advance(Self.stats(accepted: 5, [.stale: 20]), at: start.addingTimeInterval(72)) == .none)
        #expect(
            watch.advance(Self.stats(accepted: 5, [.stale: 20, .implausibleJump: 4]), at: start.addingTimeInterval(81))
                == .none)
        guard
            case .refusing(.lost, let jumps) = watch.advance(
                Self.stats(accepted: 5, [.stale: 20, .implausibleJump: 6]), at: start.addingTimeInterval(82))
        else {
            Issue.record("not lost after the staleness limit")
            return
        }
        #expect(jumps.reason == .implausibleJump && jumps.total == 6)
    }

    @Test("nothing refused, or a source that already said it is silent: no word")
    func quiet() {
        let start = Date(timeIntervalSince1970: 0)
        var watch = RefusalWatch(liveness: .init(firstFixDeadline: 1, stalenessLimit: 1), startedAt: start)
        #expect(watch.advance(Self.stats(accepted: 0, [:]), at: start.addingTimeInterval(5)) == .none)
        #expect(
            watch.advance(Self.stats(accepted: 0, [.noFix: 5]), at: start.addingTimeInterval(6), sourceQuiet: true)
                == .none)
        #expect(!watch.refusing)
    }
}

@Suite("MQTT vehicle naming")
struct MQTTVehicleNamingUnitTests {
    @Test("payload keeps the fix's name; topic and level:N name it by the topic; a missing level is bad-device")
    func rename() throws {
        #expect(MQTTVehicleNaming(parsing: "payload") == .payload)
        #expect(MQTTVehicleNaming(parsing: "topic") == .topic)
        #expect(MQTTVehicleNaming(parsing: "level:2") == .level(2))
        for bad in ["level:0", "level:-1", "level:x", "level:", "level:65", "name", ""] {
            #expect(MQTTVehicleNaming(parsing: bad) == nil, "\(bad)")
        }
        let naming = try #require(MQTTVehicleNaming(parsing: "level:3"))
        let fix = Fix(subject: "/dev/ttyACM0", time: Date(), mode: .threeD, latitude: 1, longitude: 1)
        guard case .malformed(let problem) = naming.rename(fix, topic: "gpsfleet/truck-1") else {
            Issue.record("a missing level gave a name")
            return
        }
        #expect(problem.kind == MalformedLine.Kind.badDevice)
        guard case .tpv(let named) = MQTTVehicleNaming.topic.rename(fix, topic: "a/b") else {
            Issue.record("the topic gave no name")
            return
        }
        #expect(named.subject == "a/b")
        #expect(MQTTVehicleNaming.payload.rename(fix, topic: "a/b") == nil)
    }
}
