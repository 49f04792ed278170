import GeofenceCore
import GeofenceGPSD
import Synchronization

/// gpsd as a `LocationSource`: the libgps session of `GPSDSource`, its reports mapped into the engine's terms on
/// the session's thread. A fix waits there while the engine has `LocationReports.BackPressure.standard` reports
/// to judge, so a gpsd (or a peer on its port) faster than the engine is held back by the socket, not by memory;
/// news of the connection and of liveness never waits.
public final class GPSDLocationSource: LocationSource {
    private let gpsd: GPSDSource
    /// Everything the gpsd session says, in the engine's terms; fixes with `standard` back-pressure.
    public let reports: LocationReports
    /// The box's own name for its receiver (`run --subject`): the subject of its fixes, and so of its events,
    /// instead of gpsd's device path. nil: the device path.
    public let subject: String?

    /// A source for the gpsd `configuration` names (`GPSDConfiguration()`: the local gpsd, every device); with
    /// a `subject`, every fix is that vehicle's. Nothing is opened before `start()`.
    public init(configuration: GPSDSource.Configuration, subject: String? = nil) {
        let reports = LocationReports(backPressure: .standard)
        self.reports = reports
        self.subject = subject
        // Touched only on the session's thread, which delivers every report.
        let naming = Mutex(subject.map { SubjectNaming(name: $0) })
        gpsd = GPSDSource(
            configuration: configuration,
            delivery: { report in
                let mapped = naming.withLock { n -> [LocationReport] in
                    n == nil ? [report.locationReport] : n!.rename(report.locationReport)
                }
                for each in mapped {
                    switch each {
                    case .fix, .fixes: reports.send(each)
                    default: reports.sendNow(each)
                    }
                }
            })
    }

    /// The gpsd address, deadlines and backoff it runs with.
    public var configuration: GPSDSource.Configuration { gpsd.configuration }

    /// `gpsd at HOST:PORT[:DEVICE]`, for logs and `status`.
    public var label: String { "gpsd at \(gpsd.configuration.address)" }

    /// Starts the session's thread, which connects (and reconnects, with backoff) on its own; returns at once.
    public func start() {
        gpsd.start()
    }

    /// The session's thread, perhaps waiting for room, goes on at once and closes the connection; what it had
    /// handed over is still judged.
    public func stop() async {
        reports.stopWaiting()
        await gpsd.stop()
        reports.finish()
    }
}

/// `run --subject NAME`: every fix of the receiver is NAME's. A name is for one receiver: when fixes come
/// from a second device of the same gpsd, it says so once (they would be taken for one vehicle's).
package struct SubjectNaming {
    let name: String
    private var devices: [String] = []

    package init(name: String) { self.name = name }

    package mutating func rename(_ report: LocationReport) -> [LocationReport] {
        switch report {
        case .fix(var fix):
            let warning = note(fix.subject)
            fix.subject = name
            return warning.map { [.warning($0), .fix(fix)] } ?? [.fix(fix)]
        case .fixes(var fixes):
            var warnings: [LocationReport] = []
            for i in fixes.indices {
                if let warning = note(fixes[i].subject) { warnings.append(.warning(warning)) }
                fixes[i].subject = name
            }
            return warnings + [.fixes(fixes)]
        default:
            return [report]
        }
    }

    private mutating func note(_ device: String) -> String? {
        guard !devices.contains(device), devices.count < 2 else { return nil }
        devices.append(device)
        guard devices.count == 2 else { return nil }
        return "--subject \(name) names one receiver, but gpsd has fixes from \(devices[0]) and \(devices[1]): "
            + "both are taken as \(name)'s; give the receiver's device in --gpsd HOST:PORT:DEVICE"
    }
}

extension GPSDReport {
    /// The report in the engine's terms: gpsd's causes become a `SourceDown` reason a person can act on.
    package var locationReport: LocationReport {
        switch self {
        case .connected: .up
        case .disconnected(let d): .down(SourceDown(reason: d.description, attempt: d.attempt, retryIn: d.retryIn))
        case .capabilities(let snapshot): .capabilities(snapshot)
        case .fix(let fix): .fix(fix)
        case .fixes(let fixes): .fixes(fixes)
        case .liveness(let transition): .liveness(transition)
        case .gpsdError(let message): .warning("gpsd reported an error: \(message)")
        }
    }
}
