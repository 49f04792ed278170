import Foundation
import GeofenceCore
import GeofenceSystem

/// What a `GPSDSource`'s thread runs: connect, stream, reconnect, until stopped.
struct GPSDConnectionLoop: Sendable {
    let configuration: GPSDSource.Configuration
    let continuation: AsyncStream<GPSDReport>.Continuation
    let delivery: GPSDSource.Delivery?
    let control: SourceControl
    let random: @Sendable () -> Double

    func run() {
        defer { control.markExited() }
        let runner = Runner(loop: self)
        runner.run()
    }
}

/// The thread's mutable state; lives and dies on that thread.
private final class Runner {
    private let configuration: GPSDSource.Configuration
    private let continuation: AsyncStream<GPSDReport>.Continuation
    private let delivery: GPSDSource.Delivery?
    private let control: SourceControl
    private let random: @Sendable () -> Double
    private let clock = MonotonicClock()
    private let session: GPSDSession
    private var liveness: SourceLiveness
    /// Consecutive failed or short-lived connections, for the backoff.
    private var failures = 0
    private var snapshot = CapabilitySnapshot()
    private var snapshotSent = false
    /// The last fix time per device, for inferring update intervals.
    private var lastFixTime: [String: Date] = [:]
    private var strangeCount = 0
    private var lastStrangeReport = -Double.infinity
    /// The devices fixes came from, with when each was last heard (monotonic): at most `maximumDevices`, kept
    /// across reconnections, so that a peer naming a new device in every line cannot grow the engine's state
    /// (here, in the filter and in the monitor) without bound.
    private var fixDevices: [String: Double] = [:]
    private var refusedDevices = 0
    private var lastDeviceWarning = -Double.infinity

    /// gpsd serves a few receivers (its own build limit is 4 by default); more at once is not a gpsd.
    static let maximumDevices = 32
    /// A device silent this long (seconds) makes room for a new one.
    static let deviceIdleLimit = 3600.0

    init(loop: GPSDConnectionLoop) {
        configuration = loop.configuration
        continuation = loop.continuation
        delivery = loop.delivery
        control = loop.control
        random = loop.random
        session = GPSDSession(fallbackSubject: configuration.address.device ?? configuration.address.description)
        liveness = SourceLiveness(configuration: configuration.liveness, startedAt: clock.now)
    }

    private var isStopped: Bool { control.isStopRequested }

    func run() {
        defer { session.close() }
        while !isStopped {
            if let cause = connect() {
                waitBeforeRetry(after: cause)
                continue
            }
            guard !isStopped else { return }
            let connectedAt = clock.now
            emit(.connected)
            guard let cause = stream() else { return }  // stopped
            session.close()
            if clock.now - connectedAt >= configuration.healthyConnectionDuration { failures = 0 }
            if let transition = liveness.connectionDropped(at: clock.now) { emit(.liveness(transition)) }
            waitBeforeRetry(after: cause)
        }
    }

    // MARK: - Connecting

    /// Connects and starts the watch; the cause when that failed, nil when connected (or stopped).
    private func connect() -> GPSDDisconnection.Cause? {
        let address = configuration.address
        let probe = ConnectProbe.probe(
            host: address.host,
            port: address.port,
            timeout: configuration.connectTimeout,
            now: { self.clock.now },
            shouldStop: { self.control.isStopRequested }
        )
        switch probe {
        case nil: break
        case .stopped?: return nil
        case .hostNotFound(let reason)?: return .hostNotFound(reason)
        case .unreachable(let error)?: return .unreachable(error.reason)
        case .timedOut?: return .timedOut
        }
        do throws(GPSDSession.Failure) {
            try session.open(host: address.host, port: address.port)
            try session.watch(device: address.device)
        } catch {
            session.close()
            switch error {
            case .openFailed(let reason): return .openFailed(reason)
            case .readFailed(let error): return .readFailed(error.reason)
            case .closedByGPSD: return .closedByGPSD
            case .sendFailed: return .openFailed("could not send the WATCH command")
            case .garbled: return .garbled
            }
        }
        snapshot = CapabilitySnapshot()
        snapshotSent = false
        lastFixTime = [:]
        return nil
    }

    private func waitBeforeRetry(after cause: GPSDDisconnection.Cause) {
        guard !isStopped else { return }
        let delay = configuration.backoff.delay(forAttempt: failures, unit: random())
        failures += 1
        emit(
            .disconnected(
                GPSDDisconnection(
                    address: configuration.address,
                    cause: cause,
                    attempt: failures,
                    retryIn: .milliseconds(Int64((delay * 1000).rounded()))
                )
            )
        )
        let wake = clock.now + delay
        while !isStopped {
            checkDeadlines()
            let now = clock.now
            guard now < wake else { return }
            Thread.sleep(forTimeInterval: sliceUntil(wake))
        }
    }

    // MARK: - Streaming

