import Foundation

/// What a partition's lease key holds (`geofence-leases`, key `p-N`, JSON): the owning engine, its term, and
/// how many times it renewed in that term.
package struct LeaseRecord: Codable, Equatable, Sendable {
    /// The engine id of the owner.
    package var owner: String
    /// The acquisition's term: one more than the revision the claim was made from, so no two acquisitions of
    /// a partition share a term, and a later one always has a larger term.
    package var term: UInt64
    /// Renewals in this term (0 at acquisition).
    package var renewal: UInt64

    package init(owner: String, term: UInt64, renewal: UInt64) {
        self.owner = owner
        self.term = term
        self.renewal = renewal
    }

    package var bytes: [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(self)).map { Array($0) } ?? []
    }

    /// The record in `bytes`; one that cannot be read is an unknown owner's (it expires like any other).
    package init(bytes: [UInt8]) {
        self =
            (try? JSONDecoder().decode(LeaseRecord.self, from: Data(bytes)))
            ?? LeaseRecord(owner: "", term: 0, renewal: 0)
    }
}

/// What a lease manager tells the owner of its partitions, in order.
package enum LeaseEvent: Equatable, Sendable {
    /// The partition is this engine's from now, in `term`; `leaseRevision` is the lease key's revision written
    /// by the acquisition.
    case acquired(partition: Int, term: UInt64, leaseRevision: UInt64)
    /// The partition is no longer this engine's (not renewed in time, refused, given back or stopped): stop
    /// judging and publishing for it now. Delivered before the validity deadline of the lease ends.
    case lost(partition: Int)
}

/// The settings of a lease manager; the same for every engine of a group.
package struct LeaseSettings: Equatable, Sendable {
    /// The number of partitions P (leases `p-0` … `p-(P-1)`).
    package let partitions: Int
    /// How long a lease lasts after its last renewal was sent (seconds). Another engine takes a partition
    /// over once it has seen no new revision of its lease for this long.
    package let ttl: Double
    /// How often an owner renews its leases and an engine writes its heartbeat: `ttl / 3`.
    package var renewalInterval: Double { ttl / 3 }
    /// How much before `ttl` an owner's validity ends (for clock rates and scheduling): `ttl / 6`. A lease
    /// given back is deleted this long after `lost` was delivered.
    package var margin: Double { ttl / 6 }
    /// How long before its validity deadline the owner is told `lost` when renewals fail: `margin / 2`.
    package var lostLead: Double { margin / 2 }
    /// The bucket of the leases, and of the engines' heartbeats.
    package let leaseBucket: String
    package let engineBucket: String
    /// Replicas of both buckets when this engine creates them (3 in a 3-server cluster).
    package let replicas: Int

    /// Settings for `partitions` partitions (1…100,000) and a `ttl` of 0.5 s to 1 hour.
    package init(
        partitions: Int, ttl: Double = 6, leaseBucket: String = "geofence-leases",
        engineBucket: String = "geofence-engines", replicas: Int = 3
    ) throws {
        guard (1...100_000).contains(partitions) else {
            throw NATSError(
                kind: .invalidArgument, operation: "lease settings", text: "partitions \(partitions): not 1 to 100000")
        }
        guard ttl.isFinite, ttl >= 0.5, ttl <= 3600 else {
            throw NATSError(
                kind: .invalidArgument, operation: "lease settings", text: "lease TTL \(ttl) s: not 0.5 to 3600 s")
        }
        guard (1...5).contains(replicas) else {
            throw NATSError(
                kind: .invalidArgument, operation: "lease settings", text: "replicas \(replicas): not 1 to 5")
        }
        self.partitions = partitions
        self.ttl = ttl
        self.leaseBucket = leaseBucket
        self.engineBucket = engineBucket
        self.replicas = replicas
    }

    /// The lease key of `partition`.
    package static func key(_ partition: Int) -> String { "p-\(partition)" }

    /// The message id of every write to `partition`'s lease made from `revision` (0: the key was never
    /// written): writers that read the same revision collide on it, so one wins (Docs/cluster.md).
    package static func messageID(_ partition: Int, after revision: UInt64) -> String {
        "lease-p-\(partition)-after-\(revision)"
    }

    /// How many partitions `engine` should hold when `live` (which includes it) share `partitions`: the
    /// engines in id order, the first `partitions % live.count` of them one more than the others.
    package static func target(for engine: String, live: [String], partitions: Int) -> Int {
        let sorted = Set(live).union([engine]).sorted()
        let index = sorted.firstIndex(of: engine) ?? 0
        return partitions / sorted.count + (index < partitions % sorted.count ? 1 : 0)
    }
}

