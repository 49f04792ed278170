import Synchronization

/// How many changes one user (other than root and the engine's own) may make through the control socket, or
/// one token through the HTTP API: a token bucket per key (a uid, a token's name), `burst` at once and
/// `perSecond` after that, whatever the number of connections.
///
/// Every change can make events, and every event runs the matching hooks (root's too) and goes to every
/// sink: a user looping on a change must not turn the engine into their amplifier. A request over the limit
/// is refused `busy` (exit 75) before it is looked at, and costs nothing.
final class ChangeRateLimit<Key: Hashable & Sendable>: Sendable {
    let burst: Int
    let perSecond: Int
    /// Per key: the tokens left and when they were counted (monotonic seconds).
    private let buckets = Mutex<[Key: (tokens: Double, at: Double)]>([:])

    init(burst: Int = 30, perSecond: Int = 10) {
        self.burst = burst
        self.perSecond = perSecond
    }

    /// Takes one change for `key`: nil when it may go on, else the seconds until it may.
    func take(_ key: Key, now: Double) -> Double? {
        buckets.withLock { buckets in
            let capacity = Double(burst)
            let rate = Double(perSecond)
            if buckets.count > 4096 {
                // Forget the users whose bucket has filled up again: the map holds only recent changers.
                buckets = buckets.filter { $0.value.tokens + (now - $0.value.at) * rate < capacity }
            }
            let last = buckets[key] ?? (capacity, now)
            let tokens = min(capacity, last.tokens + max(0, now - last.at) * rate)
            guard tokens >= 1 else {
                buckets[key] = (tokens, now)
                return (1 - tokens) / rate
            }
            buckets[key] = (tokens - 1, now)
            return nil
        }
    }
}
