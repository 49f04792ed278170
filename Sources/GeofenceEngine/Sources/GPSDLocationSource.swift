import GeofenceCore
import GeofenceGPSD
import Synchronization

/// gpsd as a `LocationSource`: the libgps session of `GPSDSource`, its reports mapped into the engine's terms
/// by a task started with it. gpsd's own stream is unbounded (the socket is its flow control), so the mapping
/// never waits.
public final class GPSDLocationSource: LocationSource {
    private let gpsd: GPSDSource
    public let reports = LocationReports(backPressure: .unbounded)
    private let forwarding = Mutex<Task<Void, Never>?>(nil)

    public init(configuration: GPSDSource.Configuration) {
        gpsd = GPSDSource(configuration: configuration)
    }

    /// The gpsd address, deadlines and backoff it runs with.
    public var configuration: GPSDSource.Configuration { gpsd.configuration }

    public var label: String { "gpsd at \(gpsd.configuration.address)" }

    public func start() {
        let (gpsd, reports) = (self.gpsd, self.reports)
        forwarding.withLock {
            $0 = Task {
                for await report in gpsd.reports { reports.sendNow(report.locationReport) }
                reports.finish()
            }
        }
        gpsd.start()
    }

    public func stop() async {
        await gpsd.stop()
        await forwarding.withLock { $0 }?.value
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
