import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Two trucks whose gpspipe TPVs both say `device: /dev/ttyACM0`, published to `gpsfleet/truck-1` and
/// `gpsfleet/truck-2`, 111 km apart: named by the payload they are one vehicle (warned once, counted); named by
/// the topic they are two, and none of their fixes is refused.
@Suite(
    "MQTT: vehicles named by the topic", .serialized,
    .enabled(if: MosquittoBroker.isAvailable, "\(MosquittoBroker.unavailableReason)"))
struct MQTTVehicleNamingTests {
    static func tpv(_ second: Int, latitude: Double) -> String {
        let time = TimestampParser.format(Date(timeIntervalSince1970: 1_796_000_000 + Double(second)))
        return
            #"{"class":"TPV","device":"/dev/ttyACM0","mode":3,"time":"\#(time)","lat":\#(latitude),"lon":2.35,"eph":5}"#
    }

    /// Publishes both trucks' fixes, interleaved as their boxes send them: 12 each, one a second.
    static func publishBoth(_ broker: MosquittoBroker) throws {
        for second in 0..<12 {
            #expect(try broker.publish("gpsfleet/truck-1", [tpv(second, latitude: 48.85)]) == 0)
            #expect(try broker.publish("gpsfleet/truck-2", [tpv(second, latitude: 49.85)]) == 0)
        }
    }

    @Test("named by the payload: one vehicle, a warning once, the count in status")
    func sharedDeviceIsWarned() async throws {
        try await withCLI { cli in
            let broker = try cli.broker()
            let daemon = try cli.daemon(["--source", "mqtt://127.0.0.1:\(broker.port)/gpsfleet/#"])
            #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
            try Self.publishBoth(broker)
            let status = try await FleetSourceTests.status(cli) { $0["data"]?["lines"]?.intValue == 24 }
            #expect(status["data"]?["sharedNames"]?.intValue == 1, "\(status)")
            let warning =
                #"vehicle "/dev/ttyACM0" arrives on more than one topic ("gpsfleet/truck-1", "gpsfleet/truck-2")"#
            #expect(daemon.log.components(separatedBy: warning).count - 1 == 1, "\(daemon.log)")
            let text = try cli.run(["status", "--wait", "1s"], environment: try FleetSourceTests.deadGPSD())
            #expect(text.stdout.contains("1 vehicle name(s) arrive on more than one topic"), "\(text.stdout)")
            _ = await daemon.stop()
        }
    }

    @Test("named by a level of the topic: two vehicles, every fix accepted, no warning")
    func levelNamesTwoVehicles() async throws {
        try await withCLI { cli in
            let broker = try cli.broker()
            let daemon = try cli.daemon([
                "--source", "mqtt://127.0.0.1:\(broker.port)/gpsfleet/#", "--mqtt-vehicle", "level:2",
            ])
            #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
            try Self.publishBoth(broker)
            let status = try await FleetSourceTests.status(cli) {
                $0["data"]?["lines"]?.intValue == 24 && $0["engine"]?["fixes"]?["accepted"]?.intValue == 24
            }
            #expect(status["engine"]?["fixes"]?["accepted"]?.intValue == 24, "\(status)")
            #expect(status["engine"]?["fixes"]?["refusedTotal"]?.intValue == 0, "\(status)")
            #expect(status["data"]?["sharedNames"] == nil)
            let vehicles = try cli.run("vehicles", "--json")
            #expect(
                vehicles.stdout.contains(#""truck-1""#) && vehicles.stdout.contains(#""truck-2""#), "\(vehicles.stdout)"
            )
            #expect(!daemon.log.contains("more than one topic"))
            _ = await daemon.stop()
        }
    }

    @Test("--mqtt-vehicle: a bad value is a usage error")
    func badValues() throws {
        try withCLI { cli in
            for bad in ["level:0", "level:x", "name", "level:"] {
                let r = try cli.run(["run", "--source", "mqtt://127.0.0.1:1/x/#", "--mqtt-vehicle", bad])
                #expect(r.status == 64, "\(bad): \(r.stderr)")
                #expect(r.stderr.contains("invalid value for --mqtt-vehicle"), "\(r.stderr)")
            }
        }
    }
}
