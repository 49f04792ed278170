import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `sink add --format homeassistant` against a real, private Mosquitto broker and a real engine: the retained
/// discovery configs, states and attributes, checked field by field against Home Assistant's documented MQTT
/// discovery schema; a vehicle in two regions; regions removed; an engine restart; a pruned vehicle cleared.
@Suite(
    "Home Assistant discovery against a private broker", .serialized,
    .enabled(if: MosquittoBroker.isAvailable, "\(MosquittoBroker.unavailableReason)"))
struct HomeAssistantDiscoveryTests {
    static let base = 1_796_000_000.0
    /// van-2's fixes are this much older than the others', so that `vehicles --prune` can take it alone.
    static let vanAge = 40 * 86_400.0

    /// A TPV of `device` `metresEast` of the depot (48.85, 2.35) at `seconds` after `base`.
    static func tpv(_ device: String, east metresEast: Double, at seconds: Double) -> String {
        let time = TimestampParser.format(Date(timeIntervalSince1970: base + seconds))
        let lon = MQTTSourceTests.longitude(metresEast)
        return #"{"class":"TPV","device":"\#(device)","mode":3,"time":"\#(time)","lat":48.85,"lon":\#(lon),"eph":5}"#
    }

    /// The retained messages under `filter` now, by topic (what Home Assistant receives when it subscribes).
    static func retained(_ broker: MosquittoBroker, _ filter: String) throws -> [String: String] {
        var out: [String: String] = [:]
        for (topic, payload) in MQTTSinkTests.split(
            try broker.receive(
                clientID: "ha-\(UUID().uuidString.prefix(8))", topic: filter, persistent: false, seconds: 1))
        {
            out[topic] = payload
        }
        return out
    }

    /// Home Assistant's MQTT device tracker discovery keys (https://www.home-assistant.io/integrations/device_tracker.mqtt/,
    /// "Configuration Variables"; `device` and `origin` as in https://www.home-assistant.io/integrations/mqtt/):
    /// every key the config may hold. Checked: each key of a config is one of them.
    static let documentedKeys: Set<String> = [
        "availability", "availability_mode", "availability_template", "availability_topic", "device", "icon",
        "default_entity_id", "json_attributes_template", "json_attributes_topic", "name", "origin", "payload_available",
        "payload_home", "payload_not_available", "payload_not_home", "payload_reset", "platform", "qos",
        "source_type", "state_topic", "unique_id", "value_template",
    ]
    static let documentedDeviceKeys: Set<String> = [
        "configuration_url", "connections", "hw_version", "identifiers", "manufacturer", "model", "model_id", "name",
        "serial_number", "suggested_area", "sw_version", "via_device",
    ]

