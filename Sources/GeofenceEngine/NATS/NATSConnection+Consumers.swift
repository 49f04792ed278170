import CNATS

#if canImport(Glibc)
    import Glibc
#endif

/// One message a consumer delivered: its subject, its sequence in the stream, its payload and headers.
package struct NATSDelivery: Sendable {
    package let subject: String
    package let streamSequence: UInt64
    package let payload: [UInt8]
    package let headers: [String: [String]]
    /// Messages of the consumer's subject still to come after this one when it was sent: the reader's lag.
    package let pending: UInt64
}

/// An ordered consumer of a stream: every message on `filterSubject` from a start sequence, in stream order,
/// each exactly once, handed to a closure on nats.c's delivery thread. nats.c makes it over again when the
/// server or the connection goes away (or a message is missed) and resumes after the last one delivered, so
/// the closure sees no gap and no repeat. Nothing is acknowledged: the reader keeps its own mark (the stream
/// sequence of what it has taken) and starts again from it.
///
/// The closure may block (a bounded queue that is full): nats.c's flow control then holds the server back.
package final class NATSOrderedSubscription: @unchecked Sendable {
    // @unchecked: the subscription is nats.c's (locked inside); `box` is only read by nats.c's thread.
    private let subscription: OpaquePointer
    private let box: Unmanaged<Box>

    final class Box {
        let deliver: @Sendable (NATSDelivery) -> Void
        init(_ deliver: @escaping @Sendable (NATSDelivery) -> Void) { self.deliver = deliver }
    }

    /// Starts delivering every message of `stream` on `filterSubject` with a sequence at or after
    /// `startSequence` (0 or 1: from the first). **Blocks** while the consumer is created.
    package init(
        connection: NATSConnection, stream: String, filterSubject: String, startSequence: UInt64,
        deliver: @escaping @Sendable (NATSDelivery) -> Void
    ) throws {
        let box = Unmanaged.passRetained(Box(deliver))
        var options = jsSubOptions()
        jsSubOptions_Init(&options)
        options.Ordered = true
        if startSequence > 1 {
            options.Config.DeliverPolicy = js_DeliverByStartSequence
            options.Config.OptStartSeq = startSequence
        } else {
            options.Config.DeliverPolicy = js_DeliverAll
        }
        var subscription: OpaquePointer?
        var code = jsErrCode(0)
        let status = stream.withCString { name in
            options.Stream = name
            return js_Subscribe(
                &subscription, connection.jetStream, filterSubject, NATSOrderedSubscription.onMessage,
                box.toOpaque(), nil, &options, &code)
        }
        guard status == NATS_OK, let subscription else {
            box.release()
            throw NATSError.from(status, jetStreamCode: code, operation: "consume \(filterSubject) of \(stream)")
        }
        // nats.c's own queue in front of the closure: generous, the closure's queue is the bound that matters.
        natsSubscription_SetPendingLimits(subscription, 1_000_000, 512 * 1024 * 1024)
        // Released once nats.c has delivered its last message (after `stop`), not before.
        natsSubscription_SetOnCompleteCB(subscription, NATSOrderedSubscription.onComplete, box.toOpaque())
        self.subscription = subscription
        self.box = box
    }

    deinit {
        stop()
        natsSubscription_Destroy(subscription)
    }

    /// No message is delivered after the one being delivered now, if any. Safe to call more than once.
    package func stop() {
        natsSubscription_Unsubscribe(subscription)
    }

    private static let onMessage: natsMsgHandler = { _, _, message, closure in
        guard let message, let closure else { return }
        defer { natsMsg_Destroy(message) }
        let box = Unmanaged<Box>.fromOpaque(closure).takeUnretainedValue()
        var meta: UnsafeMutablePointer<jsMsgMetaData>?
        guard natsMsg_GetMetaData(&meta, message) == NATS_OK, let meta else { return }
        let sequence = meta.pointee.Sequence.Stream
        let pending = meta.pointee.NumPending
        jsMsgMetaData_Destroy(meta)
        box.deliver(
            NATSDelivery(
                subject: natsMsg_GetSubject(message).map { String(cString: $0) } ?? "", streamSequence: sequence,
                payload: NATSConnection.payload(of: message), headers: NATSConnection.headers(of: message),
                pending: pending))
    }

    private static let onComplete: natsOnCompleteCB = { closure in
        guard let closure else { return }
        Unmanaged<Box>.fromOpaque(closure).release()
    }
}

extension NATSConnection {
    /// The message with `sequence` in `stream`, or nil when there is none (never stored, or deleted).
    /// **Blocks** for one JetStream request, at most `timeout` (nil: `requestTimeout`).
    package func message(stream: String, sequence: UInt64, timeout: Duration? = nil) throws -> StoredMessage? {
        var message: OpaquePointer?
        var code = jsErrCode(0)
        var options = jsOptions()
        jsOptions_Init(&options)
        options.Wait = max(1, natsMilliseconds(timeout ?? requestTimeout))
        let status = js_GetMsg(&message, jetStream, stream, sequence, &options, &code)
        defer { natsMsg_Destroy(message) }
        if status == NATS_NOT_FOUND { return nil }
        guard status == NATS_OK, let message else {
            throw NATSError.from(status, jetStreamCode: code, operation: "message \(sequence) of \(stream)")
        }
        return StoredMessage(
            subject: natsMsg_GetSubject(message).map { String(cString: $0) } ?? "", sequence: sequence,
            payload: Self.payload(of: message), headers: Self.headers(of: message),
            storedNanoseconds: natsMsg_GetTime(message))
    }

    /// Removes the messages on `subject` in `stream` but the last `keep`. **Blocks** for one JetStream request.
    ///
    /// (Not "below a sequence": nats-server 2.9.10 with nats.c 3.4 purged a message at the sequence given, of
    /// another subject too; `ClusterEngineTests` "checkpoints" showed it.)
    package func purge(stream: String, subject: String, keep: UInt64, timeout: Duration? = nil) throws {
        var options = jsOptions()
        jsOptions_Init(&options)
        options.Wait = max(1, natsMilliseconds(timeout ?? requestTimeout))
        var code = jsErrCode(0)
        let status = subject.withCString { filter in
            options.Stream.Purge.Subject = filter
            options.Stream.Purge.Keep = keep
            return js_PurgeStream(jetStream, stream, &options, &code)
        }
        guard status == NATS_OK else {
            throw NATSError.from(status, jetStreamCode: code, operation: "purge \(subject) of \(stream)")
        }
    }
}
