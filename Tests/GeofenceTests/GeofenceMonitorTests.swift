import Foundation
import Geofence
import GeofenceCore
import GeofenceEngine
import GeofenceStore
import GeofenceTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The library as an embedder uses it: `GeofenceMonitor` with a source, a store, and its event sequence.
@Suite struct GeofenceMonitorTests {
    /// A motorway through gates: the events `replay` makes of the same fixes are the oracle.
    static let drive = DecisionScenarios.motorway(passes: 4)

    /// What identifies an event apart from its id (made anew by each run): its JSON without the id.
    static func essence(_ json: String) -> String {
        guard var object = try? JSON.parse(json).objectValue else { return json }
        object["id"] = nil
        return JSONValue.object(object).serialized()
    }

    @Test func scriptedDriveGivesCommittedEventsInOrderAndCancellingStopsTheSource() async throws {
        let source = ScriptedSource(fixes: Self.drive.fixes)
        let monitor = try GeofenceMonitor(source: source, store: .inMemory)
        for region in Self.drive.regions { try await monitor.add(region) }
        #expect(try await monitor.regions().map(\.id) == Self.drive.regions.map(\.id))

        let received = Mutex<[GeofenceEvent]>([])
        let consumer = Task {
            for try await event in monitor.events() { received.withLock { $0.append(event) } }
        }
        // The first gate determined (outside: the others are beyond the vicinity then), then every gate entered
        // and left: 1 + 8 region events.
        let expected = 1 + Self.drive.regions.count * 2
        #expect(await eventually { received.withLock { $0.filter(\.isRegionEvent).count } >= expected })
        #expect(try await monitor.status().monitoring)
        #expect(source.starts == 1 && source.stops == 0, "the session runs while its events are consumed")

        consumer.cancel()
        _ = await consumer.result
        #expect(await eventually { source.stops >= 1 }, "cancelling the consumer stopped the source")
        #expect(await eventually { (try? await monitor.status().monitoring) == false })
        #expect(try await monitor.status().liveness == .ended, "the session is over, not yet to start")

        let events = received.withLock { $0 }.filter(\.isRegionEvent)
        #expect(events.count == expected, "\(events.map(\.json))")
        #expect(events.map(\.id) == events.map(\.id).sorted(), "ids are time-ordered, and yielded in order")
        for (k, region) in Self.drive.regions.enumerated() {
            let own = events.filter { $0.region == region.id }.map(\.type)
            #expect(own == (k == 0 ? [.determined] : []) + [.enter, .exit], "gate \(k): \(own)")
        }
        // In the order they happened, gate after gate.
        let crossings = events.filter { $0.type != .determined }.map { "\($0.region ?? "") \($0.type?.rawValue ?? "")" }
        #expect(crossings == Self.drive.regions.flatMap { ["\($0.id) enter", "\($0.id) exit"] })
        // One session per monitor: the source cannot be started again.
        await #expect(throws: GeofenceMonitor.MonitorError.sessionEnded) {
            for try await _ in monitor.events() {}
        }
    }

    @Test func eventsAreYieldedOnlyOnceCommitted() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let source = ScriptedSource(fixes: Self.drive.fixes, endsWithScript: true)
        let monitor = try GeofenceMonitor(source: source, store: .sqlite(directory: dir.path))
        for region in Self.drive.regions { try await monitor.add(region) }
        // A second reader of the same file: each event is there by the time it is yielded.
        let reader = try StateStore(directory: dir.path)
        var yielded: [GeofenceEvent] = []
        for try await event in monitor.events() {
            #expect(try reader.outbox.contains(id: event.id), "yielded before its commit: \(event.json)")
            yielded.append(event)
        }
        #expect(source.stops == 1, "the source's end ended the sequence, and the session stopped it")
        let stored = try reader.outbox.events(after: 0, limit: 10_000)
        #expect(yielded.map(\.id) == stored.map(\.id), "every committed event, in outbox order")
        #expect(yielded.filter(\.isRegionEvent).count == 1 + Self.drive.regions.count * 2)
    }

    @Test func theJSONSourceGivesTheEventsReplayMakes() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("drive.jsonl")
        try Self.drive.tpvLines.write(toFile: path, atomically: true, encoding: .utf8)

        let monitor = try GeofenceMonitor(
            source: JSONLineSource(path: path, defaultSubject: "gpsd"), store: .sqlite(directory: dir.file("embedded")))
        for region in Self.drive.regions { try await monitor.add(region) }
        var embedded: [String] = []
        for try await event in monitor.events() where event.isRegionEvent { embedded.append(Self.essence(event.json)) }

        // `geofence replay`'s pipeline on the same lines.
        let store = try StateStore(directory: dir.file("replayed"))
        for region in Self.drive.regions { try store.regions.add(region) }
        let pipeline = FixPipeline(store: store)
        try pipeline.load()
        var replayed: [String] = []
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        var lines = JSONLines(fd: fd, defaultSubject: "gpsd", skipsBlankLines: true)
        while let report = try lines.next() {
            if case .tpv(let fix) = report {
                replayed += try pipeline.process(fix).events.map {
                    Self.essence(JSONValue.object($0.json).serialized())
                }
            }
        }
        replayed += try pipeline.finish().events.map { Self.essence(JSONValue.object($0.json).serialized()) }
        #expect(!replayed.isEmpty)
        #expect(embedded == replayed)
    }

    @Test func pruningKeepsTheHandledEventAndWhatHooksOrSinksStillNeed() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = try StateStore(directory: dir.path)
        // A sink whose cursor is before every event: it holds them all until it has passed them.
        _ = try store.sinks.add(SinkDefinition(id: "behind", url: "mqtt://127.0.0.1:1", topic: "t"))
        let monitor = try GeofenceMonitor(
            source: ScriptedSource(fixes: Self.drive.fixes, endsWithScript: true), store: .sqlite(directory: dir.path))
        for region in Self.drive.regions { try await monitor.add(region) }
        var handled: [GeofenceEvent] = []
        for try await event in monitor.events() { handled.append(event) }
        let last = try #require(handled.last)
        #expect(handled.count > 5)
        await #expect(throws: GeofenceMonitor.MonitorError.unknownEvent("nope")) {
            try await monitor.pruneEvents(before: "nope")
        }

        #expect(try await monitor.pruneEvents(before: last.id) == 0, "the sink has passed none")
        let middle = handled[handled.count / 2]
        let middleSeq = try #require(try store.outbox.seq(id: middle.id))
        try store.sinks.advanceCursor("behind", to: middleSeq)
        #expect(try await monitor.pruneEvents(before: last.id) == handled.count / 2 + 1, "up to the sink's cursor")
        _ = try store.sinks.remove(ids: ["behind"])

        // A hook defined: events the hook dispatcher has not passed stay for a `geofence run` to dispatch.
        _ = try store.deliveries.addHook(GlobalHook(id: "h", events: [], command: "true", createdAt: Date()))
        #expect(try await monitor.pruneEvents(before: last.id) == 0)
        _ = try store.deliveries.removeHooks(ids: ["h"])

        // Nothing else needs them: everything before the handled event goes; it stays, to resume after.
        let left = try store.outbox.count()
        #expect(try await monitor.pruneEvents(before: last.id) == left - 1)
        #expect(try store.outbox.events(after: 0, limit: 100).map(\.id) == [last.id])
        let again = try GeofenceMonitor(
            source: ScriptedSource(fixes: [], endsWithScript: true), store: .sqlite(directory: dir.path))
        var after: [GeofenceEvent] = []
        for try await event in again.events(after: last.id) { after.append(event) }
        #expect(after.filter(\.isRegionEvent).isEmpty, "resumed after the handled event: \(after.map(\.json))")
    }

    @Test func resumingFromAnUnknownIdIsRefusedAndLeavesTheSessionUnused() async throws {
        let source = ScriptedSource(fixes: Self.drive.fixes, endsWithScript: true)
        let monitor = try GeofenceMonitor(source: source, store: .inMemory)
        for region in Self.drive.regions { try await monitor.add(region) }
        await #expect(throws: GeofenceMonitor.MonitorError.unknownEvent("nope")) {
            for try await _ in monitor.events(after: "nope") {}
        }
        #expect(source.starts == 0, "the source was not started for a session that could not begin")
        var count = 0
        for try await _ in monitor.events() { count += 1 }
        #expect(source.starts == 1 && count > 0, "the corrected call runs the session")
    }

    @Test func cancellingTheConsumerStillJudgesEveryReportTheSourceHandedOver() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        // The whole drive is handed over at once (a broker's acknowledged messages, a FIFO's lines read).
        let source = ScriptedSource(fixes: Self.drive.fixes)
        let monitor = try GeofenceMonitor(source: source, store: .sqlite(directory: dir.path))
        for region in Self.drive.regions { try await monitor.add(region) }
        let consumer = Task { () async throws -> String? in
            for try await event in monitor.events() where event.isRegionEvent { return event.id }
            return nil
        }
        #expect(try await consumer.value != nil)
        #expect(await eventually { (try? await monitor.status().monitoring) == false })
        let events = try StateStore(directory: dir.path).outbox.events(after: 0, limit: 1000)
        #expect(
            events.filter { RegionEventType(rawValue: $0.type) != nil }.count == 1 + Self.drive.regions.count * 2,
            "the drive's every crossing was decided and committed, though the consumer left at the first")
        #expect(source.stops >= 1)
    }

    @Test func theStoreIsTheSessionsAloneWhileItRuns() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let first = try GeofenceMonitor(source: ScriptedSource(), store: .sqlite(directory: dir.path))
        let second = try GeofenceMonitor(source: ScriptedSource(), store: .sqlite(directory: dir.path))
        let running = Task { for try await _ in first.events() {} }
        #expect(await eventually { (try? await first.status().monitoring) == true })
        await #expect(throws: DaemonLock.Held.self) {
            for try await _ in second.events() {}
        }
        running.cancel()
        _ = await running.result
        #expect(await eventually { (try? await first.status().monitoring) == false })
        let third = try GeofenceMonitor(
            source: ScriptedSource(script: [.up], endsWithScript: true), store: .sqlite(directory: dir.path))
        for try await _ in third.events() {}
        #expect(try await !third.status().monitoring, "a session after the first ended has the store")
    }

    @Test func statusAnswersTheFourQuestionsInTheSourcesTerms() async throws {
        let source = ScriptedSource()
        let monitor = try GeofenceMonitor(source: source, store: .inMemory)
        var status = try await monitor.status()
        #expect(!status.monitoring && status.liveness == .notStarted && status.servicesOn)
        #expect(status.authorization == .authorized, "the embedding process's own user")
        let consumer = Task { for try await _ in monitor.events() {} }
        source.send(.down(SourceDown(reason: "the broker is not reachable", retryIn: .seconds(2))))
        #expect(await eventually { (try? await monitor.status().connected) == false })
        status = try await monitor.status()
        #expect(status.reason == "the broker is not reachable")
        #expect(status.liveness == .awaitingFirstFix, "started, and no fix yet: not `receiving`")
        source.send(.liveness(.silent))
        #expect(await eventually { (try? await monitor.status().liveness) == .silent })
        source.send(.up, .fix(Self.drive.fixes[0]), .liveness(.restored))
        #expect(await eventually { (try? await monitor.status().liveness) == .receiving })
        #expect(try await monitor.status().connected == true)
        consumer.cancel()
        _ = await consumer.result
    }

    @Test func typedFieldsAreTheStoredJSONsAndCodableIsThatJSON() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        // The source silent, then restored: state events beside the region events.
        let source = ScriptedSource(
            script: [.up, .liveness(.silent), .liveness(.restored)] + Self.drive.fixes.map { .fix($0) },
            endsWithScript: true)
        let monitor = try GeofenceMonitor(source: source, store: .sqlite(directory: dir.path))
        for region in Self.drive.regions { try await monitor.add(region) }
        var events: [GeofenceEvent] = []
        for try await event in monitor.events() { events.append(event) }
        let stored = try StateStore(directory: dir.path).outbox.events(after: 0, limit: 10_000)
        #expect(events.map(\.json) == stored.map(\.body), "the JSON is the outbox's, as hooks get it")
        #expect(events.contains { $0.stateType == .source }, "the source's state events: \(events.map(\.json))")

        let decoder = JSONDecoder()
        for event in events {
            let object = try #require(try JSON.parse(event.json).objectValue)
            #expect(event.id == object["id"]?.stringValue)
            #expect(event.type?.rawValue ?? event.stateType?.rawValue == object["type"]?.stringValue)
            #expect((event.type == nil) != (event.stateType == nil), "a region event or a state event")
            #expect(event.region == object["region"]?.stringValue && event.subject == object["subject"]?.stringValue)
            #expect(TimestampParser.format(event.time) == object["time"]?.stringValue)
            #expect(event.reason == object["reason"]?.stringValue)
            if event.isRegionEvent {
                let decoded = try #require(RegionEvent(json: object))
                #expect(event.state == decoded.state && event.previous == decoded.previous)
                #expect(event.distance == decoded.distance && event.radius == decoded.radius)
                #expect(event.fix == decoded.fix && event.inferred == decoded.inferred)
                #expect(event.state != nil && event.fix != nil && event.distance != nil, "\(event.json)")
                #expect(event.status == nil)
            } else {
                #expect(event.status == object["state"]?.stringValue && event.status != nil)
                #expect(event.state == nil && event.fix == nil && event.distance == nil)
            }
            // Codable is the hooks' JSON: encoded, it is the same object; decoded back, the same event.
            let encoded = try JSONEncoder().encode(event)
            #expect(try JSON.parse(encoded) == JSON.parse(event.json), "\(String(decoding: encoded, as: UTF8.self))")
            let back = try decoder.decode(GeofenceEvent.self, from: encoded)
            #expect(back == event)
            if event.isRegionEvent { #expect(back.json == event.json, "the engine's member order, exactly") }
            // And an event a hook received (its stdin) decodes as the event.
            #expect(try decoder.decode(GeofenceEvent.self, from: Data(event.json.utf8)) == event)
        }
        #expect(throws: DecodingError.self) {
            try decoder.decode(GeofenceEvent.self, from: Data(#"{"id":"x","type":"teleport","time":"2026"}"#.utf8))
        }
    }

    @Test func stateOfARegionIsTheCommittedOneAsCLMonitorsRecord() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        // The gates, passed and left, and a region around where the drive ends: the vehicle is in it.
        let last = try #require(Self.drive.fixes.last)
        let end = try Region(
            id: "end",
            center: Coordinate(latitude: try #require(last.latitude), longitude: try #require(last.longitude)),
            radius: 200)
        let source = ScriptedSource(fixes: Self.drive.fixes, endsWithScript: true)
        let monitor = try GeofenceMonitor(source: source, store: .sqlite(directory: dir.path))
        for region in Self.drive.regions + [end] { try await monitor.add(region) }
        #expect(try await monitor.state(of: "end", subject: last.subject) == .unknown, "no fix yet")

        var entered: [String] = []
        for try await event in monitor.events() where event.type == .enter || event.type == .determined {
            // Each event is committed with the state it reports: by the time it is yielded the pair is known
            // (the drive may have gone on since: the answer is the last commit's).
            if let region = event.region, let subject = event.subject {
                #expect(try await monitor.state(of: region, subject: subject) != .unknown, "\(event.json)")
            }
            entered.append(event.region ?? "")
        }
        #expect(entered.contains("end"))
        #expect(try await monitor.state(of: "end", subject: last.subject) == .inside)
        for gate in Self.drive.regions {
            #expect(try await monitor.state(of: gate.id, subject: last.subject) == .outside, "\(gate.id): passed")
        }
        #expect(try await monitor.state(of: "end", subject: "someone-else") == .unknown)
        #expect(try await monitor.state(of: "nowhere", subject: last.subject) == nil, "no such region")
        // From the store alone, as a new monitor on it reads it.
        let later = try GeofenceMonitor(source: ScriptedSource(), store: .sqlite(directory: dir.path))
        #expect(try await later.state(of: "end", subject: last.subject) == .inside)
    }

    @Test func dwellIsADurationAndTheSettingsAreDurations() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let centre = Coordinate(latitude: 51.5, longitude: -0.12)
        let bay = try Region(id: "bay", center: centre, radius: 50, dwell: .seconds(90) + .milliseconds(250))
        #expect(bay.dwell == 90.25 && bay.dwellDuration == .milliseconds(90_250))
        #expect(bay.notify == [.enter, .exit, .dwell], "a dwell time asks for dwell events")
        #expect(bay.hooks.isEmpty && bay.createdBy == nil, "an embedder's region has none of the daemon's fields")
        #expect(try Region(id: "plain", center: centre, radius: 50).dwellDuration == nil)
        for bad: Duration in [.zero, .seconds(-1), .seconds(36_526 * 86_400)] {
            #expect(throws: RegionValidationError.self) { try Region(id: "x", center: centre, radius: 5, dwell: bad) }
        }
        var configuration = GeofenceMonitor.Configuration()
        configuration.syncInterval = .milliseconds(50)
        configuration.idleLimit = .seconds(3600)
        let monitor = try GeofenceMonitor(
            source: ScriptedSource(), store: .sqlite(directory: dir.path), configuration: configuration)
        try await monitor.add(bay)
        #expect(try await monitor.regions().first?.dwellDuration == .milliseconds(90_250), "stored and read back")
        #expect(GeofenceMonitor.seconds(.milliseconds(1500)) == 1.5 && GeofenceMonitor.seconds(.seconds(-3)) == 0)
    }

    @Test func theLongestDurationsAreTakenAsAHundredYears() async throws {
        #expect(GeofenceMonitor.seconds(.seconds(Int64.max)) == DurationParser.maximumSeconds)
        var configuration = GeofenceMonitor.Configuration()
        configuration.syncInterval = .seconds(Int64.max)
        configuration.idleLimit = .seconds(Int64.max)
        let source = ScriptedSource(fixes: Self.drive.fixes, endsWithScript: true)
        let monitor = try GeofenceMonitor(source: source, store: .inMemory, configuration: configuration)
        for region in Self.drive.regions { try await monitor.add(region) }
        var count = 0
        for try await event in monitor.events() where event.isRegionEvent { count += 1 }
        #expect(count == 1 + Self.drive.regions.count * 2, "a session runs, its ticks never due")
    }

    /// Polls `condition` for up to `timeout` seconds.
    func eventually(timeout: Double = 10, _ condition: () async -> Bool) async -> Bool {
        await Wait.until(timeout: timeout, every: .milliseconds(20), condition)
    }
}