/// One engine's view of the partition leases and of the engines alive, and what to do next: a state machine
/// without I/O or clock (the times are given), driven by `PartitionLeases` under its lock. It plans claims,
/// renewals, releases and heartbeats; the caller performs them and reports the outcome; it judges others'
/// leases expired by the time given since it saw their last revision, and its own valid until the send time of
/// the last successful write plus ttl minus margin.
package struct LeaseBook {
    struct Observed: Equatable {
        var revision: UInt64
        /// nil: deleted (given back), or never written.
        var record: LeaseRecord?
        /// When this engine saw this revision (its own clock).
        var seenAt: Double
    }

    struct Held: Equatable {
        var term: UInt64
        var revision: UInt64
        var renewal: UInt64
        /// The send time of the last write known stored.
        var renewedAt: Double
        var validUntil: Double
        /// Send times of renewals whose outcome is not known (timed out), by renewal number.
        var attempts: [UInt64: Double] = [:]
        var retryAt: Double = 0
    }

    package enum Action: Equatable {
        case heartbeat(beat: UInt64)
        case claim(partition: Int, from: UInt64, record: LeaseRecord)
        case renew(partition: Int, from: UInt64, record: LeaseRecord)
        case release(partition: Int, from: UInt64)
    }

    let settings: LeaseSettings
    let engineID: String
    let startedAt: Double

    package private(set) var leasesCaughtUp = false
    private(set) var enginesCaughtUp = false
    private var caughtUpAt = 0.0
    private(set) var observed: [Int: Observed] = [:]
    /// Engines by id: when their last heartbeat was seen.
    private(set) var engines: [String: Double] = [:]
    private(set) var held: [Int: Held] = [:]
    /// Leases given back, to be deleted at `at` (from `revision`).
    private(set) var releasing: [Int: (revision: UInt64, at: Double)] = [:]
    /// Terms of this engine's own that it no longer counts valid: their leases may be claimed again at once.
    private var retired: [Int: UInt64] = [:]
    /// Revisions a claim was refused from: not tried again from the same one.
    private var refusedFrom: [Int: UInt64] = [:]
    /// When a claim that got no answer may be tried again.
    private var claimRetryAt: [Int: Double] = [:]
    /// A write of this engine's that its watch has not shown yet (lease, heartbeat), and when it was stored: a
    /// watch that lags a renewal interval behind is made again (nats.c's watch does not always survive the
    /// loss of its stream's leader).
    private var unseenLeaseWrite: (revision: UInt64, at: Double)?
    private var unseenHeartbeat: (revision: UInt64, at: Double)?
    /// A claim refused from `revision`: the key has a newer one, which the watch should show.
    private var unseenRefusal: (partition: Int, revision: UInt64, at: Double)?
    /// When a write last got no answer: claims of others' leases wait until writes have gone through again
    /// for a while.
    private var lastFailureAt = -Double.infinity
    private var lastBeat = -Double.infinity
    private var beat: UInt64 = 0
    /// Events not yet delivered, oldest first.
    package var events: [LeaseEvent] = []
    package private(set) var statistics = LeaseStatistics()

    package init(settings: LeaseSettings, engineID: String, now: Double) {
        self.settings = settings
        self.engineID = engineID
        startedAt = now
    }

    // MARK: What the watches saw

    /// A lease key's write (or delete) seen at `now`.
    package mutating func observeLease(key: String, revision: UInt64, record: LeaseRecord?, now: Double) {
        if let unseen = unseenLeaseWrite, revision >= unseen.revision { unseenLeaseWrite = nil }
        guard key.hasPrefix("p-"), let partition = Int(key.dropFirst(2)), (0..<settings.partitions).contains(partition)
        else { return }
        if let unseen = unseenRefusal, unseen.partition == partition, revision > unseen.revision {
            unseenRefusal = nil
        }
        if let known = observed[partition], known.revision >= revision { return }
        observed[partition] = Observed(revision: revision, record: record, seenAt: now)
        if let release = releasing[partition], revision > release.revision { releasing[partition] = nil }
        guard var lease = held[partition], revision > lease.revision else { return }
        if let record, record.owner == engineID, record.term == lease.term {
            // A write of this engine's whose answer it did not get (a timed-out renewal that was stored).
            lease.revision = revision
            if record.renewal > lease.renewal {
                lease.renewal = record.renewal
                if let sent = lease.attempts[record.renewal] {
                    lease.renewedAt = max(lease.renewedAt, sent)
                    lease.validUntil = max(lease.validUntil, sent + settings.ttl - settings.margin)
                }
                lease.attempts = lease.attempts.filter { $0.key > record.renewal }
            }
            held[partition] = lease
        } else {
            // Someone else wrote or deleted it: not this engine's any more.
            statistics.usurped += 1
            declareLost(partition)
        }
    }

    package mutating func markLeasesCaughtUp(now: Double) {
        guard !leasesCaughtUp else { return }
        leasesCaughtUp = true
        caughtUpAt = now
    }

    /// An engine's heartbeat (`alive`) or its key deleted, seen at `now`.
    package mutating func observeEngine(_ id: String, revision: UInt64, alive: Bool, now: Double) {
        if let unseen = unseenHeartbeat, revision >= unseen.revision { unseenHeartbeat = nil }
        engines[id] = alive ? now : nil
    }

    /// A heartbeat was stored at `revision`.
    package mutating func heartbeatStored(revision: UInt64, now: Double) {
        if unseenHeartbeat == nil { unseenHeartbeat = (revision, now) }
    }

    /// Whether the lease watch (`leases`) or the engines' watch lags a renewal interval behind this engine's
    /// own writes; once told, the measure starts again.
    package mutating func watchLags(leases: Bool, now: Double) -> Bool {
        let since = leases ? [unseenLeaseWrite?.at, unseenRefusal?.at].compactMap { $0 }.min() : unseenHeartbeat?.at
        guard let since, now - since > settings.renewalInterval else { return false }
        if leases {
            unseenLeaseWrite = nil
            unseenRefusal = nil
        } else {
            unseenHeartbeat = nil
        }
        statistics.watchRestarts += 1
        return true
    }

    private mutating func leaseStored(revision: UInt64, now: Double) {
        if unseenLeaseWrite == nil { unseenLeaseWrite = (revision, now) }
    }

    package mutating func markEnginesCaughtUp() { enginesCaughtUp = true }

    // MARK: Planning

    /// The engines alive at `now`: heartbeats seen within the TTL, and this one.
    package func liveEngines(now: Double) -> [String] {
        Set(engines.filter { now - $0.value < settings.ttl }.keys).union([engineID]).sorted()
    }

    package func target(now: Double) -> Int {
        LeaseSettings.target(for: engineID, live: liveEngines(now: now), partitions: settings.partitions)
    }

    /// What to do at `now`. Leases to give back are given up here (`lost` queued) and deleted `margin` later.
    package mutating func plan(now: Double) -> [Action] {
        var actions: [Action] = []
        var renewals: [Action] = []
        if leasesCaughtUp, enginesCaughtUp {
            for (partition, lease) in held.sorted(by: { $0.key < $1.key })
            where now >= lease.renewedAt + settings.renewalInterval && now >= lease.retryAt {
                let record = LeaseRecord(owner: engineID, term: lease.term, renewal: lease.renewal + 1)
                renewals.append(.renew(partition: partition, from: lease.revision, record: record))
            }
        }
        // A heartbeat every interval, and before each round of renewals: an engine's last heartbeat is then no
        // older than its last renewal, and others count it gone no later than its leases expire.
        if now >= lastBeat + settings.renewalInterval || !renewals.isEmpty {
            lastBeat = now
            beat += 1
            actions.append(.heartbeat(beat: beat))
        }
        guard leasesCaughtUp, enginesCaughtUp else { return actions }
        actions += releasesDue(now: now)
        actions += renewals
        // Claims and give-backs wait one heartbeat interval after start, to see the other engines first.
        guard now - startedAt >= settings.renewalInterval else { return actions }
        let live = liveEngines(now: now)
        let target = LeaseSettings.target(for: engineID, live: live, partitions: settings.partitions)
        if held.count > target {
            // Give back the extras (a new engine joined), highest partitions first, as many as the others
            // lack: when none lacks any (an orphan was just rescued) giving back would only move it again.
            let lacking = shortfall(live: live, now: now)
            for partition in held.keys.sorted().suffix(min(held.count - target, lacking)) {
                statistics.released += 1
                declareLost(partition, releaseAt: now + settings.margin)
            }
            return actions
        }
        // Its own leases first (those it gave up when it could not renew: taken back, the partition keeps its
        // owner and its state), then from this engine's share of the ring, so engines that start together
        // rarely collide.
        let partitions = settings.partitions
        let start = (live.firstIndex(of: engineID) ?? 0) * partitions / max(1, live.count)
        let ring = (0..<partitions).map { (start + $0) % partitions }
        let own = ring.filter { partition in
            observed[partition]?.record.map { $0.owner == engineID && retired[partition] == $0.term } ?? false
        }
        var count = held.count
        for partition in own + ring.filter({ !own.contains($0) }) {
            guard held[partition] == nil, releasing[partition] == nil else { continue }
            guard now >= claimRetryAt[partition] ?? 0 else { continue }
            let seen = observed[partition] ?? Observed(revision: 0, record: nil, seenAt: caughtUpAt)
            guard refusedFrom[partition] != seen.revision else { continue }
            let age = now - seen.seenAt
            let ownRetired = seen.record.map { $0.owner == engineID && retired[partition] == $0.term } ?? false
            let free = seen.record == nil || ownRetired
            let expired = !free && age >= settings.ttl
            // Below its share an engine takes what is free, or expired once its own writes have gone through
            // for a heartbeat interval (after an outage it has then seen who is alive, and the owners took
            // their own back). At its share only what nobody took for a while (engines may disagree on who is
            // alive for up to a TTL), so nothing stays orphaned; that after a TTL of working writes.
            let healthy = now - max(startedAt, lastFailureAt)
            let claim =
                count < target
                ? free || (expired && healthy >= settings.renewalInterval)
                : healthy >= settings.ttl
                    && ((free && age >= settings.ttl) || (expired && age >= settings.ttl * 1.5))
            guard claim else { continue }
            count += 1
            let record = LeaseRecord(owner: engineID, term: seen.revision + 1, renewal: 0)
            actions.append(.claim(partition: partition, from: seen.revision, record: record))
        }
        return actions
    }

    /// How many partitions the other live engines lack of their share, by the leases seen here (a lease counts
    /// for its owner while its last revision is younger than the TTL).
    package func shortfall(live: [String], now: Double) -> Int {
        var counts: [String: Int] = [:]
        for seen in observed.values where now - seen.seenAt < settings.ttl {
            if let owner = seen.record?.owner { counts[owner, default: 0] += 1 }
        }
        return live.filter { $0 != engineID }.reduce(0) { sum, engine in
            sum
                + max(
                    0,
                    LeaseSettings.target(for: engine, live: live, partitions: settings.partitions)
                        - counts[engine, default: 0])
        }
    }

    /// The deletes of leases given back that are due at `now`.
    package func releasesDue(now: Double) -> [Action] {
        releasing.sorted { $0.key < $1.key }.filter { now >= $0.value.at }.map {
            .release(partition: $0.key, from: $0.value.revision)
        }
    }

    // MARK: Outcomes

    /// A claim sent at `sentAt` was stored at `revision`.
    package mutating func claimed(_ partition: Int, record: LeaseRecord, revision: UInt64, sentAt: Double, now: Double)
    {
        let validUntil = sentAt + settings.ttl - settings.margin
        leaseStored(revision: revision, now: now)
        if observed[partition].map({ $0.revision < revision }) ?? true {
            observed[partition] = Observed(revision: revision, record: record, seenAt: now)
        }
        guard now < validUntil - settings.lostLead else {
            // The answer came too late to use: not counted valid, but free to claim again at once.
            retired[partition] = record.term
            statistics.lateAnswers += 1
            return
        }
        retired[partition] = nil
        held[partition] = Held(
            term: record.term, revision: revision, renewal: 0, renewedAt: sentAt, validUntil: validUntil)
        statistics.acquired += 1
        events.append(.acquired(partition: partition, term: record.term, leaseRevision: revision))
    }

    /// Another writer won (the revision moved on, or the same message id was stored first). Unless the
    /// lease watch shows a newer revision of the key within a renewal interval, it lags and is made again.
    package mutating func claimRefused(_ partition: Int, from revision: UInt64, now: Double) {
        refusedFrom[partition] = revision
        statistics.claimsRefused += 1
        if unseenRefusal == nil, (observed[partition]?.revision ?? 0) <= revision {
            unseenRefusal = (partition, revision, now)
        }
    }

    /// No answer: it may have been stored. Not counted valid; if it was stored it is free to claim again.
    package mutating func claimUncertain(_ partition: Int, record: LeaseRecord, now: Double, error: String) {
        retired[partition] = record.term
        claimRetryAt[partition] = now + settings.renewalInterval / 4
        failed(now: now, error: error)
    }

    /// A write got no answer (a timeout, no responders, disconnected).
    package mutating func failed(now: Double, error: String) {
        statistics.writeFailures += 1
        statistics.lastError = error
        lastFailureAt = now
    }

    /// A renewal is about to be sent at `sentAt`.
    package mutating func renewalSending(_ partition: Int, record: LeaseRecord, sentAt: Double) {
        guard var lease = held[partition], lease.term == record.term else { return }
        if lease.attempts[record.renewal] == nil { lease.attempts[record.renewal] = sentAt }
        held[partition] = lease
    }

    /// A renewal sent at `sentAt` was stored at `revision`.
    package mutating func renewed(_ partition: Int, record: LeaseRecord, revision: UInt64, sentAt: Double, now: Double)
    {
        leaseStored(revision: revision, now: now)
        guard var lease = held[partition], lease.term == record.term else { return }
        // The first try of this renewal number may have been sent earlier (and be the one stored).
        let sent = min(sentAt, lease.attempts[record.renewal] ?? sentAt)
        lease.revision = max(lease.revision, revision)
        lease.renewal = max(lease.renewal, record.renewal)
        lease.renewedAt = max(lease.renewedAt, sent)
        lease.validUntil = max(lease.validUntil, sent + settings.ttl - settings.margin)
        lease.attempts = [:]
        lease.retryAt = 0
        held[partition] = lease
    }

    /// A renewal was refused; `current` is the key as read afterwards (nil: absent or deleted). If it is a
    /// write of this engine's in this term (an earlier try that was stored), that is taken; else the lease
    /// is lost.
    package mutating func renewalRefused(
        _ partition: Int, record: LeaseRecord, current: (revision: UInt64, record: LeaseRecord)?
    ) {
        guard let lease = held[partition], lease.term == record.term else { return }
        if let current, current.record.owner == engineID, current.record.term == lease.term,
            let sent = lease.attempts[current.record.renewal]
        {
            renewed(partition, record: current.record, revision: current.revision, sentAt: sent, now: sent)
            return
        }
        statistics.usurped += 1
        declareLost(partition)
    }

    /// A renewal got no answer (or the read after a refusal failed): tried again soon; the validity deadline
    /// is unchanged.
    package mutating func renewalUncertain(_ partition: Int, now: Double, error: String) {
        failed(now: now, error: error)
        guard var lease = held[partition] else { return }
        lease.retryAt = now + settings.renewalInterval / 4
        held[partition] = lease
    }

    package mutating func releaseDone(_ partition: Int, now: Double, error: String?) {
        releasing[partition] = nil
        if let error { failed(now: now, error: error) }
    }

    // MARK: Deadlines

    /// Declares lost every lease whose validity ends within `lostLead` of `now`; the next such time.
    package mutating func expire(now: Double) -> Double {
        for (partition, lease) in held where now >= lease.validUntil - settings.lostLead {
            statistics.expired += 1
            declareLost(partition)
        }
        return held.values.map { $0.validUntil - settings.lostLead }.min() ?? .infinity
    }

    /// Gives up every lease (a stop): each to be deleted at once.
    package mutating func giveUpAll(now: Double) {
        for partition in held.keys.sorted() { declareLost(partition, releaseAt: now) }
    }

    package mutating func declareLost(_ partition: Int, releaseAt: Double? = nil) {
        guard let lease = held.removeValue(forKey: partition) else { return }
        retired[partition] = lease.term
        statistics.lost += 1
        events.append(.lost(partition: partition))
        if let releaseAt { releasing[partition] = (lease.revision, releaseAt) }
    }

    package func isValid(_ partition: Int, at time: Double) -> Bool {
        held[partition].map { time < $0.validUntil } ?? false
    }

    /// Seconds of validity left at `time` of this engine's lease of `partition` (0 or less: none).
    package func remaining(_ partition: Int, at time: Double) -> Double {
        held[partition].map { $0.validUntil - time } ?? 0
    }
}

/// Counts of what a lease manager did, for `status` and tests.
package struct LeaseStatistics: Equatable, Sendable {
    /// Leases acquired, lost (for any reason), given back to another engine, and lost because their validity
    /// ran out before a renewal was stored.
    package var acquired = 0
    package var lost = 0
    package var released = 0
    package var expired = 0
    /// Leases found written by another engine (or deleted) while this one held them: never expected.
    package var usurped = 0
    /// Claims another engine won.
    package var claimsRefused = 0
    /// Writes without an answer (timeouts, no responders, disconnected), and the last such error.
    package var writeFailures = 0
    package var lastError: String?
    /// Claims stored, but answered too late to use.
    package var lateAnswers = 0
    /// Watches made again because they lagged behind this engine's own writes.
    package var watchRestarts = 0
}
