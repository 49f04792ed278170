import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceStore

#if canImport(Glibc)
    import Glibc
#endif

/// `geofence events`: the outbox and its deliveries (`events retry` and `events prune` below).
struct EventsCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "events", abstract: "Show events and their hook deliveries.",
        discussion: """
            Every event the engine stored, newest last, with one line per delivery (an event given to a \
            hook): its status (pending, running, done, dead), attempts, when the next attempt is due, the last \
            exit status and the start of the hook's output. A delivery is retried with backoff until it \
            succeeds, or it is dead after the maximum attempts or age (see Docs/hooks.md); dead ones are kept \
            until pruned, and can be retried with `geofence events retry`.

            --pending shows deliveries waiting or running, and events whose deliveries the engine has not made \
            yet (`dispatched: false`): everything still owed, so a script can wait for it to be empty. --failed \
            shows deliveries waiting for a retry after a failed attempt, --dead those given up. With --json, one array of events, each with its deliveries and \
            their attempt history; with --follow --json, one JSON object per line.
            """,
        options: [
            .flag(
                "--pending", help: "Only what is still owed: deliveries waiting or running, events not dispatched yet."),
            .flag("--failed", help: "Only deliveries waiting for a retry after a failed attempt."),
            .flag("--dead", help: "Only deliveries given up."),
            .flag("--follow", short: "-f", help: "Keep printing new events and delivery changes until interrupted."),
            .value(
                "--limit", short: "-n", valueName: "n", help: "Show at most this many events (the newest).",
                default: "50"),
            .value("--region", valueName: "id", help: "Only events of this region."),
            .value("--subject", valueName: "name", help: "Only events of this subject (a gpsd device or vehicle)."),
            .value(
                "--type", valueName: "types",
                help: """
                    Only events of these comma-separated types: determined, enter, exit, dwell, expired, source, \
                    device, services, authorization, region-status.
                    """),
            .value(
                "--since", valueName: "duration|timestamp",
                help: "Only events that happened this long ago or later (e.g. 1h), or at or after this time."),
        ],
        runsWithoutSubcommand: true,
        examples: [
            Example("The latest events and how their hooks did:", "geofence events"),
            Example("What failed and gave up:", "geofence events --dead"),
            Example(
                "One vehicle's crossings of the last day:",
                "geofence events --subject truck-17 --type enter,exit --since 1d"),
            Example("Watch deliveries as they happen:", "geofence events --follow"),
            Example("Retry everything that gave up, once the receiver is back:", "geofence events retry --all-dead"),
        ])

    let filter: DeliveryFilter
    /// The filter's option without its dashes (`failed`), when one was given.
    let filterName: String?
    let limit: Int
    let query: EventQuery
    let follow: Bool

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        let chosen = [("--pending", DeliveryFilter.pending), ("--failed", .failed), ("--dead", .dead)].filter {
            a.flag($0.0)
        }
        guard chosen.count <= 1 else {
            throw c.usage("\(chosen.map(\.0).joined(separator: " and ")) cannot be combined: choose one")
        }
        filter = chosen.first?.1 ?? .all
        filterName = chosen.first.map { String($0.0.dropFirst(2)) }
        limit = try a.integer("--limit") ?? 50
        guard limit >= 1 else { throw c.usage("invalid value for --limit: must be 1 or more") }
        query = try Self.eventQuery(a, c)
        follow = a.flag("--follow")
    }

    func run(_ c: CommandContext) throws {
        let (filter, limit, query, follow) = (self.filter, self.limit, self.query, self.follow)
        let route = try c.route()
        let directory = route.engine?["stateDirectory"]?.stringValue ?? c.stateDirectory
        if route.socket != nil, !FileManager.default.isReadableFile(atPath: directory + "/" + StateStore.fileName) {
            // The engine's store is not this user's to read (a granted user): its events come through the socket.
            guard query.isEmpty else {
                throw CommandFailure(
                    "--region, --subject, --type and --since read the store, and \(ControlHandler.userName(getuid())) "
                        + "cannot read the engine's", exitCode: .noPermission)
            }
            return try Self.listThroughEngine(c, filter: filterName ?? "all", limit: limit, follow: follow)
        }
        let store = try StateStore(directory: directory)
        // Take the follow positions before listing, so nothing that happens in between is missed (at worst a
        // change is printed twice).
        let startChange = follow ? try store.deliveries.latestChange() : 0
        let listed = try store.deliveries.eventDeliveries(filter: filter, matching: query, limit: limit)
        if c.json && !follow {
            c.console.print(JSONValue.array(listed.map { .object(Self.json($0)) }).serialized())
            return
        }
        if c.json {
            for item in listed { c.console.print(JSONValue.object(["kind": "event"] + Self.json(item)).serialized()) }
        } else if listed.isEmpty && !follow {
            c.console.message(
                !query.isEmpty
                    ? "No events match."
                    : filter == .all
                        ? "No events yet."
                        : "No \(filterName ?? "") deliveries.")
        } else if !listed.isEmpty {
            c.console.write(Self.table(listed))
        }
        if follow {
            try Self.follow(
                c, store: store, filter: filter, query: query,
                afterEvent: listed.last?.event.seq ?? Self.latestSeq(store),
                changeSeq: startChange)
        }
    }

    /// The event types `--type` takes: every kind there is, as hooks and sinks take them.
    static let eventTypes = GlobalHook.eventTypes

    /// `--region`, `--subject`, `--type` and `--since`, checked.
    static func eventQuery(_ a: ParsedArguments, _ c: CommandContext) throws -> EventQuery {
        var types: [String] = []
        if let text = a.value("--type") {
            for part in text.split(separator: ",", omittingEmptySubsequences: false) {
                let word = part.trimmingCharacters(in: .whitespaces)
                guard eventTypes.contains(word) else {
                    throw c.usage(
                        "invalid value for --type: \"\(word)\" is not one of \(eventTypes.joined(separator: ", "))")
                }
                if !types.contains(word) { types.append(word) }
            }
        }
        var since: Date?
        if let text = a.value("--since") {
            if let ago = try? DurationParser.parse(text) {
                since = c.now.addingTimeInterval(-ago)
            } else if let time = try? TimestampParser.parse(text) {
                since = time
            } else {
                throw c.usage(
                    "invalid value for --since: \"\(text)\" is not a duration (like 1h) or a timestamp "
                        + "(like 2026-11-30T14:00:00Z)")
            }
        }
        return EventQuery(region: a.value("--region"), subject: a.value("--subject"), types: types, since: since)
    }

    /// `events` through the engine's socket, for a user who may see them but cannot read the store.
    private static func listThroughEngine(_ c: CommandContext, filter: String, limit: Int, follow: Bool) throws {
        if follow {
            throw CommandFailure(
                "--follow reads the store, and \(ControlHandler.userName(getuid())) cannot read the engine's: "
                    + "follow live events with `geofence watch`", exitCode: .noPermission)
        }
        let items = try c.call(.events, ["filter": .string(filter), "limit": .number(Double(limit))]).arrayValue ?? []
        if c.json {
            c.console.print(JSONValue.array(items).serialized())
        } else if items.isEmpty {
            c.console.message(filter == "all" ? "No events yet." : "No \(filter) deliveries.")
        } else {
            var table = TextTable([
                "SEQ", "TIME", "EVENT", "REGION", "DELIVERY", "HOOK", "STATUS", "TRIES", "RESULT", "OUTPUT",
            ])
            for e in items {
                let eventColumns = [
                    String(e["seq"]?.intValue ?? 0), e["time"]?.stringValue ?? "", e["type"]?.stringValue ?? "",
                    e["region"]?.stringValue ?? e["subject"]?.stringValue ?? "-",
                ]
                let deliveries = e["deliveries"]?.arrayValue ?? []
                let dispatched = e["dispatched"]?.boolValue ?? false
                if deliveries.isEmpty {
                    table.add(
                        eventColumns + [dispatched ? "-" : "(not yet)", dispatched ? "no hooks" : "", "", "", "", ""])
                }
                for (i, d) in deliveries.enumerated() {
                    var result: [String] = [d["lastError"]?.stringValue].compactMap { $0 }
                    if d["timedOut"]?.boolValue == true {
                        result.append("timed out")
                    } else if let signal = d["lastSignal"]?.intValue {
                        result.append("signal \(signal)")
                    } else if let exit = d["lastExit"]?.intValue {
                        result.append("exit \(exit)")
                    }
                    let output = d["stderr"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 } ?? d["stdout"]?.stringValue
                    var line = output?.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
                    line = String(line.unicodeScalars.filter { $0.properties.generalCategory != .control })
                    table.add(
                        (i == 0 ? eventColumns : ["", "", "", ""]) + [
                            String(d["id"]?.intValue ?? 0), d["hook"]?.stringValue ?? "",
                            d["status"]?.stringValue ?? "",
                            String(d["attempts"]?.intValue ?? 0), result.joined(separator: ", "),
                            line.count > 40 ? String(line.prefix(37)) + "..." : line,
                        ])
                }
            }
            c.console.write(table.render())
        }
    }

    private static func latestSeq(_ store: StateStore) throws -> Int64 {
        try store.deliveries.hookDispatchState().latestEvent
    }

    /// One row per delivery (an event without deliveries gets one row too); the event's columns only on its
    /// first row.
    static func table(_ items: [EventDeliveries]) -> String {
        var table = TextTable([
            "SEQ", "TIME", "EVENT", "REGION", "SUBJECT", "DELIVERY", "HOOK", "STATUS", "TRIES", "RESULT", "OUTPUT",
        ])
        for item in items {
            let e = item.event
            let eventColumns = [
                String(e.seq), TimestampParser.format(e.time), e.type, e.region ?? "-", e.subject ?? "-",
            ]
            if item.deliveries.isEmpty {
                table.add(
                    eventColumns + [
                        item.dispatched ? "-" : "(not yet)", item.dispatched ? "no hooks" : "", "", "", "", "",
                    ])
                continue
            }
            for (i, d) in item.deliveries.enumerated() {
                table.add(
                    (i == 0 ? eventColumns : ["", "", "", "", ""]) + [
                        String(d.id), hookName(d.hook), d.status.rawValue, String(d.attempts), result(d),
                        excerpt(d, width: 40),
                    ])
            }
        }
        return table.render()
    }

    static func hookName(_ reference: String) -> String {
        reference.hasPrefix("hook:") ? String(reference.dropFirst(5)) : reference
    }

    /// How the last attempt ended and what comes next, in a few words.
    static func result(_ d: StoredDelivery, now: Date = Date()) -> String {
        var parts: [String] = []
        if d.attempts > 0 || d.status == .dead {
            if let error = d.lastError { parts.append(error) }
            if d.timedOut {
                parts.append("timed out")
            } else if let signal = d.lastSignal {
                parts.append("signal \(signal)")
            } else if let exit = d.lastExit {
                parts.append("exit \(exit)")
            }
        }
        switch d.status {
        case .pending:
            let wait = d.nextAttemptAt.timeIntervalSince(now)
            parts.append(
                wait > 0.5 ? "next in \(DurationParser.format(wait.rounded()))" : d.attempts == 0 ? "waiting" : "due")
        case .running: parts.append("running since \(d.startedAt.map(TimestampParser.format) ?? "?")")
        case .done, .dead: break
        }
        return parts.joined(separator: ", ")
    }

    /// The first line of stderr (else stdout), cut to `width` characters.
    static func excerpt(_ d: StoredDelivery, width: Int) -> String {
        let bytes = d.stderr.isEmpty ? d.stdout : d.stderr
        let text = String(decoding: bytes.prefix(4096), as: UTF8.self)
        var line = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        // Output is anything a hook printed: keep control characters (escape sequences, NULs) off the terminal.
        if line.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            line = String(
                String.UnicodeScalarView(
                    line.unicodeScalars.map { $0.properties.generalCategory == .control && $0 != "\t" ? "." : $0 }))
        }
        return line.count > width ? String(line.prefix(width - 3)) + "..." : line
    }

    static func json(_ item: EventDeliveries) -> JSONObject { EventReport.json(item) }

    static func json(_ d: StoredDelivery) -> JSONObject { EventReport.json(d) }

    // MARK: --follow

    /// Prints new events and delivery changes every 200 ms until interrupted (or stdout goes away).
    private static func follow(
        _ c: CommandContext, store: StateStore, filter: DeliveryFilter, query: EventQuery, afterEvent: Int64,
        changeSeq: Int64
    ) throws {
        var lastEvent = afterEvent
        var lastChange = changeSeq
        var events: [Int64: StoredEvent] = [:]
        while true {
            for event in try store.outbox.events(after: lastEvent, limit: 1000) {
                lastEvent = event.seq
                events[event.seq] = event
                if filter == .all && query.matches(event) { printEvent(c, event) }
            }
            for d in try store.deliveries.changes(after: lastChange, limit: 1000) {
                lastChange = max(lastChange, d.changeSeq)
                guard matches(d, filter) else { continue }
                var event = events[d.eventSeq]
                if event == nil, let found = try store.outbox.event(seq: d.eventSeq) {
                    event = found
                    events[d.eventSeq] = found
                }
                if !query.isEmpty, !(event.map(query.matches) ?? false) { continue }
                printDelivery(c, d, event: event)
            }
            // Keep the lookup small: deliveries of old events are rare, and fetched again when they come.
            if events.count > 10_000 { events.removeAll(keepingCapacity: true) }
            if stdoutIsGone() { return }
            usleep(200_000)
        }
    }

    private static func matches(_ d: StoredDelivery, _ filter: DeliveryFilter) -> Bool {
        switch filter {
        case .all: true
        case .pending: d.status == .pending || d.status == .running
        case .failed: d.status == .pending && d.attempts > 0
        case .dead: d.status == .dead
        }
    }

    private static func printEvent(_ c: CommandContext, _ e: StoredEvent) {
        if c.json {
            c.console.print(
                JSONValue.object(
                    ["kind": "event"] + json(EventDeliveries(event: e, dispatched: false, deliveries: []))
                ).serialized())
        } else {
            let place =
                (e.region.map { " " + RegionCommands.quoted($0) } ?? "")
                + (e.subject.map { " subject " + RegionCommands.quoted($0) } ?? "")
            c.console.print(
                "\(TimestampParser.format(e.createdAt))  event #\(e.seq) \(e.type)\(place) at "
                    + "\(TimestampParser.format(e.time)) (\(e.id))")
        }
    }

    private static func printDelivery(_ c: CommandContext, _ d: StoredDelivery, event: StoredEvent?) {
        if c.json {
            var o: JSONObject = ["kind": "delivery"]
            o = o + json(d)
            if let event {
                var e: JSONObject = [
                    "seq": .number(Double(event.seq)), "id": .string(event.id), "type": .string(event.type),
                ]
                if let region = event.region { e["region"] = .string(region) }
                o["event"] = .object(e)
            }
            c.console.print(JSONValue.object(o).serialized())
            return
        }
        let when = d.status == .running ? d.startedAt : d.finishedAt ?? d.createdAt
        let what =
            event.map { e in "\(e.type)" + (e.region.map { " " + RegionCommands.quoted($0) } ?? "") }
            ?? "event #\(d.eventSeq)"
        var line = "\(when.map(TimestampParser.format) ?? "-")  delivery \(d.id) (\(what), hook \(hookName(d.hook))): "
        switch d.status {
        case .running: line += "running, attempt \(d.attempts)"
        case .done:
            line += "done on attempt \(d.attempts)" + (d.lastDuration.map { String(format: " in %.3f s", $0) } ?? "")
        case .pending: line += d.attempts == 0 ? "queued" : "failed (\(result(d)))"
        case .dead: line += "dead after \(d.attempts) attempts (\(result(d)))"
        }
        let output = excerpt(d, width: 80)
        if !output.isEmpty && d.status != .running { line += ": " + output }
        c.console.print(line.replacingOccurrences(of: "\n", with: "\\n"))
    }

    /// True when nobody reads our stdout any more (the reader of a pipe exited).
    private static func stdoutIsGone() -> Bool {
        var p = pollfd(fd: 1, events: 0, revents: 0)
        return poll(&p, 1, 0) > 0 && p.revents & Int16(POLLERR | POLLHUP) != 0
    }
}

