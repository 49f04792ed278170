import CNATS
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension NATSKeyValue {
    /// One write of `putAll`: a value for a key, or a delete marker (`value` nil), with headers of the
    /// caller's besides.
    package struct Write: Sendable {
        package let key: String
        package let value: [UInt8]?
        package let headers: [(String, String)]

        package init(key: String, value: [UInt8]?, headers: [(String, String)] = []) {
            self.key = key
            self.value = value
            self.headers = headers
        }
    }

    /// Writes `writes` in their order, pipelined: up to `window` are in flight at once, each acknowledged by
    /// JetStream (stored on the bucket's quorum) on its own, so a million take seconds rather than a million
    /// round trips. Returns once every one is acknowledged, with the highest stream sequence acknowledged (0:
    /// nothing to write). `progress` is called with the number acknowledged so far, now and then, on this
    /// thread.
    ///
    /// The first write refused (or not acknowledged within `requestTimeout` after the last was sent) stops
    /// sending and is thrown as `BulkFailure`, which says how many were acknowledged; those are stored, the
    /// rest may or may not be (a write in flight when the connection broke). **Blocks** until then.
    @discardableResult
    package func putAll(_ writes: [Write], window: Int = 4096, progress: (Int) -> Void = { _ in }) throws -> UInt64 {
        guard !writes.isEmpty else { return 0 }
        let tracker = AckTracker()
        let requestMilliseconds = natsMilliseconds(connection.requestTimeout)
        var options = jsOptions()
        jsOptions_Init(&options)
        options.Wait = requestMilliseconds
        options.PublishAsync.MaxPending = Int64(max(1, window))
        options.PublishAsync.StallWait = requestMilliseconds
        options.PublishAsync.AckHandler = { _, message, ack, failure, closure in
            defer { natsMsg_Destroy(message) }
            guard let closure else { return }
            let tracker = Unmanaged<AckTracker>.fromOpaque(closure).takeUnretainedValue()
            if let failure {
                let code = Int(failure.pointee.ErrCode.rawValue)
                let text =
                    failure.pointee.ErrText.map { String(cString: $0) } ?? "status \(failure.pointee.Err.rawValue)"
                tracker.failed(status: failure.pointee.Err.rawValue, code: code, text: text)
            } else if let ack {
                tracker.acknowledged(sequence: ack.pointee.Sequence)
            }
        }
        // Retained for nats.c's callbacks: released once every write is acknowledged; after a failure, an
        // acknowledgement may still come after this returns, so the tracker (a few bytes) is left to it.
        let retained = Unmanaged.passRetained(tracker)
        options.PublishAsync.AckHandlerClosure = retained.toOpaque()
        var context: OpaquePointer?
        var status = natsConnection_JetStream(&context, connection.connection, &options)
        guard status == NATS_OK, let context else {
            retained.release()
            throw NATSError.from(status, operation: "JetStream context for writes to \(bucket)")
        }
        defer { jsCtx_Destroy(context) }

        var sent = 0
        for write in writes {
            if tracker.failure != nil { break }
            var headers = write.headers
            if write.value == nil { headers.insert(("KV-Operation", "DEL"), at: 0) }
            var message: OpaquePointer? = try NATSConnection.message(
                subject: subject(write.key), payload: write.value ?? [], headers: headers)
            status = js_PublishMsgAsync(context, &message, nil)
            natsMsg_Destroy(message)
            guard status == NATS_OK else {
                // (Typically no acknowledgement for `requestTimeout` with `window` in flight: the stream has no
                // quorum.) What is in flight is given up: its writes may or may not be stored.
                let error = NATSError.from(status, operation: "write \(bucket)/\(write.key)")
                Self.abandon(context, wait: requestMilliseconds)
                throw BulkFailure(acknowledged: tracker.count, error: error)
            }
            sent += 1
            if sent % 10_000 == 0 { progress(tracker.count) }
        }
        var wait = jsPubOptions()
        jsPubOptions_Init(&wait)
        wait.MaxWait = requestMilliseconds
        status = js_PublishAsyncComplete(context, &wait)
        if status != NATS_OK {
            // What is still unacknowledged is dropped: its writes may or may not be stored.
            Self.abandon(context, wait: 1)
            if tracker.failure == nil {
                throw BulkFailure(
                    acknowledged: tracker.count,
                    error: NATSError.from(status, operation: "acknowledgements of writes to \(bucket)"))
            }
        }
        if let failure = tracker.failure {
            throw BulkFailure(
                acknowledged: tracker.count,
                error: NATSError(
                    kind: failure.code == Int(JSStreamWrongLastSequenceErr.rawValue) ? .wrongLastSequence : .other,
                    operation: "write to \(bucket)", status: failure.status, jetStreamCode: failure.code,
                    text: failure.text))
        }
        retained.release()
        progress(tracker.count)
        return tracker.highest
    }

    /// Waits up to `wait` ms for the acknowledgements in flight, then drops those still missing. Never
    /// `js_PublishAsyncComplete` without a limit: with the stream's quorum gone it would wait for ever.
    private static func abandon(_ context: OpaquePointer, wait: Int64) {
        var options = jsPubOptions()
        jsPubOptions_Init(&options)
        options.MaxWait = max(1, wait)
        _ = js_PublishAsyncComplete(context, &options)
        var pending = natsMsgList()
        if js_PublishAsyncGetPendingList(&pending, context) == NATS_OK { natsMsgList_Destroy(&pending) }
    }

    /// `putAll` stopped: `acknowledged` writes are stored, the others may or may not be.
    package struct BulkFailure: Error, Sendable, CustomStringConvertible {
        package let acknowledged: Int
        package let error: NATSError
        package var description: String { error.description }
    }

    /// The acknowledgements of `putAll`, counted on nats.c's thread.
    private final class AckTracker: @unchecked Sendable {
        // @unchecked: every field is touched with `lock` held.
        private let lock = NSLock()
        private var acknowledgedCount = 0
        private var highestSequence: UInt64 = 0
        private var firstFailure: (status: UInt32, code: Int, text: String)?

        func acknowledged(sequence: UInt64) {
            lock.withLock {
                acknowledgedCount += 1
                highestSequence = max(highestSequence, sequence)
            }
        }

        func failed(status: UInt32, code: Int, text: String) {
            lock.withLock { if firstFailure == nil { firstFailure = (status, code, text) } }
        }

        var count: Int { lock.withLock { acknowledgedCount } }
        var highest: UInt64 { lock.withLock { highestSequence } }
        var failure: (status: UInt32, code: Int, text: String)? { lock.withLock { firstFailure } }
    }
}
