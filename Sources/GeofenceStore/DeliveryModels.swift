import Foundation
import GeofenceCore

/// Where a delivery (one event to one hook) stands.
public enum DeliveryStatus: String, Sendable, CaseIterable, Comparable {
    /// Waiting for its turn or its next attempt.
    case pending
    /// A hook process is running it now.
    case running
    /// The hook exited 0.
    case done
    /// Given up after the maximum attempts or age (or its hook was removed); `geofence events retry` revives it.
    case dead

    public static func < (a: DeliveryStatus, b: DeliveryStatus) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }
}

/// One attempt at a delivery, as kept in its history.
public struct DeliveryAttempt: Sendable, Equatable {
    public var number: Int
    public var startedAt: Date
    /// Seconds from spawn to exit.
    public var duration: Double
    public var exitCode: Int32?
    public var signal: Int32?
    public var timedOut: Bool
    /// Why it failed when the hook did not run or was stopped (spawn error, shutdown).
    public var error: String?
    /// When the next attempt is due, for an attempt that failed and will be retried.
    public var retryAt: Date?

    public init(
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
    public var succeeded: Bool { exitCode == 0 && signal == nil && !timedOut && error == nil }

    public var json: JSONObject {
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

    public init?(json o: JSONObject) {
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
public struct StoredDelivery: Sendable, Equatable {
    public var id: Int64
    public var eventSeq: Int64
    /// `region` for the region's own hook, `hook:<id>` for a global one.
    public var hook: String
    /// The command, as it was when the event was dispatched.
    public var command: String
    public var regionName: String?
    /// The uid the hook runs as; nil: the daemon's own (issue 5 sets it).
    public var runAs: UInt32?
    /// Deliveries with the same key start one at a time, in id order.
    package var orderKey: DeliveryOrderKey
    public var status: DeliveryStatus
    public var attempts: Int
    /// When a pending delivery may next start.
    public var nextAttemptAt: Date
    public var createdAt: Date
    /// Start of the current retry budget (creation, or the last retry by hand): the age limit counts from here.
    public var queuedAt: Date
    public var startedAt: Date?
    public var finishedAt: Date?
    public var lastExit: Int32?
    public var lastSignal: Int32?
    public var timedOut: Bool
    public var lastError: String?
    public var lastDuration: Double?
    /// The start of the last attempt's output, at most the runner's cap per stream.
    public var stdout: [UInt8]
    public var stderr: [UInt8]
    /// How much the last attempt wrote in all (more than `stdout.count` when it was capped).
    public var stdoutBytes: Int
    public var stderrBytes: Int
    /// The last attempts, oldest first (at most `DeliveryRepository.historyLimit`).
    public var history: [DeliveryAttempt]
    /// Grows with every change, for `geofence events --follow`.
    public var changeSeq: Int64
}

/// An event with its deliveries, for `geofence events`.
public struct EventDeliveries: Sendable, Equatable {
    public var event: StoredEvent
    /// False while the event waits for the runner to create its deliveries.
    public var dispatched: Bool
    public var deliveries: [StoredDelivery]

    public init(event: StoredEvent, dispatched: Bool, deliveries: [StoredDelivery]) {
        self.event = event
        self.dispatched = dispatched
        self.deliveries = deliveries
    }
}

/// Which deliveries `geofence events` shows.
public enum DeliveryFilter: Sendable, Equatable {
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
public struct DeliveryHead: Sendable, Equatable {
    public var id: Int64
    package var orderKey: DeliveryOrderKey
    public var nextAttemptAt: Date
    public var running: Bool

    package init(id: Int64, orderKey: DeliveryOrderKey, nextAttemptAt: Date, running: Bool = false) {
        self.id = id
        self.orderKey = orderKey
        self.nextAttemptAt = nextAttemptAt
        self.running = running
    }
}

/// A delivery taken by the runner: everything needed to run its hook.
public struct ClaimedDelivery: Sendable, Equatable {
    public var id: Int64
    public var eventSeq: Int64
    public var eventID: String
    public var eventType: String
    public var region: String?
    public var regionName: String?
    public var subject: String?
    /// The event's JSON, exactly as stored: the hook's stdin.
    public var body: String
    /// What the hook's environment takes of `body`, decoded once with it.
    public var fields: EventFields
    public var hook: String
    public var command: String
    public var runAs: UInt32?
    package var orderKey: DeliveryOrderKey
    /// This attempt's number, from 1.
    public var attempt: Int
    public var queuedAt: Date
}

/// How an attempt ended, to be recorded.
public struct DeliveryOutcome: Sendable {
    public var id: Int64
    /// `done`, `pending` (retry at `nextAttemptAt`) or `dead`.
    public var status: DeliveryStatus
    public var nextAttemptAt: Date?
    public var attempt: DeliveryAttempt
    public var stdout: [UInt8]
    public var stderr: [UInt8]
    public var stdoutBytes: Int
    public var stderrBytes: Int
    public var finishedAt: Date

    public init(
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
