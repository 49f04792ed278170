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
    package func add(_ region: Region, replace: Bool, requestID: String?, now: Date = Date()) throws -> StoredRegion {
        let key = ClusterRegionCodec.key(for: region.id)
        let existing = try state(ofKey: key)
        if let existing, existing.live, let requestID, existing.request == requestID,
            case .success(let written) = ClusterRegionCodec.region(key: key, value: existing.value, written: now)
        {
            return stored(written, revision: existing.revision, now: now)
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

    private func stored(_ region: Region, revision: UInt64, now: Date) -> StoredRegion {
        StoredRegion(
            seq: Int64(clamping: revision), region: region, status: .monitoring, attempts: 0, nextRetry: nil,
            createdAt: region.createdAt ?? now, updatedAt: now)
    }

    /// Removes regions by id, all or nothing as the store does: any id without a region refuses them all,
    /// before anything is written. The ids removed, in the order given. An id is looked up in NFC, then as
    /// given. The same remove again under the same `requestID` finds its own delete markers and says the same.
    @discardableResult
    package func remove(ids: [String], requestID: String?) throws -> [String] {
        var targets: [(id: String, key: String, live: Bool)] = []
        for id in ids where !targets.contains(where: { $0.id == id }) {
            var found: (key: String, live: Bool)?
            for key in Set([VisibleName.normalized(id), id].map(ClusterRegionCodec.key(for:))).sorted() {
                guard let state = try state(ofKey: key) else { continue }
                if state.live {
                    found = (key, true)
                    break
                }
                if let requestID, state.request == requestID { found = (key, false) }
            }
            guard let found else { throw StoreError.regionNotFound(id) }
            targets.append((id, found.key, found.live))
        }
        for target in targets where target.live {
            _ = try connection.jetStreamPublish(
                subject: ClusterRegionCodec.subjectPrefix + target.key, payload: [],
                headers: [("KV-Operation", "DEL")] + headers(requestID))
        }
        return targets.map(\.id)
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
    /// Then the bucket is read back, once the server it is read from shows the last acknowledged write: a
    /// region whose key does not hold this import's write is written again, up to `importChecks` times.
    /// nats-server 2.9.10 can show an entry that its stream then drops: in CI, the re-run of an import
    /// read entries of the run that broke off as written, and they were gone once it ended. The read-back
    /// comes after writes the quorum acknowledged; a server that shows them has dropped whatever the stream
    /// dropped before them. A re-run with nothing left to write writes the file's last region again, for an
    /// acknowledged write to wait for. A key written since the import began, not under `requestID`, is
    /// someone else's and left alone. `afterScan` runs between the first read and the writes (tests lose
    /// entries there, as the cluster did).
    @discardableResult
    package func importAll(
        _ regions: [Region], replace: Bool, requestID: String, progress: (Int) -> Void = { _ in },
        afterScan: () throws -> Void = {}
    ) throws -> ImportOutcome {
        let withPolygons = regions.contains { $0.polygon != nil }
        let began = try connection.streamInfo(name: ClusterRegionCodec.stream)?.lastSequence ?? 0
        let current = try scan(values: withPolygons)
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
        var indices = last.filter { !own.contains($0.key) }.values.sorted()
        let written = indices.count
        if indices.isEmpty, let final = last.values.max() { indices = [final] }
        var acknowledged: UInt64
        do {
            acknowledged = try bucket.putAll(writes(indices), progress: progress)
        } catch let failure as NATSKeyValue.BulkFailure {
            // (With nothing left to write, the one write was the read-back's: every region was written.)
            throw ImportInterrupted(
                written: written == 0 ? 0 : failure.acknowledged, total: written, error: failure.error,
                checking: written == 0)
        }
        var rewritten = Set<String>()
        func checkFailed(_ error: NATSError) -> ImportInterrupted {
            ImportInterrupted(written: written, total: written, error: error, checking: true)
        }
        for round in 0...Self.importChecks {
            let after: [String: EntryState]
            do {
                after = try readBack(since: acknowledged)
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

    /// `scan(values: false)` from a server that shows the write at stream sequence `sequence` (the last
    /// one acknowledged): one that has not applied it yet is asked again, for up to a minute.
    private func readBack(since sequence: UInt64) throws -> [String: EntryState] {
        let began = ContinuousClock.now
        while true {
            let entries = try scan(values: false)
            let newest = entries.values.lazy.map(\.revision).max() ?? 0
            if newest >= sequence { return entries }
            if ContinuousClock.now - began > .seconds(60) {
                throw NATSError(
                    kind: .timeout, operation: "read back \(ClusterRegionCodec.bucket)",
                    text: "the bucket read shows sequence \(newest), not the acknowledged \(sequence), after 60 s")
            }
            Thread.sleep(forTimeInterval: 0.2)
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