/// `geofence events retry`: dead (or waiting) deliveries again.
struct EventsRetryCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "retry",
        abstract: "Retry dead (or waiting) deliveries now, with a fresh budget of attempts.",
        discussion: """
            ID is a delivery id (the number in `geofence events`) or an event id (then all its dead and \
            waiting deliveries). A running engine starts them within a second, in their order: a retried \
            delivery goes before the later deliveries of its region. Delivered ones are not run again.
            """,
        options: [.flag("--all-dead", help: "Retry every dead delivery.")],
        arguments: [.optional("id", help: "A delivery id or an event id.")],
        examples: [
            Example("One delivery:", "geofence events retry 42"),
            Example("All deliveries of one event:", "geofence events retry 0193a4c2-7f1e-7c3a-9d2b-5e8f0a1b2c3d"),
            Example("Everything that gave up:", "geofence events retry --all-dead"),
        ])

    /// A delivery or event id; nil with `--all-dead`.
    let reference: String?

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        let reference = a.value("id")
        let all = a.flag("--all-dead")
        guard (reference != nil) != all else {
            throw c.usage(
                all ? "give either an id or --all-dead, not both" : "give a delivery or event id, or --all-dead")
        }
        self.reference = reference
    }

    func run(_ c: CommandContext) throws {
        let store = try c.openStore()
        let retried: [Int64]
        var count: Int
        if let reference {
            retried = try store.deliveries.retry(reference, now: c.now)
            count = retried.count
        } else {
            retried = []
            count = try store.deliveries.retryDead(now: c.now)
        }
        if c.json {
            var o: JSONObject = ["retried": .number(Double(count))]
            if reference != nil { o["deliveries"] = .array(retried.map { .number(Double($0)) }) }
            c.console.print(JSONValue.object(o).serialized())
            return
        }
        if count == 0 {
            c.console.print("No dead deliveries.")
            return
        }
        let what =
            reference == nil
            ? "\(count) dead deliveries"
            : count == 1
                ? "delivery \(retried[0])"
                : "deliveries \(retried.map(String.init).joined(separator: ", "))"
        let engine =
            DaemonLock.holder(directory: c.stateDirectory) == nil
            ? " when the engine next runs (geofence run, or geofence replay --hooks)" : " now"
        c.console.print("Retrying \(what)\(engine).")
    }
}

