import Foundation
import GeofenceCore
import GeofenceStore

/// The cluster's regions as `geofence add`, `remove` and `import --nats` change them: the bucket
/// `geofence-regions`, with the rules and errors of the local store (`RegionRepository`: a duplicate id
/// without `replace`, an unknown id to remove, the total of polygon positions), thrown as the same
/// `StoreError`s so that the CLI says and exits the same.
///
/// A change made under a request id carries it in a header (`Geofence-Request`): the same command run
/// again under the same id recognizes what it wrote (an add answered from its entry, a remove from its
/// marker, an import writing only what is missing), as the local engine answers a request from its record.
///
/// Every call **blocks** for JetStream requests: call it on a thread of its own (the CLI's main thread).
package final class ClusterRegionStore: @unchecked Sendable {
    // @unchecked: constants only; the connection and bucket lock inside.
    package let connection: NATSConnection
    package let bucket: NATSKeyValue

    /// The bucket, created when missing (Docs/cluster.md: history 1, file storage, no TTL, 3 replicas when
    /// the cluster has 3 servers or more, else as many as it has).
    package init(connection: NATSConnection) throws {
        self.connection = connection
        bucket = try Self.ensureBucket(connection)
    }

    package static func ensureBucket(_ connection: NATSConnection) throws -> NATSKeyValue {
        try connection.ensureKeyValue(
            bucket: ClusterRegionCodec.bucket, replicas: min(3, connection.knownServerCount))
    }

    /// A key's latest write as the bucket's stream holds it.
    package struct EntryState: Sendable {
        package let revision: UInt64
        /// A value, not a delete marker.
        package let live: Bool
        /// The request id it was written under.
        package let request: String?
        /// Its value (empty when read without values).
        package let value: [UInt8]
    }

    private func state(ofKey key: String) throws -> EntryState? {
        guard
            let last = try connection.lastMessage(
                stream: ClusterRegionCodec.stream, subject: ClusterRegionCodec.subjectPrefix + key)
        else { return nil }
        let operation = last.headers["KV-Operation"]?.first
        return EntryState(
            revision: last.sequence, live: operation != "DEL" && operation != "PURGE",
            request: last.headers[ClusterRegionCodec.requestHeader]?.first, value: last.payload)
    }

    private func headers(_ requestID: String?) -> [(String, String)] {
        requestID.map { [(ClusterRegionCodec.requestHeader, $0)] } ?? []
    }

    /// Adds a region; with `replace`, over one with the same id. The region as stored, its seq the entry's
    /// revision. The same add again under the same `requestID` is answered from the entry it wrote.
    package func add(
        _ region: Region, replace: Bool, requestID: String?, now: Date = Date(), afterRead: () throws -> Void = {}
    ) throws -> StoredRegion {
        let key = ClusterRegionCodec.key(for: region.id)
        var existing = try state(ofKey: key)
        try afterRead()
        if let entry = existing, entry.live, let requestID, entry.request == requestID,
            case .success = ClusterRegionCodec.region(key: key, value: entry.value, written: now)
        {
            // Answered from it only if a read ordered after an acknowledged write still shows it: the
            // stream may drop an entry of a broken run that a first read showed (see `importAll`).
            try barrier()
            existing = try state(ofKey: key)
            // (Any live entry of the request: a retry racing this one may have written it again.)
            if let again = existing, again.live, again.request == requestID,
                case .success(let region) = ClusterRegionCodec.region(key: key, value: again.value, written: now)
            {
                return stored(region, revision: again.revision, now: now)
            }
        }
        if let existing, existing.live, !replace { throw StoreError.duplicateRegions([region.id]) }
        if let polygon = region.polygon {
            try checkPolygonPositions(adding: polygon.encoded.count, keys: [key])
        }
        let ack: NATSConnection.PublishAck
        do {
            ack = try connection.jetStreamPublish(
                subject: ClusterRegionCodec.subjectPrefix + key, payload: ClusterRegionCodec.value(region),
                headers: headers(requestID), expectedLastSubjectSequence: replace ? nil : existing?.revision ?? 0)
        } catch let error as NATSError where error.kind == .wrongLastSequence {
            // Another writer added it since it was read.
            throw StoreError.duplicateRegions([region.id])
        }
        return stored(region, revision: ack.sequence, now: now)
    }

    /// Writes a delete marker under `ClusterRegionCodec.barrierKey` and waits until the stream's answers
    /// show it (up to 30 s); its sequence. `latest` is answered by the stream's leader (STREAM.MSG.GET
    /// on nats-server 2.9; not a direct get, which any replica answers): a read of a key after this comes
    /// from a leader that has stored a write acknowledged after the first read, which orders it after the
    /// drops seen (entries of a broken run shown, then dropped). Not a promise against later drops.
    @discardableResult
    private func barrier() throws -> UInt64 {
        let sequence = try bucket.delete(ClusterRegionCodec.barrierKey)
        let began = ContinuousClock.now
        while true {
            if let last = try bucket.latest(ClusterRegionCodec.barrierKey), last.revision >= sequence {
                return sequence
            }
            if ContinuousClock.now - began > .seconds(30) {
                throw NATSError(
                    kind: .timeout, operation: "read \(ClusterRegionCodec.bucket)",
                    text: "the stream's answers did not show the write at sequence \(sequence) within 30 s")
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
    }

    private func stored(_ region: Region, revision: UInt64, now: Date) -> StoredRegion {
        StoredRegion(
            seq: Int64(clamping: revision), region: region, status: .monitoring, attempts: 0, nextRetry: nil,
            createdAt: region.createdAt ?? now, updatedAt: now)
    }

    /// Removes regions by id, all or nothing as the store does: any id without a region refuses them all,
    /// before anything is written. The ids removed, in the order given. An id is looked up in NFC, then as
    /// given. The same remove again under the same `requestID` finds its own delete markers and says the same.
    @discardableResult
    package func remove(ids: [String], requestID: String?, afterRead: () throws -> Void = {}) throws -> [String] {
        let found = try removeTargets(ids, requestID: requestID)
        try afterRead()
        var targets = found
        if found.contains(where: { !$0.live }) {
            // Answered from a marker an earlier run wrote only if a read ordered after an acknowledged write
            // still shows no region there (see `add`): a key with nothing left (the marker dropped after
            // the region it replaced) is removed all the same; a region back is removed again.
            try barrier()
            let marked = Set(found.filter { !$0.live }.map(\.id))
            targets = try removeTargets(ids, requestID: requestID, removedBefore: marked)
        }
        for target in targets where target.live {
            _ = try connection.jetStreamPublish(
                subject: ClusterRegionCodec.subjectPrefix + target.key, payload: [],
                headers: [("KV-Operation", "DEL")] + headers(requestID))
        }
        return targets.map(\.id)
    }

    /// Each id's key and whether it holds a region now; an id with a marker of `requestID` and no region
    /// is not live; an id of `removedBefore` with nothing at all is not live either.
    private func removeTargets(
        _ ids: [String], requestID: String?, removedBefore: Set<String> = []
    ) throws -> [(id: String, key: String, live: Bool)] {
        var targets: [(id: String, key: String, live: Bool)] = []
        for id in ids where !targets.contains(where: { $0.id == id }) {
            var found: (key: String, live: Bool)?
            let keys = Set([VisibleName.normalized(id), id].map(ClusterRegionCodec.key(for:))).sorted()
            for key in keys {
                guard let state = try state(ofKey: key) else { continue }
                if state.live {
                    found = (key, true)
                    break
                }
                if let requestID, state.request == requestID { found = (key, false) }
            }
            if found == nil, removedBefore.contains(id), let key = keys.first { found = (key, false) }
            guard let found else { throw StoreError.regionNotFound(id) }
            targets.append((id, found.key, found.live))
        }
        return targets
    }

    /// Why an import stopped after it began writing.
    package struct ImportInterrupted: Error, Sendable, CustomStringConvertible {
        /// Regions acknowledged as stored (by this run; earlier runs under the same request id not counted).
        package let written: Int
        package let total: Int
        package let error: NATSError
        /// Every write was acknowledged; reading them back, or writing again what the read-back missed,
        /// did not finish.
        package var checking = false
        package var description: String { error.description }
    }

    /// What an import did.
    package struct ImportOutcome: Sendable, Equatable {
        /// Regions written by this run.
        package let written: Int
        /// Regions an earlier run under the same request id had written, not written again.
        package let alreadyWritten: Int
        /// Regions the read-back after the writes did not find, written again: writes the cluster had
        /// acknowledged, or entries of an earlier run that the first read showed, lost since.
        package let rewritten: Int
    }

    /// How often the read-back after an import writes again what it misses before it gives up.
    static let importChecks = 3

    /// Imports regions, checked as the store checks an import before anything is written: without
    /// `replace`, ids already in the bucket (all of them reported) or repeated in `regions` refuse the
    /// import; the total of polygon positions is checked when it has polygons. Then every region is written
    /// (an id repeated under `replace`: its last), pipelined. A region the bucket holds as written under
    /// `requestID` (an earlier run of the same import that broke off) is neither a duplicate nor written
    /// again. A failure while writing is `ImportInterrupted`.
    ///
    /// Then the bucket is read back (`settledScan`: from a replica that shows the last acknowledged write
    /// and has as many keys as the leader): a region whose key does not hold this import's write is written
    /// again, up to `importChecks` times. nats-server 2.9.10 can show an entry that its stream then drops:
    /// in CI, the re-run of an import read entries of the run that broke off as written, and they were
    /// gone once it ended. The read-back comes after writes the quorum acknowledged, which orders it after
    /// the drops seen; a drop after it is not covered. A re-run with nothing left to write writes a barrier
    /// (`barrier()`) instead, for an acknowledged write to wait for. A key written since the import began,
    /// not under `requestID`, is someone else's and left alone. `afterScan` runs between the first read and
    /// the writes (tests lose entries there, as the cluster did).
    @discardableResult
    package func importAll(
        _ regions: [Region], replace: Bool, requestID: String, progress: (Int) -> Void = { _ in },
        afterScan: () throws -> Void = {}
    ) throws -> ImportOutcome {
        let withPolygons = regions.contains { $0.polygon != nil }
        let began = try connection.streamInfo(name: ClusterRegionCodec.stream)?.lastSequence ?? 0
        let current = try settledScan(values: withPolygons)
        var existing: [String] = []
        var repeated: String?
        // Each key's region: the last one of `regions` with it, the one the import stores.
        var last: [String: Int] = [:]
        last.reserveCapacity(regions.count)
        var own = Set<String>()
        for (index, region) in regions.enumerated() {
            let key = ClusterRegionCodec.key(for: region.id)
            let first = last.updateValue(index, forKey: key) == nil
            let state = current[key]
            let isOwn = state.map { $0.live && $0.request == requestID } ?? false
            if let state, state.live, !isOwn {
                if !replace { existing.append(region.id) }
            } else if !first, !replace, repeated == nil {
                repeated = region.id
            }
            if isOwn { own.insert(key) }
        }
        // The error the store gives: the ids that existed first, then a repeated one.
        if !existing.isEmpty { throw StoreError.duplicateRegions(existing) }
        if let repeated { throw StoreError.duplicateRegions([repeated]) }
        if withPolygons {
            var bytes = 0
            for index in last.values { bytes += regions[index].polygon?.encoded.count ?? 0 }
            try checkPolygonPositions(adding: bytes, keys: Set(last.keys), current: current)
        }
        try afterScan()
        let requestHeaders = headers(requestID)
        func writes(_ indices: some Sequence<Int>) -> [NATSKeyValue.Write] {
            indices.map { index in
                let region = regions[index]
                return NATSKeyValue.Write(
                    key: ClusterRegionCodec.key(for: region.id), value: ClusterRegionCodec.value(region),
                    headers: requestHeaders)
            }
        }
        let indices = last.filter { !own.contains($0.key) }.values.sorted()
        let written = indices.count
        func checkFailed(_ error: NATSError) -> ImportInterrupted {
            ImportInterrupted(written: written, total: written, error: error, checking: true)
        }
        var acknowledged: UInt64
        do {
            if indices.isEmpty {
                // Nothing left to write: a write for the read-back to wait for.
                acknowledged = try barrier()
            } else {
                acknowledged = try bucket.putAll(writes(indices), progress: progress)
            }
        } catch let failure as NATSKeyValue.BulkFailure {
            throw ImportInterrupted(written: failure.acknowledged, total: written, error: failure.error)
        } catch let error as NATSError where indices.isEmpty {
            throw checkFailed(error)
        }
        var rewritten = Set<String>()
        for round in 0...Self.importChecks {
            let after: [String: EntryState]
            do {
                after = try settledScan(values: false, since: acknowledged)
            } catch let error as NATSError {
                throw checkFailed(error)
            }
            // Written since the import began: by it, or by someone else (theirs). Written before: only an
            // earlier run's entry under the same request id is the import's.
            let lost = last.filter { key, _ in
                guard let entry = after[key] else { return true }
                if entry.revision > began { return false }
                return !(entry.live && entry.request == requestID)
            }
            if lost.isEmpty {
                return ImportOutcome(written: written, alreadyWritten: own.count, rewritten: rewritten.count)
            }
            guard round < Self.importChecks else {
                throw checkFailed(
                    NATSError(
                        kind: .other, operation: "read back \(ClusterRegionCodec.bucket)",
                        text: "\(lost.count) regions still missing after being written \(round + 1) times"))
            }
            do {
                acknowledged = try bucket.putAll(writes(lost.values.sorted()))
            } catch let failure as NATSKeyValue.BulkFailure {
                throw checkFailed(failure.error)
            } catch let error as NATSError {
                throw checkFailed(error)
            }
            rewritten.formUnion(lost.keys)
        }
        preconditionFailure("the last round returns or throws")
    }

    /// `scan(values:)` from a replica that shows the write at stream sequence `sequence` (for an import's
    /// read-back, the last one acknowledged) and has as many keys as the stream's leader has subjects. The
    /// read is served by any replica: on nats-server 2.9.10 one that has just come back answers with what
    /// it has applied so far (seen in a test: 631 of 100,000 keys, all there 5 s later), and after a loss
    /// of quorum a replica can hold other entries than the leader (seen: a follower showed 25 entries the
    /// leader did not hold). Counts can match while contents differ; they catch what was seen. A read that
    /// falls short, a stream without a leader, or a failed read is asked again, for up to a minute.
    /// **Blocks** until then.
    package func settledScan(values: Bool, since sequence: UInt64 = 0) throws -> [String: EntryState] {
        let began = ContinuousClock.now
        var last = "nothing read yet"
        while true {
            do {
                let entries = try scan(values: values)
                let newest = entries.values.lazy.map(\.revision).max() ?? 0
                guard let leader = try connection.streamInfo(name: ClusterRegionCodec.stream) else { return [:] }
                if !leader.leader.isEmpty, newest >= sequence, leader.subjectCount == UInt64(entries.count) {
                    return entries
                }
                let name = leader.leader.isEmpty ? "none" : leader.leader
                last =
                    "the read shows \(entries.count) keys up to sequence \(newest); the stream's leader (\(name)) "
                    + "\(leader.subjectCount) keys up to \(leader.lastSequence); the write waited for \(sequence)"
            } catch let error as NATSError {
                last = error.description
            }
            if ContinuousClock.now - began > .seconds(60) {
                throw NATSError(
                    kind: .timeout, operation: "read \(ClusterRegionCodec.bucket)", text: "after 60 s, \(last)")
            }
            Thread.sleep(forTimeInterval: 0.5)
        }
    }

    /// Refuses a change that would leave the bucket's polygons with more positions than a store may hold
    /// (`RegionRepository.maxPolygonPositions`, counted as the store counts them): `bytes` of encoded
    /// polygons written under `keys`, over what the other keys hold.
    private func checkPolygonPositions(
        adding bytes: Int, keys: Set<String>, current given: [String: EntryState]? = nil
    ) throws {
        let current = try given ?? scan(values: true)
        var total = bytes
        for (key, state) in current where state.live && !keys.contains(key) {
            if case .success(let region) = ClusterRegionCodec.region(key: key, value: state.value, written: Date()),
                let polygon = region.polygon
            {
                total += polygon.encoded.count
            }
        }
        let positions = total / 16
        let limit = RegionRepository.maxPolygonPositions
        if positions > limit { throw StoreError.tooManyPolygonPositions(positions, limit: limit) }
    }

    /// Every key's latest write (values included only with `values`), read through an ordered consumer of
    /// the bucket's stream, in order (`ClusterRegionCodec.readLastPerSubject`). **Blocks** until it has them all.
    package func scan(values: Bool) throws -> [String: EntryState] {
        var entries: [String: EntryState] = [:]
        guard let info = try connection.streamInfo(name: ClusterRegionCodec.stream), info.messages > 0 else {
            return entries
        }
        // The consumer's creation asked again when it goes unanswered (a request lost while the stream's
        // leader changes hung one for its whole minute in a CI run): two asks of 30 s, the minute as before.
        var attempt = 0
        let consumer: NATSOrderedConsumer
        while true {
            attempt += 1
            do {
                consumer = try NATSOrderedConsumer(
                    connection: connection, stream: ClusterRegionCodec.stream, subject: ClusterRegionCodec.subjects,
                    lastPerSubject: ClusterRegionCodec.readLastPerSubject, headersOnly: !values,
                    headers: ["KV-Operation", ClusterRegionCodec.requestHeader], createTimeout: .seconds(30))
                break
            } catch let error as NATSError where error.kind == .timeout && attempt < 2 {
                continue
            }
        }
        defer { consumer.stop() }
        var quiet = 0
        while true {
            let batch = consumer.take(timeout: .seconds(1))
            if batch.isEmpty {
                // Nothing more to come (the bucket emptied meanwhile), or the server is still counting what
                // to send (seconds, for a million keys on a loaded machine): it says which when asked.
                quiet += 1
                if quiet >= 2, (try? consumer.serverPending()) == 0 { return entries }
                if quiet > 120 {
                    throw NATSError(
                        kind: .timeout, operation: "read \(ClusterRegionCodec.bucket)",
                        text: "no message for 2 minutes with messages pending")
                }
                continue
            }
            quiet = 0
            for message in batch {
                guard let key = ClusterRegionCodec.key(ofSubject: message.subject) else { continue }
                let operation = message.headers["KV-Operation"]
                entries[key] = EntryState(
                    revision: message.sequence, live: operation != "DEL" && operation != "PURGE",
                    request: message.headers[ClusterRegionCodec.requestHeader], value: message.payload)
                if message.pending == 0 { return entries }
            }
        }
    }
}
