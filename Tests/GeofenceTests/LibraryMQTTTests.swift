import Foundation
import Geofence
import GeofenceCore
import GeofenceTestSupport
import Testing

/// The library with an MQTT source against a real, private broker.
@Suite(
    "library: MQTT source", .serialized,
    .enabled(if: MosquittoBroker.isAvailable, "\(MosquittoBroker.unavailableReason)"))
struct LibraryMQTTTests {
    /// A source that acknowledges once fixes are committed must hear the monitor's commit mark in the library
    /// as in the daemon: without it no message is ever acknowledged, and the broker stops sending once its
    /// window of unacknowledged messages (mosquitto's `max_inflight_messages`, here 10) is full.
    @Test func acknowledgingAfterCommitKeepsMessagesComing() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let brokerDirectory = dir.path + "/broker"
        try FileManager.default.createDirectory(atPath: brokerDirectory, withIntermediateDirectories: true)
        let broker = try MosquittoBroker(directory: brokerDirectory, settings: ["max_inflight_messages 10"])
        defer { broker.stop() }
        let address = try MQTTAddress(parsing: "mqtt://127.0.0.1:\(broker.port)/fleet/#")
        let source = MQTTSource(address: address, clientID: "library-commit", acknowledgement: .commit)
        #expect(source.acknowledgesAfterCommit)
        try source.connect()
        let monitor = try GeofenceMonitor(source: source, store: .sqlite(directory: dir.path + "/state"))
        try await monitor.add(
            Region(id: "depot", center: Coordinate(latitude: 48.85, longitude: 2.35), radius: 100))
        let session = Task { for try await _ in monitor.events() {} }
        defer { session.cancel() }
        let count = 40
        let now = Date()
        let messages = (0..<count).map { i in
            let time = TimestampParser.format(now.addingTimeInterval(Double(i) * 0.001 - 1))
            return #"{"class":"TPV","device":"truck-\#(i)","mode":3,"time":"\#(time)","lat":48.85,"lon":2.35,"eph":5}"#
        }
        #expect(try broker.publish("fleet/trucks", messages) == 0)
        var usable = 0
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline {
            usable = try await monitor.status().sourceStatus?.usableFixes ?? 0
            if usable == count { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(usable == count, "\(usable) of \(count) messages reached the monitor")
    }
}