    /// Reads reports until the connection ends (returns why) or the source is stopped (nil).
    private func stream() -> GPSDDisconnection.Cause? {
        while !isStopped {
            checkDeadlines()
            do throws(GPSDSession.Failure) {
                guard try session.waitForInput(timeout: sliceUntil(nil)) else { continue }
                guard let message = try session.read(receivedAt: Date()) else { continue }
                handle(message)
            } catch {
                switch error {
                case .closedByGPSD: return .closedByGPSD
                case .readFailed(let error): return .readFailed(error.reason)
                case .openFailed(let reason): return .openFailed(reason)
                case .sendFailed: return .readFailed("send failed")
                case .garbled: return .garbled
                }
            }
        }
        return nil
    }

    private func handle(_ message: GPSDMessage) {
        switch message {
        case .version(let daemon):
            snapshot.daemon = daemon
        case .devices(let devices):
            var fresh = CapabilitySnapshot(daemon: snapshot.daemon)
            for device in devices.prefix(Self.maximumDevices) {
                var device = device
                if let known = snapshot.device(at: device.path) {
                    device.reports = known.reports
                    device.observedInterval = known.observedInterval
                }
                fresh.update(device)
            }
            sendSnapshot(fresh)
        case .device(let device, let removed):
            // A snapshot of at most `maximumDevices` devices: a peer that adds more is not heard.
            if !removed && snapshot.devices.count >= Self.maximumDevices && snapshot.device(at: device.path) == nil {
                return
            }
            var updated = snapshot
            if removed { updated.removeDevice(at: device.path) } else { updated.update(device) }
            sendSnapshot(updated)
        case .fix(let fix):
            guard admit(device: fix.subject) else { return }
            // Whether data arrives, not how old it is: the filter judges the time, and refusals are watched.
            if FixFilter.classify(fix, now: nil, configuration: .init()).isUsable,
                let transition = liveness.usableFix(at: clock.now)
            {
                emit(.liveness(transition))
            }
            emit(.fix(fix))
            var updated = snapshot
            updated.learn(from: fix, previousFixTime: lastFixTime[fix.subject])
            if let time = fix.time { lastFixTime[fix.subject] = time }
            if snapshotSent { sendSnapshot(updated) } else { snapshot = updated }
        case .error(let text):
            emit(.gpsdError(text))
        case .other(let name):
            noteStrange(name)
        }
    }

    /// The report classes gpsd 3.22 sends; anything else on the wire is not gpsd talking.
    static let knownClasses: Set<String> = [
        "TPV", "SKY", "GST", "ATT", "IMU", "TOFF", "PPS", "OSC", "POLL", "WATCH", "VERSION", "DEVICES", "DEVICE",
        "ERROR", "AIS", "RTCM2", "RTCM3", "SUBFRAME", "RAW", "NMEA",
    ]

    /// Says (at most once a minute) that the peer sends things gpsd never would: a misconfigured port, a
    /// hostile peer. libgps drops such lines; without this the engine would stay silent about them.
    private func noteStrange(_ name: String) {
        guard !Self.knownClasses.contains(name) else { return }
        strangeCount += 1
        let now = clock.now
        guard now - lastStrangeReport >= 60 else { return }
        lastStrangeReport = now
        let shown = name.isEmpty ? "no class" : "class \"\(name.prefix(32))\""
        emit(
            .gpsdError(
                "the peer at \(configuration.address) sent \(strangeCount) report(s) that are not gpsd's (\(shown)); is it really gpsd?"
            ))
        strangeCount = 0
    }

    /// Whether a fix from `device` is taken: a device already known is; a new one while `maximumDevices` are
    /// known only in place of one silent for `deviceIdleLimit`. Refusals are said at most once a minute.
    private func admit(device: String) -> Bool {
        let now = clock.now
        if fixDevices[device] != nil || fixDevices.count < Self.maximumDevices {
            fixDevices[device] = now
            return true
        }
        if let oldest = fixDevices.min(by: { $0.value < $1.value }), now - oldest.value >= Self.deviceIdleLimit {
            fixDevices[oldest.key] = nil
            lastFixTime[oldest.key] = nil
            fixDevices[device] = now
            return true
        }
        refusedDevices += 1
        if now - lastDeviceWarning >= 60 {
            lastDeviceWarning = now
            emit(
                .gpsdError(
                    "the peer at \(configuration.address) sent fixes from more than \(Self.maximumDevices) devices at once; "
                        + "\(refusedDevices) fix(es) from further devices dropped; is it really gpsd?"))
        }
        return false
    }

    /// Sends a snapshot when it differs from the last one sent, and always the first of a session.
    private func sendSnapshot(_ updated: CapabilitySnapshot) {
        guard updated != snapshot || !snapshotSent else { return }
        snapshot = updated
        snapshotSent = true
        emit(.capabilities(updated))
    }

    // MARK: - Time

    private func checkDeadlines() {
        if let transition = liveness.advance(to: clock.now) { emit(.liveness(transition)) }
    }

    /// How long to sleep: until `wake`, the next liveness deadline or the poll interval, whichever is first.
    private func sliceUntil(_ wake: Double?) -> Double {
        let now = clock.now
        var slice = configuration.pollInterval
        if let wake { slice = min(slice, wake - now) }
        if let deadline = liveness.nextDeadline { slice = min(slice, deadline - now) }
        return max(slice, 0.001)
    }

    private func emit(_ report: GPSDReport) {
        if let delivery {
            delivery(report)
        } else {
            continuation.yield(report)
        }
    }
}