    /// Checks one vehicle's discovery config field by field; returns its object id.
    static func checkConfig(_ topic: String, _ payload: String, vehicle: String, levels: String) -> String? {
        // Discovery topic: <discovery_prefix>/<component>/[<node_id>/]<object_id>/config, object_id of
        // [a-zA-Z0-9_-] only (https://www.home-assistant.io/integrations/mqtt/#discovery-topic).
        let parts = topic.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        #expect(parts.count == 4 && parts[0] == "homeassistant" && parts[1] == "device_tracker" && parts[3] == "config")
        guard parts.count == 4 else { return nil }
        let objectID = parts[2]
        #expect(
            !objectID.isEmpty
                && objectID.utf8.allSatisfy {
                    (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) || $0 == 95 || $0 == 45
                }, "\(objectID)")
        guard let config = try? JSON.parse(payload).objectValue else {
            Issue.record("the config is not a JSON object: \(payload)")
            return nil
        }
        #expect(Set(config.keys).isSubset(of: documentedKeys), "\(Set(config.keys).subtracting(documentedKeys))")
        // name null: the entity takes the device's name (the vehicle's).
        #expect(config["name"] == .null)
        // unique_id (required for discovery with a device) = object_id, as the discovery docs advise.
        #expect(config["unique_id"]?.stringValue == objectID)
        // default_entity_id, not the object_id key Home Assistant deprecated in 2025.10 (to stop working in 2026.4)
        // (its log: "uses the deprecated option `object_id` to set the default entity id").
        #expect(config["default_entity_id"]?.stringValue == "device_tracker." + objectID)
        #expect(config["object_id"] == nil)
        #expect(config["state_topic"]?.stringValue == "geofence/\(levels)/tracker/state")
        #expect(config["json_attributes_topic"]?.stringValue == "geofence/\(levels)/tracker/attributes")
        // payload_home / payload_not_home: Home Assistant's own defaults, home and not_home.
        #expect(config["payload_home"]?.stringValue == "home")
        #expect(config["payload_not_home"]?.stringValue == "not_home")
        // source_type: one of gps, router, bluetooth, bluetooth_le.
        #expect(config["source_type"]?.stringValue == "gps")
        // availability_topic with payload_available / payload_not_available: the engine's status topic.
        #expect(config["availability_topic"]?.stringValue == "geofence/engine/status")
        #expect(config["payload_available"]?.stringValue == "online")
        #expect(config["payload_not_available"]?.stringValue == "offline")
        #expect(config["availability"] == nil, "availability and availability_topic must not be used together")
        // device: identifiers (a list of strings) and name; origin: name.
        let device = config["device"]?.objectValue ?? [:]
        #expect(Set(device.keys).isSubset(of: documentedDeviceKeys), "\(device)")
        #expect(device["identifiers"] == .array([.string(objectID)]))
        #expect(device["name"]?.stringValue == vehicle)
        #expect(device["manufacturer"]?.stringValue == "geofence")
        #expect(config["origin"]?["name"]?.stringValue == "geofence")
        return objectID
    }

    @Test("one tracker per vehicle, its state the smallest region it is in; removals, restart and pruning")
    func discovery() async throws {
        let cli = try CLI()
        defer { cli.dir.remove() }
        let broker = try cli.broker(settings: ["max_queued_messages 0"])
        for args in [
            ["--id", "depot", "--name", "North depot", "--radius", "100"], ["--id", "yard", "--radius", "300"],
        ] {
            let added = try cli.run(["add", "--lat", "48.85", "--lon", "2.35"] + args)
            #expect(added.status == 0, "\(added.stderr)")
        }
        let url = "mqtt://127.0.0.1:\(broker.port)"
        let sink = try cli.run("sink", "add", "--id", "ha", "--mqtt", url, "--format", "homeassistant")
        #expect(sink.status == 0, "\(sink.stderr)")
        #expect(sink.stdout == "Added sink \"ha\": all events to \(url) on geofence/{subject}/tracker\n")
        let listed = try JSON.parse(try cli.run("sink", "list", "--json").stdout).arrayValue?.first
        #expect(listed?["format"]?.stringValue == "homeassistant")
        #expect(listed?["discoveryPrefix"]?.stringValue == "homeassistant")
        #expect(listed?["stateTopic"] == .null, "no per-pair states unless asked for")

        // alice/phone+1 stops at the centre (inside both regions), van-2 in the yard only, truck-1 drives
        // through and out.
        let (daemon, feed) = try MQTTSinkTests.fifoDaemon(cli)
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        var lines: [String] = []
        for step in 0...16 {
            let east = 400 - 50 * Double(step)
            if step <= 8 { lines.append(Self.tpv("alice/phone+1", east: east, at: Double(5 * step))) }
            if step <= 5 { lines.append(Self.tpv("van-2", east: east, at: Double(5 * step) - Self.vanAge)) }
            lines.append(Self.tpv("truck-1", east: east, at: Double(5 * step)))
        }
        feed.send(lines)
        let vehicles = ["alice/phone+1": "alice%2Fphone%2B1", "van-2": "van-2", "truck-1": "truck-1"]
        let expected = ["alice/phone+1": "North depot", "van-2": "yard", "truck-1": "not_home"]
        var states: [String: String] = [:]
        var configs: [String: String] = [:]
        let settled = try await Wait.until(timeout: 30, every: .milliseconds(200)) {
            states = try Self.retained(broker, "geofence/+/tracker/state")
            configs = try Self.retained(broker, "homeassistant/#")
            return configs.count == 3
                && expected.allSatisfy { states["geofence/\(vehicles[$0.key] ?? "")/tracker/state"] == $0.value }
        }
        #expect(settled, "\(states) \(configs) \(daemon.log)")

        // Each config, field by field; one object id per vehicle, the names with / and + made safe.
        var objectIDs: [String: String] = [:]
        for (vehicle, levels) in vehicles {
            guard
                let (topic, payload) = configs.first(where: {
                    (try? JSON.parse($0.value))?["device"]?["name"]?.stringValue == vehicle
                })
            else {
                Issue.record("no config for \(vehicle): \(configs)")
                continue
            }
            objectIDs[vehicle] = Self.checkConfig(topic, payload, vehicle: vehicle, levels: levels)
        }
        #expect(Set(objectIDs.values).count == 3, "\(objectIDs)")
        #expect(objectIDs["alice/phone+1"]?.hasPrefix("geofence_alice_phone_1_") == true, "\(objectIDs)")

        // Attributes: the last fix the store has for each vehicle (latitude, longitude, gps_accuracy).
        let attributes = try Self.retained(broker, "geofence/+/tracker/attributes")
        for summary in try StateStore(directory: cli.stateDir).monitorState.vehicles() {
            let topic = "geofence/\(vehicles[summary.subject] ?? "?")/tracker/attributes"
            let got = attributes[topic].flatMap { try? JSON.parse($0).objectValue }
            #expect(got.map { Set($0.keys) } == ["latitude", "longitude", "gps_accuracy"], "\(attributes)")
            #expect(got?["latitude"]?.doubleValue == summary.lastFix?.latitude)
            #expect(got?["longitude"]?.doubleValue == summary.lastFix?.longitude)
            #expect(got?["gps_accuracy"]?.doubleValue == summary.lastFix?.accuracy)
        }

        // The depot removed: alice is in the yard only; the yard removed too: nobody is anywhere.
        #expect(try cli.run("remove", "depot").status == 0)
        var after: [String: String] = [:]
        #expect(
            try await Wait.until(timeout: 15, every: .milliseconds(200)) {
                after = try Self.retained(broker, "geofence/+/tracker/state")
                return after["geofence/alice%2Fphone%2B1/tracker/state"] == "yard"
            }, "\(after)")
        #expect(try cli.run("remove", "yard").status == 0)
        #expect(
            try await Wait.until(timeout: 15, every: .milliseconds(200)) {
                after = try Self.retained(broker, "geofence/+/tracker/state")
                return after.count == 3 && after.values.allSatisfy { $0 == "not_home" }
            }, "\(after)")

        // A restart publishes every tracker again, the same (a watcher's session receives them).
        let before = try Self.retained(broker, "homeassistant/#")
        try broker.makeSession(clientID: "watcher", topic: "homeassistant/#")
        feed.close()
        #expect(await daemon.stop() != nil)
        let (again, feed2) = try MQTTSinkTests.fifoDaemon(cli, log: "again.log")
        #expect(await again.waitForLog("sink ha: connected", timeout: 10), "\(again.log)")
        var republished: [(topic: String, payload: String)] = []
        #expect(
            try await Wait.until(timeout: 15, every: .milliseconds(200)) {
                republished += MQTTSinkTests.split(
                    try broker.receive(clientID: "watcher", topic: "homeassistant/#", seconds: 1))
                return Set(republished.map(\.topic)).count == 3
            }, "\(republished)")
        #expect(Dictionary(republished, uniquingKeysWith: { _, b in b }) == before)
        feed2.close()
        #expect(await again.stop() != nil)

        // van-2 pruned while the engine is stopped: the next start clears its tracker (empty retained messages).
        let cutoff = Date().timeIntervalSince1970 - (Self.base - Self.vanAge / 2)
        let pruned = try cli.run("vehicles", "--prune", "\(Int(cutoff))s", "--json")
        #expect(pruned.stdout.contains("van-2") && !pruned.stdout.contains("truck-1"), "\(pruned.stdout)")
        let (third, feed3) = try MQTTSinkTests.fifoDaemon(cli, log: "third.log")
        defer { feed3.close() }
        #expect(await third.waitForLog("sink ha: connected", timeout: 10), "\(third.log)")
        var left: [String: String] = [:]
        #expect(
            try await Wait.until(timeout: 15, every: .milliseconds(200)) {
                left = try Self.retained(broker, "#")
                return !left.keys.contains { $0.contains("van-2") } && left.keys.contains { $0.contains("truck-1") }
                    && !left.values.contains { $0.contains("\"van-2\"") }
            }, "\(left)")
        #expect(left.filter { $0.key.hasPrefix("homeassistant/") }.count == 2, "\(left)")
        #expect(await third.waitForLog("cleared the Home Assistant trackers of 1 vehicle(s) gone", timeout: 5))
        #expect(try StateStore(directory: cli.stateDir).sinks.trackers(sink: "ha") == ["alice/phone+1", "truck-1"])
        #expect(await third.stop() != nil)
    }

    @Test("a broker that lost its retained messages gets every tracker back when the sink reconnects")
    func brokerLoss() async throws {
        let cli = try CLI()
        defer { cli.dir.remove() }
        let broker = try cli.broker()
        #expect(try cli.run("add", "--id", "depot", "--lat", "48.85", "--lon", "2.35", "--radius", "100").status == 0)
        let url = "mqtt://127.0.0.1:\(broker.port)"
        #expect(try cli.run("sink", "add", "--id", "ha", "--mqtt", url, "--format", "homeassistant").status == 0)
        let (daemon, feed) = try MQTTSinkTests.fifoDaemon(cli)
        defer { feed.close() }
        #expect(await daemon.waitForLog("running:", timeout: 10), "\(daemon.log)")
        feed.send((0...8).map { Self.tpv("truck-1", east: 400 - 50 * Double($0), at: Double(5 * $0)) })
        let state = "geofence/truck-1/tracker/state"
        var seen: [String: String] = [:]
        #expect(
            try await Wait.until(timeout: 20, every: .milliseconds(200)) {
                seen = try Self.retained(broker, "#")
                return seen[state] == "depot"
            }, "\(seen)")
        let config = seen.filter { $0.key.hasPrefix("homeassistant/") }
        #expect(config.count == 1)

        // The broker stops and comes back without its persistence file: no retained message is left.
        broker.stop()
        try FileManager.default.removeItem(atPath: cli.dir.file("broker") + "/mosquitto.db")
        try broker.start()
        #expect(await daemon.waitForLog("sink ha: connected again", timeout: 20), "\(daemon.log)")
        #expect(
            try await Wait.until(timeout: 20, every: .milliseconds(200)) {
                seen = try Self.retained(broker, "#")
                return seen[state] == "depot" && config.allSatisfy { seen[$0.key] == $0.value }
            }, "\(seen)")

        // And it goes on: the truck drives out.
        feed.send((9...16).map { Self.tpv("truck-1", east: 400 - 50 * Double($0), at: Double(5 * $0)) })
        #expect(
            try await Wait.until(timeout: 20, every: .milliseconds(200)) {
                seen = try Self.retained(broker, state)
                return seen[state] == "not_home"
            }, "\(seen)")
        #expect(await daemon.stop() != nil)
    }
}
