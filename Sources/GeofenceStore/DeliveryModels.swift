import Foundation
import GeofenceCore

/// Where a delivery (one event to one hook) stands.
package enum DeliveryStatus: String, Sendable, CaseIterable, Comparable {
    /// Waiting for its turn or its next attempt.
    case pending
    /// A hook process is running it now.
    case running
    /// The hook exited 0.
    case done
    /// Given up after the maximum attempts or age (or its hook was removed); `geofence events retry` revives it.
    case dead

    package static func < (a: DeliveryStatus, b: DeliveryStatus) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }
}

/// One attempt at a delivery, as kept in its history.
package struct DeliveryAttempt: Sendable, Equatable {
    package var number: Int
    package var startedAt: Date
    /// Seconds from spawn to exit.
    package var duration: Double
    package var exitCode: Int32?
    package var signal: Int32?
    package var timedOut: Bool
    /// Why it failed when the hook did not run or was stopped (spawn error, shutdown).
    package var error: String?
    /// When the next attempt is due, for an attempt that failed and will be retried.
    package var retryAt: Date?

    package init(
        number: Int, startedAt: Date, duration: Double, exitCode: Int32? = nil, signal: Int32? = nil,
        timedOut: Bool = false, error: String? = nil, retryAt: Date? = nil
    ) {
        self.number = number
        self.startedAt = startedAt
        self.duration = duration
        self.exitCode = exitCode
        self.signal = signal
        self.timedOut = timedOut
        self.error = error
        self.retryAt = retryAt
    }

    /// True when the hook exited 0.
    package var succeeded: Bool { exitCode == 0 && signal == nil && !timedOut && error == nil }

    package var json: JSONObject {
        var o: JSONObject = [
            "attempt": .number(Double(number)), "startedAt": .string(TimestampParser.format(startedAt)),
            "duration": .number((duration * 1000).rounded() / 1000),
        ]
        if let exitCode { o["exit"] = .number(Double(exitCode)) }
        if let signal { o["signal"] = .number(Double(signal)) }
        if timedOut { o["timedOut"] = .bool(true) }
        if let error { o["error"] = .string(error) }
        if let retryAt { o["retryAt"] = .string(TimestampParser.format(retryAt)) }
        return o
    }

    package init?(json o: JSONObject) {
        guard let number = o["attempt"]?.intValue, let started = o["startedAt"]?.stringValue,
            let startedAt = try? TimestampParser.parse(started)
        else { return nil }
        self.init(
            number: number, startedAt: startedAt, duration: o["duration"]?.doubleValue ?? 0,
            exitCode: o["exit"]?.intValue.map { Int32(truncatingIfNeeded: $0) },
            signal: o["signal"]?.intValue.map { Int32(truncatingIfNeeded: $0) },
            timedOut: o["timedOut"]?.boolValue ?? false, error: o["error"]?.stringValue,
            retryAt: o["retryAt"]?.stringValue.flatMap { try? TimestampParser.parse($0) })
    }
}

/// A delivery as the store holds it: which hook, where it stands, what its last attempt did.
package struct StoredDelivery: Sendable, Equatable {
    package var id: Int64
    package var eventSeq: Int64
    /// `region` for the region's own hook, `hook:<id>` for a global one.
    package var hook: String
    /// The command, as it was when the event was dispatched.
    package var command: String
    package var regionName: String?
    /// The uid the hook runs as; nil: the daemon's own (issue 5 sets it).
    package var runAs: UInt32?
    /// Deliveries with the same key start one at a time, in id order.
    package var orderKey: DeliveryOrderKey
    package var status: DeliveryStatus
    package var attempts: Int
    /// When a pending delivery may next start.
    package var nextAttemptAt: Date
    package var createdAt: Date
    /// Start of the current retry budget (creation, or the last retry by hand): the age limit counts from here.
    package var queuedAt: Date
    package var startedAt: Date?
    package var finishedAt: Date?
    package var lastExit: Int32?
    package var lastSignal: Int32?
    package var timedOut: Bool
    package var lastError: String?
    package var lastDuration: Double?
    /// The start of the last attempt's output, at most the runner's cap per stream.
    package var stdout: [UInt8]
    package var stderr: [UInt8]
    /// How much the last attempt wrote in all (more than `stdout.count` when it was capped).
    package var stdoutBytes: Int
    package var stderrBytes: Int
    /// The last attempts, oldest first (at most `DeliveryRepository.historyLimit`).
    package var history: [DeliveryAttempt]
    /// Grows with every change, for `geofence events --follow`.
    package var changeSeq: Int64
}

