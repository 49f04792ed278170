import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore
import GeofenceTestSupport
import Synchronization
import Testing

/// The MQTT source's writer of waypoint regions against a real SQLite file: the vehicle a waypoints topic
/// names, and a message that finds the store locked (a long import) waits for it instead of being lost.
@Suite("OwnTracks region writer")
struct OwnTracksRegionWriterTests {
    static let waypoint = try! JSON.parse(
        Array(#"{"_type":"waypoint","desc":"Home","lat":51.5,"lon":-0.12,"rad":100,"tst":1700000000}"#.utf8))

    @Test("the vehicle of a waypoints topic is that of the phone's locations, as --mqtt-vehicle names it")
    func subjects() throws {
        let cases: [(String, MQTTVehicleNaming, String?)] = [
            ("owntracks/alice/phone/waypoint", .payload, "alice/phone"),
            ("owntracks/alice/phone/waypoints", .payload, "alice/phone"),
            ("owntracks/alice/phone", .payload, "alice/phone"),
            ("fleet/van-2/waypoints", .payload, "fleet/van-2"),
            ("owntracks/alice/phone/waypoints", .topic, "owntracks/alice/phone"),
            ("owntracks/alice/phone/waypoint", .level(3), "phone"),
            ("owntracks/alice/phone/waypoint", .level(4), nil),
            ("owntracks/a\u{202E}b/phone/waypoint", .payload, nil),
        ]
        for (topic, naming, expected) in cases {
            let got = try? OwnTracksRegionWriter.subject(topic: topic, naming: naming).get()
            #expect(got == expected, "\(topic) \(naming)")
        }
    }

    @Test("a waypoint that finds the store's write lock held longer than its busy timeout waits for it")
    func waitsForTheLock() async throws {
        try await withTemporaryDirectory("geofence-writer-tests") { directory in
            // The writer's store gives up on a lock after 50 ms; the lock is held for 600 ms.
            let store = try StateStore(directory: directory.path, options: .init(busyTimeout: .milliseconds(50)))
            let lines = Mutex<[String]>([])
            let writer = OwnTracksRegionWriter(
                store: store,
                logger: Logger(minimum: .debug) { line in
                    lines.withLock { $0.append(line) }
                })
            let holder = try DatabaseConnection(path: directory.path + "/" + StateStore.fileName)
            try holder.execute("BEGIN IMMEDIATE")
            let applying = Task.detached {
                writer.apply(Self.waypoint, topic: "owntracks/alice/phone/waypoint", naming: .payload, label: "MQTT")
            }
            try await Task.sleep(for: .milliseconds(600))
            try holder.execute("COMMIT")
            await applying.value
            #expect(try store.regions.find(id: "owntracks/alice/phone/1700000000")?.region.name == "Home")
            let said = lines.withLock { $0 }
            #expect(said.count == 1, "\(said)")
            #expect(said.first?.contains(#"OwnTracks waypoints of "alice/phone": 1 added"#) == true, "\(said)")
        }
    }

    @Test(
        "a publisher repeating refused or unchanged waypoints gets one line a minute of each, the next saying how many were not logged; every change is logged"
    )
    func floodIsLoggedOnceAMinute() async throws {
        try await withTemporaryDirectory("geofence-writer-tests") { directory in
            let store = try StateStore(directory: directory.path)
            let lines = Mutex<[String]>([])
            // A "minute" of 0.5 s, so that the test sees the line after it.
            let writer = OwnTracksRegionWriter(
                store: store, logger: Logger(minimum: .debug) { line in lines.withLock { $0.append(line) } },
                quietInterval: 0.5)
            let topic = "owntracks/alice/phone/waypoint"
            let bad = try JSON.parse(
                Array(#"{"_type":"waypoint","desc":"Home","lat":51.5,"lon":-0.12,"rad":-5,"tst":1700000000}"#.utf8))
            func said(_ text: String) -> Int { lines.withLock { $0.filter { $0.contains(text) }.count } }

            for _ in 0..<200 { writer.apply(bad, topic: topic, naming: .payload, label: "MQTT") }
            writer.apply(Self.waypoint, topic: topic, naming: .payload, label: "MQTT")
            for _ in 0..<200 { writer.apply(Self.waypoint, topic: topic, naming: .payload, label: "MQTT") }
            #expect(said("refused the OwnTracks waypoints") == 1, "\(lines.withLock { $0 })")
            #expect(said("1 added") == 1, "a change is always logged: \(lines.withLock { $0 })")
            #expect(said("1 unchanged") == 1, "\(lines.withLock { $0 })")
            // Nothing was changed by the refused ones; the region is stored once.
            #expect(try store.regions.find(id: "owntracks/alice/phone/1700000000")?.region.radius == 100)

            try await Task.sleep(for: .milliseconds(600))
            writer.apply(bad, topic: topic, naming: .payload, label: "MQTT")
            writer.apply(Self.waypoint, topic: topic, naming: .payload, label: "MQTT")
            #expect(said("; 199 more waypoint message(s) refused since the last such line, not logged") == 1)
            #expect(said("; 199 more waypoint message(s) that changed nothing since the last such line") == 1)
            #expect(lines.withLock { $0.count } == 5, "\(lines.withLock { $0 })")
        }
    }
}
