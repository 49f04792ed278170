import GeofenceCore

/// One thing the gpsd source has to say, in the order it happened.
///
/// Failures are values here, not thrown errors: a source that cannot reach gpsd keeps retrying
/// and keeps reporting, and its stream ends only when the source is stopped. So the consumer
/// is a single `for await report in source.reports` with a `switch`, and there is no error
/// path that would end monitoring for good.
package enum GPSDReport: Sendable, Equatable {
    /// Connected to gpsd and asked it to stream reports.
    case connected
    /// Not connected: the connection failed or dropped; the source retries after `retryIn`.
    case disconnected(GPSDDisconnection)
    /// What gpsd and its devices are (first question); sent after each connect and again when
    /// a device is added, removed, re-identified, or shows it can report more than was known.
    case capabilities(CapabilitySnapshot)
    /// A TPV report, exactly as gpsd sent it (several per epoch; no filtering here).
    case fix(Fix)
    /// Several fixes at once, in order: what a fast file or FIFO source hands over, so the consumer pays one
    /// hand-over per batch rather than per fix. gpsd's own source sends `.fix`.
    case fixes([Fix])
    /// Data stopped or resumed arriving (fourth question).
    case liveness(SourceLiveness.Transition)
    /// gpsd answered with an ERROR report (for example: no such device).
    case gpsdError(String)
}

/// Why the source is not connected to gpsd, with a reason a person can act on.
package struct GPSDDisconnection: Sendable, Equatable, CustomStringConvertible {
    package enum Cause: Sendable, Equatable {
        /// Nothing accepted the connection; the system's reason ("connection refused").
        case unreachable(String)
        /// The host name did not resolve; the resolver's reason.
        case hostNotFound(String)
        /// No answer to the connection attempt within the connect timeout.
        case timedOut
        /// libgps could not open the session after all; its reason.
        case openFailed(String)
        /// gpsd closed the connection (it stopped, crashed or restarted).
        case closedByGPSD
        /// Reading from gpsd failed; the system's reason.
        case readFailed(String)
        /// The peer sent something libgps could not read: not gpsd, or a broken one.
        case garbled
    }

    package var address: GPSDAddress
    package var cause: Cause
    /// Consecutive failed attempts so far, this one included.
    package var attempt: Int
    /// How long the source waits before its next attempt.
    package var retryIn: Duration

    package init(address: GPSDAddress, cause: Cause, attempt: Int, retryIn: Duration) {
        self.address = address
        self.cause = cause
        self.attempt = attempt
        self.retryIn = retryIn
    }

    package var description: String {
        let at = "\(address.host):\(address.port)"
        let startIt =
            address.isLocal
            ? "is it running? sudo systemctl start gpsd"
            : "is it running there, and listening on the network (gpsd -G)?"
        switch cause {
        case .unreachable(let reason):
            return "gpsd is not reachable at \(at) (\(reason)): \(startIt)"
        case .hostNotFound(let reason):
            return "gpsd host \"\(address.host)\" was not found (\(reason)): check the gpsd address"
        case .timedOut:
            return "gpsd at \(at) did not answer the connection attempt in time: check the address and the network"
        case .openFailed(let reason):
            return "could not open a gpsd session at \(at) (\(reason))"
        case .closedByGPSD:
            return "gpsd at \(at) closed the connection (it stopped or restarted)"
        case .garbled:
            return "the peer at \(at) sent data that is not gpsd JSON (or a line too long to read): is it really gpsd?"
        case .readFailed(let reason):
            return "lost the connection to gpsd at \(at) (\(reason))"
        }
    }
}
