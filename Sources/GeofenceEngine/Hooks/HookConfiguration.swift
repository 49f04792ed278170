import Foundation
import GeofenceCore

/// How the hook runner runs hooks: timeout, retry schedule, concurrency, output cap. Durations are seconds.
///
/// The defaults are the documented ones (Docs/hooks.md); `geofence run` and `geofence replay --hooks` set
/// them from `--hook-timeout`, `--hook-concurrency`, `--hook-retry-initial`, `--hook-retry-max`,
/// `--hook-max-attempts`, `--hook-max-age` and `--hook-output-limit`.
package struct HookConfiguration: Sendable, Equatable {
    /// When the next attempt of a failed delivery is due, and when to give up.
    package struct Retry: Sendable, Equatable {
        /// How the delay is randomized, so that many deliveries failing together do not retry together.
        package typealias Jitter = ReconnectBackoff.Jitter

        /// Delay before the second attempt.
        package var initialDelay: Double = 1
        /// Each further delay is this many times the previous one...
        package var multiplier: Double = 2
        /// ...up to this.
        package var maxDelay: Double = 300
        package var jitter: Jitter = .equal
        /// After this many failed attempts the delivery is `dead`; nil: no limit.
        package var maxAttempts: Int? = 100
        /// A delivery that fails this long after it was queued is `dead`; nil: no limit.
        package var maxAge: Double? = 86_400

        package init() {}

        /// The schedule these settings make: the retry after attempt `n` is the backoff's retry `n - 1`.
        package var schedule: ReconnectBackoff {
            ReconnectBackoff(base: initialDelay, cap: maxDelay, multiplier: multiplier, jitter: jitter)
        }

        /// The backoff after attempt `attempt` (1 for the first) before jitter.
        package func backoff(afterAttempt attempt: Int) -> Double {
            schedule.ceiling(forAttempt: attempt - 1)
        }

        /// The delay after attempt `attempt`, with jitter drawn from `unit` (a number in 0...1).
        package func delay(afterAttempt attempt: Int, unit: Double) -> Double {
            schedule.delay(forAttempt: attempt - 1, unit: unit)
        }

        /// Whether a delivery that failed its attempt `attempt`, queued `age` seconds ago, is given up.
        package func givesUp(afterAttempt attempt: Int, age: Double) -> Bool {
            if let maxAttempts, attempt >= maxAttempts { return true }
            if let maxAge, age >= maxAge { return true }
            return false
        }
    }

    /// Seconds a hook may run before its process group gets SIGTERM (and SIGKILL `killGrace` later).
    package var timeout: Double = 30
    package var killGrace: Double = 2
    package var retry = Retry()
    /// Hooks running at once, at most (one per order key at a time in any case).
    package var concurrency: Int = 4
    /// Bytes of stdout, and of stderr, kept with a delivery; the rest is read and dropped.
    package var outputLimit: Int = 65_536
    /// How often the runner looks at the outbox when nobody calls `wake()`, and notices retries and removals
    /// made with the CLI.
    package var pollInterval: Double = 1
    /// When the runner stops, running hooks get SIGTERM, and SIGKILL this much later (the daemon must be
    /// gone within 2 s of SIGTERM); their deliveries are retried after the restart.
    package var shutdownGrace: Double = 0.5
    /// `drain()` waits out retry delays that end within this many seconds of its start, no longer.
    package var drainLimit: Double = 60
    /// The variables hooks inherit from the daemon (`PATH`, `HOME`, `LANG`, `LC_ALL`, `TZ` when set), before
    /// the `GEOFENCE_*` ones. `PATH` falls back to a standard one when the daemon has none.
    package var inheritedEnvironment: [String: String]

    /// The names `inheritedEnvironment` takes from the daemon's environment.
    package static let inheritedNames = ["PATH", "HOME", "LANG", "LC_ALL", "TZ"]
    package static let defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

    package init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        var inherited: [String: String] = [:]
        for name in HookConfiguration.inheritedNames {
            if let value = environment[name], !value.utf8.contains(0) { inherited[name] = value }
        }
        if inherited["PATH"] == nil { inherited["PATH"] = HookConfiguration.defaultPath }
        inheritedEnvironment = inherited
    }
}
