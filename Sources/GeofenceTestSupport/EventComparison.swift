import Foundation
import GeofenceCore

/// What makes two region events the same event for issue 26's acceptance: the vehicle, the region, the type
/// and the time of the fix that caused it (not the id, which each engine draws afresh, nor the distance).
package struct EventKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    package let subject: String
    package let region: String
    package let type: String
    /// The fix time as the event JSON has it (`2026-12-03T16:00:07.000Z`).
    package let time: String

    package init(subject: String, region: String, type: String, time: String) {
        self.subject = subject
        self.region = region
        self.type = type
        self.time = time
    }

    /// The region event types of Docs/events.md.
    package static let types: Set<String> = ["determined", "enter", "exit", "dwell", "expired"]

    /// The key of an event as Docs/events.md shapes it; nil for anything else (a state event, a marker).
    package init?(json: JSONValue) {
        guard let type = json["type"]?.stringValue, Self.types.contains(type),
            let region = json["region"]?.stringValue, let time = json["time"]?.stringValue
        else { return nil }
        // `expired` names no subject.
        self.init(subject: json["subject"]?.stringValue ?? "", region: region, type: type, time: time)
    }

    /// The key of one JSON line (`replay`'s output); nil when it is not a region event.
    package init?(line: some StringProtocol) {
        guard let value = try? JSON.parse(String(line)) else { return nil }
        self.init(json: value)
    }

    package static func < (a: EventKey, b: EventKey) -> Bool {
        (a.subject, a.time, a.region, a.type) < (b.subject, b.time, b.region, b.type)
    }

    package var description: String { "\(subject) \(type) \(region) at \(time)" }
}

/// Two collections of events compared as multisets of `EventKey`: what the expected side has that the actual
/// lacks (`missing`), and what the actual has beyond the expected (`extra`: a double counts once extra).
package struct EventComparison: Sendable {
    package let expectedCount: Int
    package let actualCount: Int
    /// Events short on the actual side, with how many times each is short; sorted by vehicle, then time.
    package let missing: [(key: EventKey, count: Int)]
    /// Events over on the actual side, with how many times each is over; sorted likewise.
    package let extra: [(key: EventKey, count: Int)]

    package init(expected: some Sequence<EventKey>, actual: some Sequence<EventKey>) {
        var balance: [EventKey: Int] = [:]
        var expectedCount = 0
        var actualCount = 0
        for key in expected {
            balance[key, default: 0] += 1
            expectedCount += 1
        }
        for key in actual {
            balance[key, default: 0] -= 1
            actualCount += 1
        }
        self.expectedCount = expectedCount
        self.actualCount = actualCount
        missing = balance.filter { $0.value > 0 }.map { (key: $0.key, count: $0.value) }.sorted { $0.key < $1.key }
        extra = balance.filter { $0.value < 0 }.map { (key: $0.key, count: -$0.value) }.sorted { $0.key < $1.key }
    }

    /// Nothing missing and nothing extra.
    package var isEqual: Bool { missing.isEmpty && extra.isEmpty }

    /// The missing and extra events, `limit` of each at most, one per line, for a test's failure message.
    package func report(limit: Int = 30) -> String {
        var lines = [
            "expected \(expectedCount) events, got \(actualCount): "
                + "\(missing.reduce(0) { $0 + $1.count }) missing, \(extra.reduce(0) { $0 + $1.count }) extra"
        ]
        for (name, list) in [("missing", missing), ("extra", extra)] where !list.isEmpty {
            lines.append("\(name) (\(list.count) distinct):")
            for (key, count) in list.prefix(max(0, limit)) {
                lines.append("  \(key)" + (count > 1 ? " (\(count) times)" : ""))
            }
            if list.count > limit { lines.append("  ... and \(list.count - limit) more") }
        }
        return lines.joined(separator: "\n")
    }
}

/// The events one engine makes of a set of fixes: `geofence import REGIONS` then `geofence replay FIXES`, with
/// the built binary, in a fresh state directory and a control socket path there (so no running engine of the
/// machine's is asked). Run it once the last fix time has passed (an engine refuses fixes from the future).
///
/// The replay stores every event as it goes, so on a disk it waits for the disk: 60,000 fixes of 10,000
/// vehicles (48,625 events) took 150 s on this machine's disk and 28 s on tmpfs (debug build). Without a
/// `stateDirectory`, it uses a fresh one in `/dev/shm` (the system's temporary directory where there is no
/// `/dev/shm`), removed afterwards.
package enum ExpectedEvents {
    /// Each event `replay` printed, as a key, in its order.
    package static func replay(fixes: String, regions: String, stateDirectory: String? = nil) throws -> [EventKey] {
        try replayLines(fixes: fixes, regions: regions, stateDirectory: stateDirectory).compactMap {
            EventKey(line: $0)
        }
    }

    /// Each event `replay` printed, its JSON line (Docs/events.md), in its order.
    package static func replayLines(fixes: String, regions: String, stateDirectory given: String? = nil) throws
        -> [String]
    {
        var scratch: TemporaryDirectory?
        defer { scratch?.remove() }
        let stateDirectory: String
        if let given {
            stateDirectory = given
        } else {
            var isDirectory: ObjCBool = false
            let memory =
                FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isDirectory) && isDirectory.boolValue
            let made = try TemporaryDirectory("geofence-replay", in: memory ? "/dev/shm" : nil)
            scratch = made
            stateDirectory = made.path
        }
        try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
        let common = ["--state-dir", stateDirectory, "--socket", stateDirectory + "/no-engine.sock"]
        let imported = try GeofenceBinary.run(["import"] + common + [regions])
        guard imported.status == 0 else {
            throw GPSDHarness.Failure.startFailed("geofence import \(regions): \(imported.stderr)")
        }
        let replayed = try GeofenceBinary.run(["replay"] + common + [fixes])
        guard replayed.status == 0 else {
            throw GPSDHarness.Failure.startFailed("geofence replay \(fixes): \(replayed.stderr)")
        }
        return replayed.lines
    }
}
