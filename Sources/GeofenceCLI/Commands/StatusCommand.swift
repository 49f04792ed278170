import Foundation
import GeofenceCore
import GeofenceEngine
import GeofenceGPSD
import GeofenceStore

/// `geofence status`: what works, what does not, and how to fix it. Works without the daemon.
enum StatusCommand {
    /// What gpsd itself said within the wait.
    struct Probe: Sendable {
        var reachable = false
        var reason: String?
        var snapshot: CapabilitySnapshot?
        var fix: Fix?
        var accepted: WeightedFix?
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
                for case .ready(let ready) in assembler.offer(f, now: monotonicSeconds()) {
                    if case .accepted(let w) = filter.evaluate(ready) { probe.accepted = w }
                }
                if probe.accepted != nil, probe.snapshot != nil { break loop }
            default:
                break
            }
        }
        timer.cancel()
        await source.stop()
        return probe
    }

    static func run(_ c: CommandContext) throws {
        let address = try c.gpsdAddress()
        let wait = try c.positiveDuration("--wait", default: 2)
        let probe = try waitFor { await ask(address, wait: wait) }

        let directory = c.stateDirectory
        let store: StateStore? =
            FileManager.default.fileExists(atPath: directory + "/" + StateStore.fileName)
            ? try c.openStore() : nil
        let daemonPID = DaemonLock.holder(directory: directory)
        var settings: [String: String] = [:]
        var regionCounts: [String: Int] = [:]
        var pendingReasons: [String: Int] = [:]
        var eventCount = 0
        var lastFix: (subject: String, fix: EventFix, time: Date?, recorded: Date)?
        if let store {
            for key in [
                DaemonSettings.pid, DaemonSettings.started, DaemonSettings.sourceAddress, DaemonSettings.connection,
                DaemonSettings.connectionReason, DaemonSettings.liveness, DaemonSettings.livenessChanged,
            ] {
                settings[key] = try store.setting(key)
            }
            for region in try store.regions() {
                regionCounts[region.status.kind.rawValue, default: 0] += 1
                if region.status.kind != .monitoring { pendingReasons[region.status.description, default: 0] += 1 }
            }
            eventCount = try store.eventCount()
            for s in try store.subjects() {
                guard let fix = s.record.lastFix else { continue }
                if lastFix == nil || s.updatedAt > lastFix!.recorded {
                    lastFix = (s.subject, fix, s.record.lastFixTime, s.updatedAt)
                }
            }
        }

        // The answers, cheapest first, each with its fix.
        var hardware: (ok: Bool, text: String, detail: [String])
        if !probe.reachable {
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
        let data: (ok: Bool, text: String)
        if let w = probe.accepted {
            data = (
                true,
                String(
                    format: "fixes arriving: %.6f, %.6f ±%.1f m (%@) from %@", w.coordinate.latitude,
                    w.coordinate.longitude, w.accuracy, w.fix.mode == FixMode.threeD ? "3D" : "2D", w.subject)
            )
        } else if probe.fix != nil {
            data = (false, "gpsd sends reports but no usable fix yet: the receiver may have no view of the sky")
        } else if probe.reachable {
            data = (false, "no fix within \(DurationParser.format(wait)): is the receiver connected and configured?")
        } else {
            data = (false, "no data: gpsd is not reachable")
        }

        if c.json {
            var o: JSONObject = ["stateDirectory": .string(directory)]
            var hw: JSONObject = [
                "ok": .bool(hardware.ok), "gpsd": .string("\(address)"), "reachable": .bool(probe.reachable),
            ]
            if !hardware.ok { hw["problem"] = .string(hardware.text) }
            if let s = probe.snapshot { hw["capabilities"] = .object(CapabilityJSON.encode(s)) }
            o["hardware"] = .object(hw)
            var d: JSONObject = ["ok": .bool(data.ok)]
            if data.ok, let w = probe.accepted {
                d["fix"] = .object(EventFix(w).json)
                d["subject"] = .string(w.subject)
                d["time"] = .string(TimestampParser.format(w.time))
            } else {
                d["problem"] = .string(data.text)
            }
            o["data"] = .object(d)
            var engine: JSONObject = ["running": .bool(daemonPID != nil)]
            if let pid = daemonPID, pid > 0 { engine["pid"] = .number(Double(pid)) }
            for (key, value) in settings.sorted(by: { $0.key < $1.key }) where daemonPID != nil && !value.isEmpty {
                engine[key] = .string(value)
            }
            if let last = lastFix {
                var f: JSONObject = ["subject": .string(last.subject), "fix": .object(last.fix.json)]
                if let t = last.time { f["time"] = .string(TimestampParser.format(t)) }
                f["age"] = .number((c.now.timeIntervalSince(last.recorded) * 10).rounded() / 10)
                engine["lastFix"] = .object(f)
            }
            o["engine"] = .object(engine)
            o["regions"] = .object(
                JSONObject(
                    uniqueKeysWithValues: regionCounts.sorted { $0.key < $1.key }.map {
                        ($0.key, JSONValue.number(Double($0.value)))
                    }))
            o["outbox"] = ["events": .number(Double(eventCount))]
            c.console.print(JSONValue.object(o).serialized())
            return
        }

        func row(_ label: String, _ verdict: String, _ text: String) {
            c.console.print(
                label.padding(toLength: 12, withPad: " ", startingAt: 0)
                    + verdict.padding(toLength: 9, withPad: " ", startingAt: 0) + text)
        }
        let indent = String(repeating: " ", count: 21)
        row("Hardware", hardware.ok ? "ok" : "PROBLEM", hardware.text)
        for line in hardware.detail { c.console.print(indent + line) }
        row("Data", data.ok ? "ok" : "PROBLEM", data.text)
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
            for (reason, count) in pendingReasons.sorted(by: { $0.key < $1.key }) {
                c.console.print(indent + "\(count) \(reason)")
            }
        }
        row("Outbox", "", "\(eventCount) events")
    }
}