/// An event with its deliveries, for `geofence events`.
package struct EventDeliveries: Sendable, Equatable {
    package var event: StoredEvent
    /// False while the event waits for the runner to create its deliveries.
    package var dispatched: Bool
    package var deliveries: [StoredDelivery]

    package init(event: StoredEvent, dispatched: Bool, deliveries: [StoredDelivery]) {
        self.event = event
        self.dispatched = dispatched
        self.deliveries = deliveries
    }
}

/// Which deliveries `geofence events` shows.
package enum DeliveryFilter: Sendable, Equatable {
    /// Every event, with all its deliveries.
    case all
    /// Waiting or running.
    case pending
    /// Waiting for a retry after a failed attempt.
    case failed
    case dead

    var condition: String {
        switch self {
        case .all: "1"
        case .pending: "status IN ('pending', 'running')"
        case .failed: "status = 'pending' AND attempts > 0"
        case .dead: "status = 'dead'"
        }
    }
}

/// The first waiting (or running) delivery of an order key: the only one of its key that may run.
package struct DeliveryHead: Sendable, Equatable {
    package var id: Int64
    package var orderKey: DeliveryOrderKey
    package var nextAttemptAt: Date
    package var running: Bool

    package init(id: Int64, orderKey: DeliveryOrderKey, nextAttemptAt: Date, running: Bool = false) {
        self.id = id
        self.orderKey = orderKey
        self.nextAttemptAt = nextAttemptAt
        self.running = running
    }
}

/// A delivery taken by the runner: everything needed to run its hook.
package struct ClaimedDelivery: Sendable, Equatable {
    package var id: Int64
    package var eventSeq: Int64
    package var eventID: String
    package var eventType: String
    package var region: String?
    package var regionName: String?
    package var subject: String?
    /// The event's JSON, exactly as stored: the hook's stdin.
    package var body: String
    /// What the hook's environment takes of `body`, decoded once with it.
    package var fields: EventFields
    package var hook: String
    package var command: String
    package var runAs: UInt32?
    package var orderKey: DeliveryOrderKey
    /// This attempt's number, from 1.
    package var attempt: Int
    package var queuedAt: Date
}

/// How an attempt ended, to be recorded.
package struct DeliveryOutcome: Sendable {
    package var id: Int64
    /// `done`, `pending` (retry at `nextAttemptAt`) or `dead`.
    package var status: DeliveryStatus
    package var nextAttemptAt: Date?
    package var attempt: DeliveryAttempt
    package var stdout: [UInt8]
    package var stderr: [UInt8]
    package var stdoutBytes: Int
    package var stderrBytes: Int
    package var finishedAt: Date

    package init(
        id: Int64, status: DeliveryStatus, nextAttemptAt: Date?, attempt: DeliveryAttempt, stdout: [UInt8] = [],
        stderr: [UInt8] = [], stdoutBytes: Int = 0, stderrBytes: Int = 0, finishedAt: Date
    ) {
        self.id = id
        self.status = status
        self.nextAttemptAt = nextAttemptAt
        self.attempt = attempt
        self.stdout = stdout
        self.stderr = stderr
        self.stdoutBytes = stdoutBytes
        self.stderrBytes = stderrBytes
        self.finishedAt = finishedAt
    }
}
