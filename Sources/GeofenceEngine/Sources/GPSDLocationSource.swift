import GeofenceCore
import GeofenceGPSD

/// gpsd as a `LocationSource`: the libgps session of `GPSDSource`, its reports mapped into the engine's terms on
/// the session's thread. A fix waits there while the engine has `LocationReports.BackPressure.standard` reports
/// to judge, so a gpsd (or a peer on its port) faster than the engine is held back by the socket, not by memory;
/// news of the connection and of liveness never waits.
public final class GPSDLocationSource: LocationSource {
    private let gpsd: GPSDSource
    public let reports: LocationReports

    public init(configuration: GPSDSource.Configuration) {
        let reports = LocationReports(backPressure: .standard)
        self.reports = reports
        gpsd = GPSDSource(
            configuration: configuration,
            delivery: { report in
                switch report {
                case .fix, .fixes: reports.send(report.locationReport)
                default: reports.sendNow(report.locationReport)
                }
            })
    }

    /// The gpsd address, deadlines and backoff it runs with.
    public var configuration: GPSDSource.Configuration { gpsd.configuration }

    public var label: String { "gpsd at \(gpsd.configuration.address)" }

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
