import CNATS
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// An ordered push consumer on a stream (JetStream's ephemeral consumer that nats.c re-creates from the last
/// sequence seen after a gap, with flow control and heartbeats): every message from the start, or only the
/// last of each subject (a key-value bucket's current values and delete markers), then every new one as it
/// is stored. Messages are queued as nats.c delivers them and taken with `next`/`take` on the caller's
/// thread, so a slow caller never makes nats.c drop any.
///
/// `take` and `next` **block** (up to the time given): call them on a thread that owns the work.
package final class NATSOrderedConsumer: @unchecked Sendable {
    // @unchecked: the subscription is nats.c's (locked inside); the queue locks itself.

    /// One message as stored.
    package struct Message: Sendable, Equatable {
        package let subject: String
        /// Its stream sequence.
        package let sequence: UInt64
        /// When the server stored it, in nanoseconds since 1970 (the server's clock: the same on every replica).
        package let timestampNanoseconds: Int64
        /// Empty with `headersOnly`.
        package let payload: [UInt8]
        /// The first value of each header asked for that the message has.
        package let headers: [String: String]
        /// How many messages the consumer had still to deliver after this one when it sent it (0: this was
        /// the last one stored then).
        package let pending: UInt64
    }

    private let subscription: OpaquePointer
    private let queue: Queue
    /// Keeps the connection (and its JetStream context) alive as long as the subscription.
    private let connection: NATSConnection

    /// Subscribes to `subject` (a stream's subjects, wildcards allowed) of `stream`: all of its messages
    /// (`lastPerSubject` false) or the last per subject, the payload left out with `headersOnly`;
    /// `headers` names the headers each `Message` gives. **Blocks** for the consumer's creation.
    package init(
        connection: NATSConnection, stream: String, subject: String, lastPerSubject: Bool, headersOnly: Bool = false,
        headers: [String] = []
    ) throws {
        self.connection = connection
        let queue = Queue(headers: headers)
        self.queue = queue
        var options = jsSubOptions()
        jsSubOptions_Init(&options)
        options.Ordered = true
        options.Config.DeliverPolicy = lastPerSubject ? js_DeliverLastPerSubject : js_DeliverAll
        options.Config.HeadersOnly = headersOnly
        var subscription: OpaquePointer?
        var code = jsErrCode(0)
        // Released by the completion callback, once nats.c will call neither callback again.
        let closure = Unmanaged.passRetained(queue).toOpaque()
        let status = stream.withCString { name in
            options.Stream = name
            return js_Subscribe(
                &subscription, connection.jetStream, subject,
                { _, _, message, closure in
                    guard let message else { return }
                    defer { natsMsg_Destroy(message) }
                    guard let closure else { return }
                    Unmanaged<Queue>.fromOpaque(closure).takeUnretainedValue().received(message)
                }, closure, nil, &options, &code)
        }
        guard status == NATS_OK, let subscription else {
            Unmanaged<Queue>.fromOpaque(closure).release()
            throw NATSError.from(status, jetStreamCode: code, operation: "consumer of \(subject) in \(stream)")
        }
        self.subscription = subscription
        // The queue here is the limit (flow control paces the server): nats.c must never drop for a slow
        // consumer, which an ordered consumer would take for a gap and start over.
        _ = natsSubscription_SetPendingLimits(subscription, -1, -1)
        _ = natsSubscription_SetOnCompleteCB(
            subscription, { closure in if let closure { Unmanaged<Queue>.fromOpaque(closure).release() } }, closure)
    }

    deinit {
        natsSubscription_Unsubscribe(subscription)
        natsSubscription_Destroy(subscription)
    }

    /// Messages the consumer has still to deliver, as the server counts them now (0: the caller has been
    /// given, or has queued, everything stored so far). **Blocks** for one request.
    package func serverPending() throws -> UInt64 {
        var info: UnsafeMutablePointer<jsConsumerInfo>?
        var code = jsErrCode(0)
        let status = natsSubscription_GetConsumerInfo(&info, subscription, nil, &code)
        defer { jsConsumerInfo_Destroy(info) }
        guard status == NATS_OK, let info else {
            throw NATSError.from(status, jetStreamCode: code, operation: "consumer info")
        }
        return info.pointee.NumPending
    }

    /// Every message queued now, at most `limit`; when none is, waits up to `timeout` for one. Empty: none
    /// came, or `stop()` was called.
    package func take(limit: Int = 100_000, timeout: Duration) -> [Message] {
        queue.take(limit: limit, timeout: timeout)
    }

    /// Ends the consumer: a thread waiting in `take` returns at once, and nothing more is queued.
    package func stop() {
        queue.stop()
        natsSubscription_Unsubscribe(subscription)
    }

    /// Messages between nats.c's delivery thread and the caller.
    private final class Queue: @unchecked Sendable {
        // @unchecked: `messages` and `stopped` are touched with `condition` held; `headerNames` is constant.
        private let condition = NSCondition()
        private var messages: [Message] = []
        private var stopped = false
        private let headerNames: [String]

        init(headers: [String]) { headerNames = headers }

        /// On nats.c's delivery thread.
        func received(_ message: OpaquePointer) {
            var meta: UnsafeMutablePointer<jsMsgMetaData>?
            guard natsMsg_GetMetaData(&meta, message) == NATS_OK, let meta else { return }
            let sequence = meta.pointee.Sequence.Stream
            let pending = meta.pointee.NumPending
            let timestamp = meta.pointee.Timestamp
            jsMsgMetaData_Destroy(meta)
            var headers: [String: String] = [:]
            for name in headerNames {
                var value: UnsafePointer<CChar>?
                if natsMsgHeader_Get(message, name, &value) == NATS_OK, let value {
                    headers[name] = String(cString: value)
                }
            }
            let item = Message(
                subject: natsMsg_GetSubject(message).map { String(cString: $0) } ?? "", sequence: sequence,
                timestampNanoseconds: timestamp, payload: NATSConnection.payload(of: message), headers: headers,
                pending: pending)
            condition.withLock {
                guard !stopped else { return }
                messages.append(item)
                if messages.count == 1 { condition.signal() }
            }
        }

        func take(limit: Int, timeout: Duration) -> [Message] {
            let deadline = Date().addingTimeInterval(Double(natsMilliseconds(timeout)) / 1000)
            return condition.withLock {
                while messages.isEmpty && !stopped {
                    if !condition.wait(until: deadline) { break }
                }
                guard !messages.isEmpty else { return [] }
                if messages.count <= limit {
                    defer { messages = [] }
                    return messages
                }
                defer { messages.removeFirst(limit) }
                return Array(messages.prefix(limit))
            }
        }

        func stop() {
            condition.withLock {
                stopped = true
                messages = []
                condition.broadcast()
            }
        }
    }
}
