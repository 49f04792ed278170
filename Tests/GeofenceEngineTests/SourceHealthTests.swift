import Foundation
import GeofenceCore
import GeofenceEngine
import Testing

/// The source's reports turned into the engine's account of its source, with no store and no log: what is
/// said, which events, whether location is available, what `status` reads.
@Suite struct SourceHealthTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    static func health(status: SourceStatus? = nil) -> SourceHealth {
        SourceHealth(label: "gpsd at 127.0.0.1:2947", sourceStatus: { status }, liveness: .init(), startedAt: start)
    }

    @Test("a disconnection is a warning once per reason, then debug lines; connecting again clears it")
    func disconnections() {
        var health = Self.health()
        let down = SourceDown(reason: "gpsd is not reachable", attempt: 1, retryIn: .milliseconds(1500))
        let first = health.report(.down(down))
        #expect(first.log.map(\.level) == [.warning])
        #expect(first.log.map(\.line) == ["gpsd is not reachable; retrying in 1.5 s"])
        #expect(first.records == [.disconnected("gpsd is not reachable")])
        #expect(first.events.isEmpty && first.locationAvailable == nil)
        #expect(health.condition.connected == false && health.condition.reason == "gpsd is not reachable")
        let again = health.report(.down(SourceDown(reason: "gpsd is not reachable", attempt: 2, retryIn: .seconds(3))))
        #expect(again.log.map(\.level) == [.debug])
        #expect(again.log.map(\.line) == ["gpsd is not reachable; retry 2 in 3.0 s"])
        let up = health.report(.up)
        #expect(up.records == [.connected] && up.log.map(\.line) == ["connected to gpsd at 127.0.0.1:2947"])
        #expect(health.condition.connected == true && health.condition.reason == nil)
        #expect(health.report(.down(down)).log.map(\.level) == [.warning], "a new episode is said again")
    }

    @Test("silent and restored carry one Liveness to the condition and the record, and switch location")
    func liveness() {
        var health = Self.health()
        #expect(health.condition.liveness == .awaitingFirstFix)
        _ = health.report(.down(SourceDown(reason: "gpsd is not reachable", retryIn: .seconds(1))))
        let silent = health.report(.liveness(.silent))
        let reason = "no usable fix since the source started: gpsd is not reachable"
        #expect(silent.events == [SourceHealth.Draft(type: .source, state: "silent", reason: reason)])
        #expect(silent.locationAvailable == false)
        #expect(silent.records == [.liveness(.silent)])
        #expect(health.condition.liveness == .silent && health.condition.livenessReason == reason)
        let restored = health.report(.liveness(.restored))
        #expect(restored.events.map(\.state) == ["restored"])
        #expect(restored.locationAvailable == true)
        #expect(restored.records == [.liveness(.receiving)], "restored is receiving again, as a value")
        #expect(health.condition.liveness == .receiving && health.condition.livenessReason == nil)
        let lost = health.report(.liveness(.lost))
        #expect(lost.events.map(\.reason) == ["usable fixes stopped arriving"])
        #expect(health.condition.liveness == .lost)
    }

    @Test("a fleet source's own account gives the reason of its silence")
    func fleetSilence() {
        var status = SourceStatus(path: "/run/fleet.jsonl")
        status.open = true
        var health = Self.health(status: status)
        let silent = health.report(.liveness(.silent))
        #expect(
            silent.events.map(\.reason) == [
                "no usable fix since the source started: no line has arrived from /run/fleet.jsonl"
            ])
    }

    @Test("devices that come and go are events, except those of the first snapshot")
    func devices() {
        var health = Self.health()
        let first = health.report(.capabilities(CapabilitySnapshot(devices: [.init(path: "/dev/ttyACM0")])))
        #expect(first.events.isEmpty, "the first snapshot says what there is: no change")
        #expect(first.log.map(\.line) == ["device added: /dev/ttyACM0"])
        let next = CapabilitySnapshot(devices: [.init(path: "/dev/ttyUSB0", driver: "u-blox")])
        let changed = health.report(.capabilities(next))
        #expect(
            changed.events == [
                SourceHealth.Draft(type: .device, state: "added", subject: "/dev/ttyUSB0"),
                SourceHealth.Draft(type: .device, state: "removed", subject: "/dev/ttyACM0"),
            ])
        #expect(changed.log.map(\.line) == ["device added: /dev/ttyUSB0 (u-blox)", "device removed: /dev/ttyACM0"])
        #expect(changed.records == [.capabilities(next)] && health.capabilities == next)
    }

    @Test("the first usable fix makes an awaiting source receiving")
    func firstFix() {
        var health = Self.health()
        health.fixesArrived([Fix(subject: "bus", time: Self.start, mode: .threeD, latitude: 51.5, longitude: -0.12)])
        #expect(health.condition.liveness == .receiving)
    }
}
