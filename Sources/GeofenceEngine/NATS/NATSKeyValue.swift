import CNATS

#if canImport(Glibc)
    import Glibc
#endif

/// A JetStream key-value bucket: values with a revision each (the stream sequence of their last write),
/// written unconditionally, only if absent, or only if the revision is still the one read (compare-and-set),
/// and watched. With a TTL, a key whose last write is older than it disappears (a lease that was not renewed).
///
/// Every call **blocks** for one JetStream request (or, for a create over a deleted key, two or three): call
/// it on a thread that owns the work (Docs/architecture.md).
package final class NATSKeyValue: @unchecked Sendable {
    // @unchecked: nats.c's kvStore locks inside and may be used from any thread; nothing mutable here.
    package let bucket: String
    private let store: OpaquePointer
    /// Kept so the JetStream context and the connection outlive the bucket's handle.
    let connection: NATSConnection

    /// One value of the bucket.
    package struct Entry: Equatable, Sendable {
        package enum Operation: Equatable, Sendable { case put, delete, purge }
        package let key: String
        package let value: [UInt8]
        /// The stream sequence of this write: what `update` expects.
        package let revision: UInt64
        package let operation: Operation
        /// When the server stored it, in nanoseconds since 1970 (the server's clock, not this machine's).
        package let createdNanoseconds: Int64
    }

    init(bucket: String, store: OpaquePointer, connection: NATSConnection) {
        self.bucket = bucket
        self.store = store
        self.connection = connection
    }

    deinit { kvStore_Destroy(store) }

    /// The subject a key's writes go to, as nats.c writes them (`$KV.BUCKET.KEY`).
    func subject(_ key: String) -> String { "$KV.\(bucket).\(key)" }

    /// The key's value, or nil when it is absent, deleted or expired.
    package func get(_ key: String) throws -> Entry? {
        var entry: OpaquePointer?
        let status = kvStore_Get(&entry, store, key)
        defer { kvEntry_Destroy(entry) }
        if status == NATS_NOT_FOUND { return nil }
        guard status == NATS_OK, let entry else { throw NATSError.from(status, operation: "get \(bucket)/\(key)") }
        return Self.entry(entry)
    }

    /// The key's latest write as the bucket's stream leader has it (a delete marker too; nil: never written
    /// or aged out), where `get` may answer from a replica that lags: measured, a `get` just after a create
    /// through the same connection found nothing. `createdNanoseconds` is not read (0). **Blocks** for one
    /// JetStream request.
    package func latest(_ key: String) throws -> Entry? {
        guard let last = try connection.lastMessage(stream: "KV_\(bucket)", subject: subject(key)) else { return nil }
        let operation: Entry.Operation =
            switch last.headers["KV-Operation"]?.first {
            case "DEL": .delete
            case "PURGE": .purge
            default: .put
            }
        return Entry(
            key: key, value: last.payload, revision: last.sequence, operation: operation, createdNanoseconds: 0)
    }

    /// Writes `value` whatever is there; its revision.
    @discardableResult
    package func put(_ key: String, _ value: [UInt8]) throws -> UInt64 {
        try write(key, value, expectedRevision: nil, operation: "put")
    }

    /// Writes `value` only if the key is absent (never written, deleted, or expired); its revision. A key that
    /// is there: `NATSError.Kind.keyExists`.
    @discardableResult
    package func create(_ key: String, _ value: [UInt8]) throws -> UInt64 {
        do {
            return try write(key, value, expectedRevision: 0, operation: "create")
        } catch let error as NATSError where error.kind == .wrongLastSequence {
            // The subject has a last message: a live value, or a delete marker (a deleted key is absent).
            guard let last = try connection.lastMessage(stream: "KV_\(bucket)", subject: subject(key)),
                let marker = last.headers["KV-Operation"]?.first, marker == "DEL" || marker == "PURGE"
            else {
                throw NATSError(
                    kind: .keyExists, operation: "create \(bucket)/\(key)", status: error.status,
                    jetStreamCode: error.jetStreamCode, text: error.text)
            }
            do {
                return try write(key, value, expectedRevision: last.sequence, operation: "create")
            } catch let again as NATSError where again.kind == .wrongRevision {
                // Another writer created it between the two.
                throw NATSError(
                    kind: .keyExists, operation: again.operation, status: again.status,
                    jetStreamCode: again.jetStreamCode, text: again.text)
            }
        }
    }

    /// Writes `value` only if the key's latest revision is still `revision` (compare-and-set); the new
    /// revision. Another write since: `NATSError.Kind.wrongRevision`, and nothing is written.
    @discardableResult
    package func update(_ key: String, _ value: [UInt8], revision: UInt64) throws -> UInt64 {
        guard revision > 0 else {
            throw NATSError(
                kind: .invalidArgument, operation: "update \(bucket)/\(key)", text: "revision 0 (use create)")
        }
        return try write(key, value, expectedRevision: revision, operation: "update")
    }

    /// `update(_:_:revision:)` guarded a second time by `messageID` (`Nats-Msg-Id`), for writes that must
    /// have one winner among writers racing from the same read: a lease (Docs/cluster.md). The id must be a
    /// function of the key and `revision` (such as `lease-p-3-after-REV`), so that two writers that read the
    /// same revision send the same id. The stream leader checks and stages a message id before it proposes
    /// the write to its replicas, which the expected revision alone is not on nats-server before 2.9.21
    /// (nats-server#4320): of two such writes one is stored, the other is answered
    /// `NATSError.Kind.duplicate` (a lost race, nothing written), or `.wrongRevision` when the winner was
    /// stored before the loser's revision was checked (measured: either, by timing). Both mean another
    /// writer won.
    ///
    /// `revision` may be a delete marker's (the key's latest write is a delete): that re-creates the key.
    /// A duplicate is also what a retry of this very write gets once the first try was stored (after a
    /// `.timeout`): read the key to tell the two apart.
    @discardableResult
    package func update(_ key: String, _ value: [UInt8], revision: UInt64, messageID: String) throws -> UInt64 {
        guard revision > 0 else {
            throw NATSError(
                kind: .invalidArgument, operation: "update \(bucket)/\(key)", text: "revision 0 (use create)")
        }
        return try write(key, value, expectedRevision: revision, operation: "update", messageID: messageID)
    }

    /// `create(_:_:)` guarded a second time by a message id, as `update(_:_:revision:messageID:)` is:
    /// `messageID(0)` for a key never written (or aged out), `messageID(marker)` when its latest write is a
    /// delete marker with revision `marker` (also when `messageID(0)` was used within the duplicate window,
    /// by the key's first create). Another writer first: `.keyExists` or `.duplicate`.
    @discardableResult
    package func create(_ key: String, _ value: [UInt8], messageID: (_ afterRevision: UInt64) -> String) throws
        -> UInt64
    {
        do {
            return try write(key, value, expectedRevision: 0, operation: "create", messageID: messageID(0))
        } catch let error as NATSError where error.kind == .wrongLastSequence || error.kind == .duplicate {
            guard let last = try connection.lastMessage(stream: "KV_\(bucket)", subject: subject(key)),
                let marker = last.headers["KV-Operation"]?.first, marker == "DEL" || marker == "PURGE"
            else {
                if error.kind == .duplicate { throw error }
                throw NATSError(
                    kind: .keyExists, operation: "create \(bucket)/\(key)", status: error.status,
                    jetStreamCode: error.jetStreamCode, text: error.text)
            }
            do {
                return try write(
                    key, value, expectedRevision: last.sequence, operation: "create",
                    messageID: messageID(last.sequence))
            } catch let again as NATSError where again.kind == .wrongRevision {
                throw NATSError(
                    kind: .keyExists, operation: again.operation, status: again.status,
                    jetStreamCode: again.jetStreamCode, text: again.text)
            }
        }
    }

    /// Deletes the key (a delete marker: watchers see it, `get` says absent); with `revision`, only if that is
    /// still its latest (an owner giving up its own lease and no other's), else `.wrongRevision`; with
    /// `messageID` too, guarded as `update(_:_:revision:messageID:)` is (`.duplicate`: another writer that
    /// read `revision` won). The marker's revision.
    @discardableResult
    package func delete(_ key: String, revision: UInt64? = nil, messageID: String? = nil) throws -> UInt64 {
        try write(
            key, [], expectedRevision: revision, operation: "delete", headers: [("KV-Operation", "DEL")],
            messageID: messageID)
    }

    private func write(
        _ key: String, _ value: [UInt8], expectedRevision: UInt64?, operation: String,
        headers: [(String, String)] = [], messageID: String? = nil
    ) throws -> UInt64 {
        let ack: NATSConnection.PublishAck
        do {
            ack = try connection.jetStreamPublish(
                subject: subject(key), payload: value, headers: headers, messageID: messageID,
                expectedLastSubjectSequence: expectedRevision)
        } catch let error as NATSError {
            let kind: NATSError.Kind =
                error.kind == .wrongLastSequence && expectedRevision != 0 ? .wrongRevision : error.kind
            throw NATSError(
                kind: kind, operation: "\(operation) \(bucket)/\(key)", status: error.status,
                jetStreamCode: error.jetStreamCode, text: error.text)
        }
        guard !ack.duplicate else {
            throw NATSError(
                kind: .duplicate, operation: "\(operation) \(bucket)/\(key)",
                text: "message id \(messageID ?? "") already stored (sequence \(ack.sequence)): nothing written")
        }
        return ack.sequence
    }

    /// Watches `keys` (a key, or a pattern with `*` and `>`): each key's latest value first, then a
    /// `.caughtUp`, then every change as it is written. Deletes are seen; a key expiring by the bucket's TTL
    /// is not (JetStream removes the message and writes no marker).
    package func watch(_ keys: String = ">") throws -> Watcher {
        var watcher: OpaquePointer?
        let status = kvStore_Watch(&watcher, store, keys, nil)
        guard status == NATS_OK, let watcher else { throw NATSError.from(status, operation: "watch \(bucket)/\(keys)") }
        return Watcher(watcher: watcher, bucket: self)
    }

    /// A watch of some keys of a bucket.
    package final class Watcher: @unchecked Sendable {
        // @unchecked: nats.c's watcher locks inside; `stop()` is meant to be called from another thread than
        // the one blocked in `next`.
        package enum Update: Equatable, Sendable {
            case entry(Entry)
            /// Every value there was when the watch began has been given.
            case caughtUp
        }

        private let watcher: OpaquePointer
        private let bucket: NATSKeyValue

        init(watcher: OpaquePointer, bucket: NATSKeyValue) {
            self.watcher = watcher
            self.bucket = bucket
        }

        deinit {
            kvWatcher_Stop(watcher)
            kvWatcher_Destroy(watcher)
        }

        /// The next update, or nil when none came within `timeout`. **Blocks** until then; `stop()` ends the
        /// wait with `NATSError.Kind.stopped`.
        package func next(timeout: Duration) throws -> Update? {
            var entry: OpaquePointer?
            let status = kvWatcher_Next(&entry, watcher, natsMilliseconds(timeout))
            defer { kvEntry_Destroy(entry) }
            if status == NATS_TIMEOUT { return nil }
            guard status == NATS_OK else { throw NATSError.from(status, operation: "watch \(bucket.bucket)") }
            guard let entry else { return .caughtUp }
            return .entry(NATSKeyValue.entry(entry))
        }

        /// Ends the watch; a thread blocked in `next` returns at once.
        package func stop() { kvWatcher_Stop(watcher) }
    }

    static func entry(_ entry: OpaquePointer) -> Entry {
        let count = Int(max(0, kvEntry_ValueLen(entry)))
        var value: [UInt8] = []
        if count > 0, let data = kvEntry_Value(entry) {
            value = Array(UnsafeRawBufferPointer(start: data, count: count))
        }
        let operation: Entry.Operation =
            switch kvEntry_Operation(entry) {
            case kvOp_Delete: .delete
            case kvOp_Purge: .purge
            default: .put
            }
        return Entry(
            key: kvEntry_Key(entry).map { String(cString: $0) } ?? "", value: value,
            revision: kvEntry_Revision(entry), operation: operation, createdNanoseconds: kvEntry_Created(entry))
    }
}

extension NATSConnection {
    /// The key-value bucket `bucket`, created with `replicas`, a `ttl` for every key (nil: none) and one
    /// value of history per key if it does not exist. An existing bucket is taken as it is. **Blocks** for one
    /// or two JetStream requests.
    package func ensureKeyValue(bucket: String, replicas: Int, ttl: Duration? = nil) throws -> NATSKeyValue {
        var store: OpaquePointer?
        var status = js_KeyValue(&store, jetStream, bucket)
        if status == NATS_NOT_FOUND {
            var config = kvConfig()
            kvConfig_Init(&config)
            config.History = 1
            config.Replicas = Int32(clamping: replicas)
            config.TTL = ttl.map(natsNanoseconds) ?? 0
            config.StorageType = js_FileStorage
            status = bucket.withCString { name in
                config.Bucket = name
                return js_CreateKeyValue(&store, jetStream, &config)
            }
            // Another engine created it meanwhile.
            if status != NATS_OK { status = js_KeyValue(&store, jetStream, bucket) }
        }
        guard status == NATS_OK, let store else { throw NATSError.from(status, operation: "bucket \(bucket)") }
        return NATSKeyValue(bucket: bucket, store: store, connection: self)
    }
}