/// `geofence events prune`: old events whose deliveries are all done or dead.
struct EventsPruneCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "prune",
        abstract: "Delete old events whose deliveries are all done or dead.",
        discussion: """
            Deletes the events stored more than DURATION ago, with their deliveries, when none of those is \
            still pending or running. An event still waiting for a hook, or for a sink (`geofence sink list`), \
            is never deleted.
            """,
        options: [
            .value(
                "--older-than", valueName: "duration", help: "Age of the events to delete (e.g. 30d, 12h).",
                required: true)
        ],
        examples: [Example("Keep a month:", "geofence events prune --older-than 30d")])

    let age: Double

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        age = try a.required("--older-than", as: DurationParser.parse)
    }

    func run(_ c: CommandContext) throws {
        let (events, deliveries) = try c.openStore().outbox.prune(before: c.now.addingTimeInterval(-age))
        if c.json {
            c.console.print(
                JSONValue.object(["events": .number(Double(events)), "deliveries": .number(Double(deliveries))])
                    .serialized())
        } else {
            c.console.print(
                "Pruned \(events) events and \(deliveries) deliveries older than \(DurationParser.format(age)).")
        }
    }
}

/// The members of `a`, then those of `b` that `a` lacks.
private func + (a: JSONObject, b: JSONObject) -> JSONObject {
    var o = a
    for (key, value) in b where o[key] == nil { o[key] = value }
    return o
}
