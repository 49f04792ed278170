import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceGPSD
import GeofenceStore
import GeofenceSystem

/// `geofence status`: what works, what does not, and how to fix it. Works without the daemon.
struct StatusCommand: GeofenceSubcommand {
    static let spec = CommandSpec(
        name: "status",
        abstract: "Is gpsd there, has it a receiver, are fixes arriving; the engine; the regions.",
        discussion: """
            Works with or without a running engine. It asks gpsd directly (waiting up to --wait for its \
            answer): is it reachable, which devices does it have and what can they report, is data \
            arriving. Then what the engine (if running) sees, and the regions by status. Each problem comes \
            with the command that fixes it. When the engine reads JSON lines (--source json:PATH) or an \
            MQTT topic (--source mqtt://...), the answers are that source's own, as the engine last \
            recorded them (every half second): open (or, for MQTT, the broker connected) or not and why, \
            lines (messages) received, usable fixes, unusable ones by reason, the last fix and its age; gpsd \
            is not asked.

            The exit status says whether the engine is ready, after the report either way: 0 when the \
            engine runs and all four answers are ok, 3 (not ready) when it runs but an answer is a problem \
            or Location Services are off, 69 when no engine is running.

            With --nats, the report is a cluster's (Docs/cluster.md): every engine that joined it, the \
            partitions each owns with their lag (fixes waiting), last checkpoint and take-over time, fenced \
            publishes, partitions no engine owns, and a checkpoint older than the first fix the stream keeps. \
            Exit 0 when every partition has an engine and nothing is wrong, 3 otherwise, 69 when the cluster \
            cannot be reached.
            """,
        options: [
            CommandTree.gpsd,
            .value(
                "--wait", valueName: "duration", help: "How long to wait for gpsd's answer and a fix.", default: "2s"),
            .value(
                "--nats", valueName: "nats://[user@]host:port,…",
                help: """
                    Report on a cluster of engines on NATS JetStream instead (Docs/cluster.md). No password in \
                    the URL: use --nats-password-file or GEOFENCE_NATS_PASSWORD.
                    """),
            ClusterTarget.passwordFileOption(for: "--nats"),
        ],
        examples: [
            Example("", "geofence status"),
            Example("For monitoring:", "geofence status --json"),
            Example("In a script:", "geofence status >/dev/null || echo \"not ready: exit $?\""),
            Example("A cluster:", "geofence status --nats nats://10.0.0.1:4222,10.0.0.2:4222"),
            Example(
                "A cluster that wants a user name and password (the password from a file only you can read):",
                "geofence status --nats nats://ops@10.0.0.1:4222 --nats-password-file ~/.config/geofence/nats.pw"),
        ])

    /// What gpsd itself said within the wait.
    struct Probe: Sendable {
        var reachable = false
        var reason: String?
        var snapshot: CapabilitySnapshot?
        var fix: Fix?
        var accepted: WeightedFix?
        /// Why the fixes gpsd sent were refused, when none was accepted.
        var advice: RefusalAdvice?
    }

    static func ask(_ address: GPSDAddress, wait: Double) async -> Probe {
        let source = GPSDSource(
            configuration: .init(
                address: address, liveness: .init(firstFixDeadline: wait, stalenessLimit: wait),
                backoff: ReconnectBackoff(base: 0.2, cap: 1), connectTimeout: min(wait, 5)))
        source.start()
        let timer = Task {
            try? await Task.sleep(for: .seconds(wait))
            await source.stop()
        }
        var probe = Probe()
        var filter = FixFilter()
        var assembler = EpochAssembler()
        loop: for await report in source.reports {
            switch report {
            case .connected:
                probe.reachable = true
            case .disconnected(let d):
                if !probe.reachable {
                    probe.reason = d.description
                    break loop
                }
            case .capabilities(let s):
                probe.snapshot = s
            case .fix(let f):
                probe.fix = f
                for case .ready(let ready) in assembler.offer(f, now: MonotonicClock.seconds()) {
                    if case .accepted(let w) = filter.evaluate(ready) { probe.accepted = w }
                }
                if probe.accepted != nil, probe.snapshot != nil { break loop }
            default:
                break
            }
        }
        timer.cancel()
        await source.stop()
        if probe.accepted == nil {
            let age = probe.fix.flatMap { fix in fix.time.flatMap { time in fix.receivedAt?.timeIntervalSince(time) } }
            probe.advice = RefusalAdvice(refused: filter.statistics.rejected, age: age)
        }
        return probe
    }

