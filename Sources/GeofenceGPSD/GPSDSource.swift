import Foundation
import GeofenceCore
import Synchronization

/// The live position source: a libgps session to gpsd on its own thread, kept connected.
///
/// It connects to a `GPSDAddress`, asks gpsd to stream JSON, and turns what arrives into
/// `GPSDReport`s: every TPV as a `Fix`, VERSION/DEVICES/DEVICE as a `CapabilitySnapshot`.
/// When gpsd is absent, dies or restarts it reconnects with exponential backoff and full
/// jitter, and a `SourceLiveness` watchdog on a monotonic clock reports `silent`, `lost` and
/// `restored`. libgps blocks, so the session runs on a dedicated thread, never on Swift
/// concurrency's cooperative pool; the thread wakes at least every `pollInterval` to notice
/// `stop()` and deadlines.
///
/// ```swift
/// let source = GPSDSource(configuration: .init(address: try GPSDAddress(parsing: "localhost:2947")))
/// source.start()
/// for await report in source.reports { ... }
/// ```
public final class GPSDSource: Sendable {
    /// How to reach gpsd and how patiently: the address, the liveness limits, the reconnection backoff and
    /// the thread's timeouts. The defaults are `geofence run`'s.
    public struct Configuration: Sendable, Equatable {
        /// Where gpsd listens, and the one device to watch (nil: every device); `localhost:2947` by default.
        public var address: GPSDAddress
        /// When the source counts as `silent` (no usable fix within 60 s of `start()` by default) or `lost`
        /// (none for 10 s by default, or the connection dropped while fixes were arriving).
        public var liveness: SourceLiveness.Configuration
        /// How long to wait before each reconnection attempt (0.5 s doubling up to 30 s, full jitter, by
        /// default).
        public var backoff: ReconnectBackoff
        /// A connection that lasted this long (seconds) was healthy: the backoff starts over.
        /// Shorter ones keep counting, so a gpsd that accepts and then crashes in a loop
        /// is not hammered.
        public var healthyConnectionDuration: Double
        /// The longest a connection attempt may take, seconds.
        public var connectTimeout: Double
        /// The longest the thread sleeps before checking for `stop()`, seconds.
        public var pollInterval: Double

        /// A configuration with `geofence run`'s defaults for whatever is not given; times are seconds.
        public init(
            address: GPSDAddress = .default,
            liveness: SourceLiveness.Configuration = SourceLiveness.Configuration(),
            backoff: ReconnectBackoff = ReconnectBackoff(),
            healthyConnectionDuration: Double = 5,
            connectTimeout: Double = 5,
            pollInterval: Double = 0.2
        ) {
            self.address = address
            self.liveness = liveness
            self.backoff = backoff
            self.healthyConnectionDuration = healthyConnectionDuration
            self.connectTimeout = connectTimeout
            self.pollInterval = pollInterval
        }
    }

    /// Where the session's thread hands each report instead of `reports`: a function that may block that thread
    /// while the consumer is behind, so that gpsd's socket, not memory, holds what is not yet read.
    package typealias Delivery = @Sendable (GPSDReport) -> Void

    /// The settings the source was made with.
    public let configuration: Configuration
    /// Everything the source has to say, in order; ends after `stop()`. One consumer.
    /// Unbounded: the consumer is expected to keep up (a fix is a few hundred bytes). Empty when the source
    /// was made with a `Delivery`.
    package let reports: AsyncStream<GPSDReport>
    private let delivery: Delivery?

    private let continuation: AsyncStream<GPSDReport>.Continuation
    private let random: @Sendable () -> Double
    private let control: SourceControl
    private let started = Mutex(false)

    /// - Parameter random: a random number in `[0, 1]` for the backoff's jitter; injectable for tests.
    /// - Parameter delivery: where reports go instead of `reports` (see `Delivery`).
    package init(
        configuration: Configuration,
        random: @escaping @Sendable () -> Double = { Double.random(in: 0...1) },
        delivery: Delivery? = nil
    ) {
        self.configuration = configuration
        self.delivery = delivery
        self.random = random
        self.control = SourceControl()
        (reports, continuation) = AsyncStream.makeStream(of: GPSDReport.self)
        let control = self.control
        continuation.onTermination = { _ in control.requestStop() }
    }

    deinit {
        control.requestStop()
        continuation.finish()
    }

    /// Starts the session thread; later calls do nothing.
    package func start() {
        let isFirstStart = started.withLock { started in
            defer { started = true }
            return !started
        }
        guard isFirstStart, !control.isStopRequested else { return }
        let loop = GPSDConnectionLoop(
            configuration: configuration,
            continuation: continuation,
            delivery: delivery,
            control: control,
            random: random
        )
        let thread = Thread { loop.run() }
        thread.name = "geofence.gpsd"
        thread.start()
    }

    /// Stops the session and ends `reports`. Returns once the thread has closed its gpsd
    /// connection, or after one second at most (a thread stuck in name resolution finishes
    /// on its own later and reports nothing more).
    package func stop() async {
        control.requestStop()
        continuation.finish()
        guard started.withLock({ $0 }) else { return }
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(1))
        while !control.hasExited, clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }
}

/// Stop request and exit flag shared by a `GPSDSource` and its thread.
final class SourceControl: Sendable {
    private let stopRequested = Atomic(false)
    private let exited = Atomic(false)

    var isStopRequested: Bool { stopRequested.load(ordering: .acquiring) }
    var hasExited: Bool { exited.load(ordering: .acquiring) }

    func requestStop() { stopRequested.store(true, ordering: .releasing) }
    func markExited() { exited.store(true, ordering: .releasing) }
}
