import CSystemd
import Foundation
import Synchronization

/// systemd's side of a `Type=notify` service (sd_notify(3)): READY=1 once the engine serves, a one-line
/// STATUS=, STOPPING=1 at a stop, and WATCHDOG=1 from the monitor's own loop. Without `NOTIFY_SOCKET` in
/// the environment (not under systemd, or `Type=simple`) every call does nothing.
package final class ServiceManager: Sendable {
    /// Whether systemd listens (NOTIFY_SOCKET is set).
    package let isEnabled: Bool
    /// How often the monitor's loop says it is alive: half the watchdog timeout systemd set for this
    /// process (WATCHDOG_USEC, and WATCHDOG_PID when given); nil: no watchdog.
    package let watchdogInterval: Duration?
    private let lastStatus = Mutex<String?>(nil)

    package init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        isEnabled = !(environment["NOTIFY_SOCKET"] ?? "").isEmpty
        var usec: UInt64 = 0
        // sd_watchdog_enabled reads the process's own environment (and checks WATCHDOG_PID against getpid()),
        // which is the one `environment` was read from.
        if isEnabled, sd_watchdog_enabled(0, &usec) > 0, usec > 0 {
            watchdogInterval = .microseconds(Int64(clamping: usec / 2))
        } else {
            watchdogInterval = nil
        }
    }

    /// Sends one notification (several `KEY=value` lines); nothing without NOTIFY_SOCKET. A failure to send is
    /// not the engine's: systemd then times out or restarts it, which is what it is for.
    package func notify(_ text: String) {
        guard isEnabled else { return }
        _ = sd_notify(0, text)
    }

    /// The engine serves: the control socket listens and the regions are loaded.
    package func ready(status: String) {
        lastStatus.withLock { $0 = status }
        notify("READY=1\nSTATUS=\(Self.oneLine(status))")
    }

    /// What `systemctl status geofence` shows under the unit's name; sent only when it changed.
    package func status(_ line: String) {
        guard isEnabled else { return }
        let changed = lastStatus.withLock { last in
            defer { last = line }
            return last != line
        }
        if changed { notify("STATUS=\(Self.oneLine(line))") }
    }

    /// The engine stops (systemd then waits for it rather than calling it failed).
    package func stopping(_ why: String) {
        notify("STOPPING=1\nSTATUS=stopping (\(Self.oneLine(why)))")
    }

    /// The work loop is alive.
    package func watchdog() {
        notify("WATCHDOG=1")
    }

    private static func oneLine(_ text: String) -> String {
        text.replacingOccurrences(of: "\n", with: " ")
    }
}

/// What the monitor's loop does besides ticking, under systemd: WATCHDOG=1 every `interval` and a fresh
/// STATUS= line, both from the loop itself, so a monitor that is stuck stops them.
struct MonitorHeartbeat: Sendable {
    var watchdogInterval: Duration?
    var watchdog: @Sendable () -> Void
    var status: @Sendable (String) -> Void
    /// Fault injection for tests (`DaemonConfiguration.stallMonitorWhile`): runs on the monitor's thread each
    /// turn of its loop and may block it, as a monitor stuck in its work would be.
    var stall: (@Sendable () -> Void)?
}