    let gpsdAddress: GPSDAddress
    /// Whether `--gpsd` (or `GEOFENCE_GPSD`) was given: else the running engine's gpsd is asked.
    let gpsdGiven: Bool
    let wait: Double
    /// `--nats`: the cluster to report on.
    let nats: NATSServers?

    init(parsing a: ParsedArguments, context c: CommandContext) throws {
        gpsdAddress = try c.gpsdAddress()
        gpsdGiven = a.value("--gpsd") != nil
        wait = try c.positiveDuration("--wait", default: 2)
        if let text = a.value("--nats") {
            nats = try c.natsServers(text, option: "--nats")
        } else {
            try ClusterTarget.refuseOrphanPasswordFile(a, c)
            nats = nil
        }
    }

    func run(_ c: CommandContext) throws {
        if let nats { return try ClusterStatusOutput.run(c, servers: nats, wait: wait) }
        var address = gpsdAddress
        let wait = self.wait

        // The engine's view, through its socket (what this user may see of it), when it runs; then its state
        // directory is the one reported.
        let route = try c.route()
        let directory = route.engine?["stateDirectory"]?.stringValue ?? c.stateDirectory
        let engine: JSONValue? = route.socket != nil ? (try? c.call(.status)) : nil
        let engineAnswer = engine
        // The store, when this user can read it: the engine's own notes (source, last fix) are there.
        let store: StateStore? =
            FileManager.default.isReadableFile(atPath: directory + "/" + StateStore.fileName)
            ? try? StateStore(directory: directory) : nil
        // A user who cannot read the lock file learns from the engine itself that it runs.
        let daemonPID =
            DaemonLock.holder(directory: directory)
            ?? engine?["engine"]?["pid"]?.intValue.flatMap { Int32(exactly: $0) }
        var settings: [String: String] = [:]
        var regionCounts: [String: Int] = [:]
        var eventCount: Int?
        var lastFix: (subject: String, fix: EventFix, time: Date?, recorded: Date)?
        var servicesOn = true
        if let store {
            for key in [
                DaemonSettings.pid, DaemonSettings.started, DaemonSettings.sourceAddress, DaemonSettings.connection,
                DaemonSettings.connectionReason, DaemonSettings.liveness, DaemonSettings.livenessChanged,
                DaemonSettings.sourceStatus, DaemonSettings.gpsd,
            ] {
                settings[key] = try store.settings.value(key)
            }
            servicesOn = try store.permissions.servicesOn()
            regionCounts = try store.regions.countsByStatus()
            eventCount = try store.outbox.count()
            if let s = try store.monitorState.latestSubject(), let fix = s.record.lastFix {
                lastFix = (s.subject, fix, s.record.lastFixTime, s.updatedAt)
            }
        }
        if let engine {
            let about = engine["engine"]
            if settings[DaemonSettings.started] == nil {
                settings[DaemonSettings.started] = about?["started"]?.stringValue
            }
            if settings[DaemonSettings.sourceAddress] == nil {
                settings[DaemonSettings.sourceAddress] = about?["source"]?.stringValue
            }
            servicesOn = engine["services"]?.stringValue != "off"
            if let counts = engine["regions"]?.objectValue {
                regionCounts = Dictionary(
                    uniqueKeysWithValues: counts.compactMap { k, v in v.intValue.map { (k, $0) } })
            }
            eventCount = engine["outbox"]?["events"]?.intValue ?? eventCount
        }

        // Each sink: connected or not, its lag, its last error (the engine's answer, else the store's).
        let sinks: [JSONValue] =
            engine?["sinks"]?.arrayValue
            ?? (store.flatMap { store in
                try? ControlHandler(store: store, policy: AccessPolicy(daemonUID: getuid())).sinkReports().map {
                    JSONValue.object($0)
                }
            } ?? [])
        // An engine fed by a fleet stream answers for that stream: gpsd is asked only when it is the source.
        // From the store, else (a user who may not read it) from the engine's answer.
        let fleet =
            settings[DaemonSettings.sourceStatus].flatMap { try? JSON.parse($0) }.flatMap(SourceStatus.init(json:))
            ?? engine?["source"].flatMap(SourceStatus.init(json:))
        // A user who cannot see the lock file still knows the engine runs when it answered.
        let engineRunning = daemonPID != nil || engine != nil
        // Without --gpsd (or GEOFENCE_GPSD), the gpsd the running engine reads is the one to ask.
        if !gpsdGiven, engineRunning, let text = settings[DaemonSettings.gpsd], !text.isEmpty,
            let used = try? GPSDAddress(parsing: text)
        {
            address = used
        }
        let probe = fleet == nil ? try waitFor { [address] in await Self.ask(address, wait: wait) } : Probe()

        // The four questions, cheapest first, each with its fix.
        var hardware: (ok: Bool, text: String, detail: [String])
        if let fleet {
            if !engineRunning {
                hardware = (false, "the engine is not running; it last read \(fleet.label)", [])
            } else {
                hardware = (fleet.open, "\(fleet.label): \(fleet.openText)", [])
            }
        } else if !probe.reachable {
            hardware = (
                false, probe.reason ?? "gpsd did not answer at \(address) within \(DurationParser.format(wait))", []
            )
        } else if let s = probe.snapshot, !s.devices.isEmpty {
            hardware = (
                true, "gpsd \(s.daemon?.release ?? "?") at \(address.host):\(address.port)",
                s.devices.map(CapabilityJSON.describe)
            )
        } else {
            hardware = (
                false,
                "gpsd runs at \(address.host):\(address.port) but has no receiver: plug one in, or add it with "
                    + "sudo gpsdctl add /dev/ttyACM0", []
            )
        }
        let service: (ok: Bool, text: String) =
            servicesOn
            ? (true, "Location Services are on")
            : (
                false,
                "Location Services are off: no fix is used and every region is suspended; sudo geofence services on"
            )
        let user = ControlHandler.userName(getuid())
        let permission: (ok: Bool, status: String, effective: String, text: String)
        if let you = engine?["you"] {
            let status = you["status"]?.stringValue ?? "?"
            let effective = you["effective"]?.stringValue ?? "?"
            let ok = effective == "authorized" || you["privileged"]?.boolValue == true
            permission = (
                ok, status, effective,
                ok
                    ? "\(user) is \(status)"
                        + (you["privileged"]?.boolValue == true ? " (root or the engine's user)" : "")
                    : "\(user) is \(effective): " + (you["howTo"]?.stringValue ?? "ask an administrator")
            )
        } else {
            // No engine: whoever can open the store is its owner (file permissions are the authorization), as
            // the engine's own user is; the switch still counts.
            let owner = AccessPolicy(daemonUID: getuid())
            let effective = owner.effectiveStatus(uid: getuid(), recorded: nil, servicesOn: servicesOn)
            permission = (
                store != nil || getuid() == 0, "authorized", effective.rawValue,
                store != nil || getuid() == 0
                    ? "\(user) owns the state directory" : "\(user) cannot read \(directory) and no engine is running"
            )
        }
        let data: (ok: Bool, text: String)
        if let fleet {
            var counts = "\(fleet.countText), \(fleet.usableFixes) usable fixes"
            if fleet.unusableTotal > 0 { counts += ", \(fleet.unusableTotal) unusable (\(fleet.unusableSummary))" }
            if fleet.sharedNames > 0 {
                counts +=
                    "; \(fleet.sharedNames) vehicle name(s) arrive on more than one topic (see the log; "
                    + "--mqtt-vehicle topic names vehicles by topic)"
            }
            if let read = fleet.lastFixRead {
                counts +=
                    "; last fix " + (fleet.lastFixTime.map { TimestampParser.format($0) + ", " } ?? "") + "read "
                    + DurationParser.format(max(0, c.now.timeIntervalSince(read).rounded())) + " ago"
            }
            switch fleet.liveness {
            case _ where !engineRunning: data = (false, "the engine is not running: \(counts)")
            case .receiving: data = (true, "fixes arriving: \(counts)")
            case .silent: data = (false, "silent: no usable fix since the engine started; \(counts)")
            case .lost: data = (false, "lost: usable fixes stopped arriving; \(counts)")
            case .awaitingFirstFix: data = (false, "no usable fix yet: \(counts)")
            }
        } else if let w = probe.accepted {
            data = (
                true,
                String(
                    format: "fixes arriving: %.6f, %.6f ±%.1f m (%@) from %@", w.coordinate.latitude,
                    w.coordinate.longitude, w.accuracy, w.fix.mode == FixMode.threeD ? "3D" : "2D", w.subject)
            )
        } else if let advice = probe.advice {
            data = (false, "gpsd sends reports but no usable fix: " + advice.text)
        } else if probe.fix != nil {
            data = (false, "gpsd sends reports but no usable fix yet: the receiver may have no view of the sky")
        } else if probe.reachable {
            data = (false, "no fix within \(DurationParser.format(wait)): is the receiver connected and configured?")
        } else {
            data = (false, "no data: gpsd is not reachable")
        }

        // The exit status, after the report either way: scripts can trust it as `systemctl is-active`'s.
        func verdict() throws {
            if !engineRunning { throw CommandFailure.quiet(.unavailable) }
            if !(hardware.ok && service.ok && permission.ok && data.ok) { throw CommandFailure.quiet(.notReady) }
        }

        if c.json {
            var o: JSONObject = ["stateDirectory": .string(directory)]
            var hw: JSONObject =
                fleet.map {
                    $0.kind == "mqtt"
                        ? [
                            "ok": .bool(hardware.ok), "source": "mqtt", "broker": .string($0.path),
                            "connected": .bool($0.open),
                        ]
                        : [
                            "ok": .bool(hardware.ok), "source": "json", "path": .string($0.path),
                            "open": .bool($0.open),
                        ]
                }
                ?? ["ok": .bool(hardware.ok), "gpsd": .string("\(address)"), "reachable": .bool(probe.reachable)]
            if !hardware.ok { hw["problem"] = .string(hardware.text) }
            if let s = probe.snapshot { hw["capabilities"] = .object(CapabilityJSON.encode(s)) }
            o["hardware"] = .object(hw)
            var sv: JSONObject = ["ok": .bool(service.ok), "on": .bool(servicesOn)]
            if !service.ok { sv["problem"] = .string(service.text) }
            o["services"] = .object(sv)
            var pm: JSONObject = [
                "ok": .bool(permission.ok), "user": .string(user), "uid": .number(Double(getuid())),
                "status": .string(permission.status), "effective": .string(permission.effective),
            ]
            if !permission.ok { pm["problem"] = .string(permission.text) }
            o["permission"] = .object(pm)
            var d: JSONObject = ["ok": .bool(data.ok)]
            if let fleet {
                // The stream's own counts, whatever the verdict.
                for key in ["lines", "usableFixes", "ignored", "unusable", "liveness", "lastFixTime", "sharedNames"] {
                    d[key] = fleet.json[key]
                }
                if fleet.kind == "mqtt" { d["messages"] = fleet.json["lines"] }
                if let read = fleet.lastFixRead {
                    d["age"] = .number((c.now.timeIntervalSince(read) * 10).rounded() / 10)
                }
                if !data.ok { d["problem"] = .string(data.text) }
            } else if data.ok, let w = probe.accepted {
                d["fix"] = .object(EventFix(w).json)
                d["subject"] = .string(w.subject)
                d["time"] = .string(TimestampParser.format(w.time))
            } else {
                d["problem"] = .string(data.text)
            }
            o["data"] = .object(d)
            var engine: JSONObject = ["running": .bool(daemonPID != nil)]
            if let pid = daemonPID, pid > 0 { engine["pid"] = .number(Double(pid)) }
            for (key, value) in settings.sorted(by: { $0.key < $1.key })
            where daemonPID != nil && !value.isEmpty && key != DaemonSettings.sourceStatus {
                engine[key] = .string(value)
            }
            if let last = lastFix {
                var f: JSONObject = ["subject": .string(last.subject), "fix": .object(last.fix.json)]
                if let t = last.time { f["time"] = .string(TimestampParser.format(t)) }
                f["age"] = .number((c.now.timeIntervalSince(last.recorded) * 10).rounded() / 10)
                engine["lastFix"] = .object(f)
            }
            // The engine's own counts since it started (what `/metrics` shows), from its answer.
            for key in ["fixes", "eventsSinceStart", "vehicles", "health"] {
                if let value = engineAnswer?[key] { engine[key] = value }
            }
            o["engine"] = .object(engine)
            o["regions"] = .object(
                JSONObject(
                    uniqueKeysWithValues: regionCounts.sorted { $0.key < $1.key }.map {
                        ($0.key, JSONValue.number(Double($0.value)))
                    }))
            if let eventCount { o["outbox"] = ["events": .number(Double(eventCount))] }
            if !sinks.isEmpty {
                o["sinks"] = .array(
                    sinks.map { sink in
                        var entry: JSONObject = [:]
                        for key in ["id", "url", "topic", "connected", "waiting", "cursor", "delivered", "problem"] {
                            if let value = sink[key] { entry[key] = value }
                        }
                        return .object(entry)
                    })
            }
            c.console.print(JSONValue.object(o).serialized())
            return try verdict()
        }

        func row(_ label: String, _ verdict: String, _ text: String) {
            c.console.print(
                label.padding(toLength: 14, withPad: " ", startingAt: 0)
                    + verdict.padding(toLength: 9, withPad: " ", startingAt: 0) + text)
        }
        let indent = String(repeating: " ", count: 23)
        row("1 Hardware", hardware.ok ? "ok" : "PROBLEM", hardware.text)
        for line in hardware.detail { c.console.print(indent + line) }
        row("2 Service", service.ok ? "on" : "OFF", service.text)
        row("3 Permission", permission.ok ? "ok" : "PROBLEM", permission.text)
        row("4 Data", data.ok ? "ok" : "PROBLEM", data.text)
        if let pid = daemonPID {
            var text =
                "running" + (pid > 0 ? " (pid \(pid)" : " (")
                + (settings[DaemonSettings.started].map { ", since \($0))" } ?? ")")
            if let source = settings[DaemonSettings.sourceAddress] { text += ", fixes from \(source)" }
            row("Engine", "ok", text)
            if settings[DaemonSettings.connection] == "disconnected",
                let why = settings[DaemonSettings.connectionReason]
            {
                c.console.print(indent + "the engine cannot reach its source: \(why)")
            }
            if let liveness = settings[DaemonSettings.liveness] {
                c.console.print(
                    indent + "source \(liveness)"
                        + (settings[DaemonSettings.livenessChanged].map { " since \($0)" } ?? ""))
            }
            if let fixes = engineAnswer?["fixes"], let accepted = fixes["accepted"]?.intValue {
                var text = "fixes since start: \(accepted) accepted, \(fixes["refusedTotal"]?.intValue ?? 0) refused"
                let reasons = (fixes["refused"]?.objectValue ?? [:]).compactMap { k, v in v.intValue.map { (k, $0) } }
                if !reasons.isEmpty {
                    text +=
                        " ("
                        + reasons.sorted { ($1.1, $0.0) < ($0.1, $1.0) }.map { "\($0.1) \($0.0)" }
                        .joined(separator: ", ") + ")"
                }
                c.console.print(indent + text)
            }
            for problem in engineAnswer?["health"]?["problems"]?.arrayValue?.compactMap(\.stringValue) ?? [] {
                c.console.print(indent + "unhealthy: " + problem)
            }
        } else {
            row("Engine", "stopped", "not running: start it with `geofence run` (or: sudo systemctl start geofence)")
        }
        if let last = lastFix {
            c.console.print(
                indent
                    + String(
                        format: "last fix recorded %@ ago: %.6f, %.6f ±%.1f m from %@",
                        DurationParser.format(max(0, (c.now.timeIntervalSince(last.recorded)).rounded())),
                        last.fix.latitude, last.fix.longitude, last.fix.accuracy, last.subject))
        }
        let total = regionCounts.values.reduce(0, +)
        if total == 0 {
            row("Regions", "none", "add one: geofence add --lat LAT --lon LON --radius METRES")
        } else {
            let parts = regionCounts.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }
            row("Regions", "", "\(total): " + parts.joined(separator: ", "))
        }
        if let eventCount { row("Outbox", "", "\(eventCount) events") }
        for sink in sinks {
            let connected = sink["connected"]?.boolValue == true
            var text =
                "\(sink["id"]?.stringValue ?? "?") to \(sink["url"]?.stringValue ?? "?"): "
                + (connected ? "connected" : "not connected") + ", \(sink["waiting"]?.intValue ?? 0) events waiting"
            if let problem = sink["problem"]?.stringValue { text += " (\(problem))" }
            row("Sink", connected ? "ok" : "PROBLEM", text)
        }
        try verdict()
    }
}
