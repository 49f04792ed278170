import Foundation
import GeofenceCore
import GeofenceStore
import GeofenceSystem
import Synchronization

/// What an MQTT source does with OwnTracks waypoints (`run --mqtt-waypoints`): ignores them (counted, as any
/// other message that is no fix), or makes them regions of the phone that sent them (`OwnTracksWaypoints`).
package enum MQTTWaypoints: String, Sendable, Equatable, CaseIterable {
    /// Counted as ignored, as before.
    case off
    /// `waypoint` and `waypoints` messages add, change and remove the sending vehicle's regions.
    case regions
}

/// Stores the regions of the OwnTracks waypoints an MQTT source receives (`--mqtt-waypoints regions`), on
/// the source's own connection to the store: the engine follows the change as it follows the CLI's (at its
/// next tick). A message is applied whole or not at all: a bad one changes nothing.
///
/// Anyone the broker lets publish on a waypoints topic can send one message after another, so the lines for
/// messages that changed nothing are held to one a minute each for the refused and for the repeated
/// (`quietInterval`), the next one saying how many were not written; a message that changed regions is always
/// logged.
package final class OwnTracksRegionWriter: Sendable {
    private let store: StateStore
    private let logger: Logger?
    private let refusedLines: Mutex<LogBudget>
    private let unchangedLines: Mutex<LogBudget>
    private let clock = MonotonicClock()

    /// At most one line this often (seconds) for messages that changed nothing.
    package static let quietInterval = 60.0

    package init(store: StateStore, logger: Logger?, quietInterval: Double = OwnTracksRegionWriter.quietInterval) {
        self.store = store
        self.logger = logger
        refusedLines = Mutex(LogBudget(interval: quietInterval))
        unchangedLines = Mutex(LogBudget(interval: quietInterval))
    }

    /// The vehicle a waypoints topic names, as `naming` names the vehicle of that phone's locations (the
    /// topic without its last level, `waypoint` or `waypoints`), or why none.
    package static func subject(topic: String, naming: MQTTVehicleNaming) -> Result<String, RegionValidationError> {
        var levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        if let last = levels.last, last == "waypoint" || last == "waypoints" { levels.removeLast() }
        let base = levels.joined(separator: "/")
        let name: String
        switch naming {
        case .payload: name = OwnTracksJSON.subject(topic: base) ?? base
        case .topic: name = base
        case .level(let n):
            guard n <= levels.count, !levels[n - 1].isEmpty else {
                return .failure(
                    RegionValidationError(field: "(topic)", message: "has no level \(n) to name the vehicle"))
            }
            name = String(levels[n - 1])
        }
        if let problem = SubjectName.problem(name) {
            return .failure(RegionValidationError(field: "(topic)", message: "names a vehicle that \(problem)"))
        }
        return .success(VisibleName.normalized(name))
    }

    /// How long a message waits for the store's write lock (held by a large import, a million regions taking
    /// 11-16 s) before it is given up, with an error line: the source's thread, and the messages behind it, wait.
    static let lockWait = 60.0

    /// `applyWaypoints`, tried again while the store is busy (each try waits out the store's own busy timeout).
    private func applyWaiting(_ update: OwnTracksWaypoints.Update) throws -> WaypointChanges {
        let deadline = Date().addingTimeInterval(Self.lockWait)
        while true {
            do {
                return try store.regions.applyWaypoints(update)
            } catch let error as DatabaseError where error.isBusy && Date() < deadline {
                continue
            }
        }
    }

    /// Applies one `waypoint` or `waypoints` message received on `topic`; says what it changed, or why it
    /// changed nothing, in one line.
    package func apply(_ object: JSONValue, topic: String, naming: MQTTVehicleNaming, label: String) {
        let quotedTopic = JSONValue.string(topic).serialized()
        do {
            let subject = try Self.subject(topic: topic, naming: naming).get()
            let update = try OwnTracksWaypoints.decodeMessage(object, subject: subject, now: Date())
            let changes = try applyWaiting(update)
            let line = "\(label): OwnTracks waypoints of \(JSONValue.string(subject).serialized()): \(changes.summary)"
            if !changes.added.isEmpty || !changes.changed.isEmpty || !changes.removed.isEmpty {
                logger?.info(line)
            } else if let unsaid = admit(unchangedLines) {
                logger?.info(line + Self.unsaid(unsaid, "that changed nothing"))
            }
        } catch let error as RegionValidationError {
            guard let unsaid = admit(refusedLines) else { return }
            logger?.warning(
                "\(label): refused the OwnTracks waypoints on \(quotedTopic), nothing changed: \(error)"
                    + Self.unsaid(unsaid, "refused"))
        } catch {
            logger?.error("\(label): could not store the OwnTracks waypoints on \(quotedTopic): \(error)")
        }
    }

    /// Whether a line for a message that changed nothing may be written now, and how many such lines were not
    /// written since the last one; nil: not now.
    private func admit(_ budget: borrowing Mutex<LogBudget>) -> Int? {
        let now = clock.now
        return budget.withLock { $0.admit(at: now) }
    }

    private static func unsaid(_ count: Int, _ what: String) -> String {
        count == 0 ? "" : "; \(count) more waypoint message(s) \(what) since the last such line, not logged"
    }
}

/// At most one log line per `interval` seconds for something that can come over and over, counting the lines
/// held back so that the next one can say how many.
struct LogBudget: Sendable {
    let interval: Double
    private var lastLine = -Double.infinity
    private var heldBack = 0

    init(interval: Double) { self.interval = interval }

    /// At `now` (seconds on a monotonic clock): nil when the line is to be held back, else how many were held
    /// back since the last line written.
    mutating func admit(at now: Double) -> Int? {
        guard now - lastLine >= interval else {
            heldBack += 1
            return nil
        }
        let count = heldBack
        lastLine = now
        heldBack = 0
        return count
    }
}
