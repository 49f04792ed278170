import CNATS

#if canImport(Glibc)
    import Glibc
#endif

/// Durable pull consumers with explicit acknowledgements: a named consumer that the stream keeps (replicated
/// as the stream is, so it outlives any one server and any one client), read in batches, each message
/// acknowledged by the reader once it has done with it; a message not acknowledged within the consumer's
/// ack wait is delivered again.
extension NATSConnection {
    /// A consumer as JetStream describes it now.
    package struct ConsumerInfo: Equatable, Sendable {
        package let stream: String
        package let name: String
        /// What its creator wrote in it (who reads through it).
        package let description: String
        /// The subject it reads ("" for every subject of the stream).
        package let filterSubject: String
        /// The stream sequence of the last message it delivered (0: none yet).
        package let deliveredStreamSequence: UInt64
        /// The stream sequence up to which every message is acknowledged.
        package let ackFloorStreamSequence: UInt64
        /// Messages delivered and not acknowledged yet.
        package let ackPending: Int
        /// Messages of the stream it has not delivered yet.
        package let pending: UInt64
        package let ackWait: Duration
        package let maxAckPending: Int
    }

    /// The consumer `name` of `stream`, or nil when there is none. **Blocks** for one JetStream request.
    package func consumerInfo(stream: String, name: String) throws -> ConsumerInfo? {
        var info: UnsafeMutablePointer<jsConsumerInfo>?
        var code = jsErrCode(0)
        let status = js_GetConsumerInfo(&info, jetStream, stream, name, nil, &code)
        defer { jsConsumerInfo_Destroy(info) }
        if status == NATS_NOT_FOUND || code == JSConsumerNotFoundErr { return nil }
        guard status == NATS_OK, let info else {
            throw NATSError.from(status, jetStreamCode: code, operation: "consumer \(name) of \(stream)")
        }
        return Self.consumerInfo(info)
    }

    /// Creates the durable pull consumer `name` of `stream` with explicit acknowledgements, reading
    /// `filterSubject` from stream sequence `startSequence` on (nil or 0: from the stream's first message), each
    /// message delivered again after `ackWait` without an acknowledgement, at most `maxAckPending` delivered
    /// and not yet acknowledged at a time. It has the stream's replicas. A consumer of that name that exists
    /// with another configuration is an error (`deleteConsumer` it first). **Blocks** for one JetStream
    /// request.
    package func addPullConsumer(
        stream: String, name: String, description: String, filterSubject: String, startSequence: UInt64?,
        ackWait: Duration, maxAckPending: Int
    ) throws -> ConsumerInfo {
        var config = jsConsumerConfig()
        jsConsumerConfig_Init(&config)
        var info: UnsafeMutablePointer<jsConsumerInfo>?
        var code = jsErrCode(0)
        let status = name.withCString { cName in
            description.withCString { cDescription in
                filterSubject.withCString { cFilter in
                    config.Durable = cName
                    config.Description = cDescription
                    config.FilterSubject = cFilter
                    config.AckPolicy = js_AckExplicit
                    config.AckWait = natsNanoseconds(ackWait)
                    config.MaxAckPending = Int64(clamping: max(1, maxAckPending))
                    if let start = startSequence, start > 0 {
                        config.DeliverPolicy = js_DeliverByStartSequence
                        config.OptStartSeq = start
                    } else {
                        config.DeliverPolicy = js_DeliverAll
                    }
                    return js_AddConsumer(&info, jetStream, stream, &config, nil, &code)
                }
            }
        }
        defer { jsConsumerInfo_Destroy(info) }
        guard status == NATS_OK, let info else {
            throw NATSError.from(status, jetStreamCode: code, operation: "create consumer \(name) of \(stream)")
        }
        return Self.consumerInfo(info)
    }

    /// Deletes the consumer `name` of `stream` (with what it remembers of deliveries and acknowledgements);
    /// none there is not an error. **Blocks** for one JetStream request.
    package func deleteConsumer(stream: String, name: String) throws {
        var code = jsErrCode(0)
        let status = js_DeleteConsumer(jetStream, stream, name, nil, &code)
        if status == NATS_NOT_FOUND || code == JSConsumerNotFoundErr { return }
        guard status == NATS_OK else {
            throw NATSError.from(status, jetStreamCode: code, operation: "delete consumer \(name) of \(stream)")
        }
    }

    /// A reader of the existing pull consumer `consumer` of `stream`, whose filter subject is `subject`.
    /// Unsubscribing (the reader's end) leaves the consumer as it is. **Blocks** for one JetStream request.
    package func pullSubscribe(stream: String, consumer: String, subject: String) throws -> NATSPullSubscription {
        var options = jsSubOptions()
        jsSubOptions_Init(&options)
        var subscription: OpaquePointer?
        var code = jsErrCode(0)
        let status = stream.withCString { cStream in
            consumer.withCString { cConsumer in
                options.Stream = cStream
                options.Consumer = cConsumer
                return js_PullSubscribe(&subscription, jetStream, subject, cConsumer, nil, &options, &code)
            }
        }
        guard status == NATS_OK, let subscription else {
            throw NATSError.from(status, jetStreamCode: code, operation: "read consumer \(consumer) of \(stream)")
        }
        return NATSPullSubscription(subscription: subscription, connection: self, name: "\(stream)/\(consumer)")
    }

    /// The sequence of the oldest message `stream` still holds (the one after the last removed when it holds
    /// none), or nil when there is no such stream. **Blocks** for one JetStream request.
    package func firstSequence(stream: String) throws -> UInt64? {
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var code = jsErrCode(0)
        let status = js_GetStreamInfo(&info, jetStream, stream, nil, &code)
        defer { jsStreamInfo_Destroy(info) }
        if status == NATS_NOT_FOUND || code == JSStreamNotFoundErr { return nil }
        guard status == NATS_OK, let info else {
            throw NATSError.from(status, jetStreamCode: code, operation: "stream \(stream)")
        }
        return info.pointee.State.FirstSeq
    }

    private static func consumerInfo(_ info: UnsafeMutablePointer<jsConsumerInfo>) -> ConsumerInfo {
        let config = info.pointee.Config?.pointee
        return ConsumerInfo(
            stream: info.pointee.Stream.map { String(cString: $0) } ?? "",
            name: info.pointee.Name.map { String(cString: $0) } ?? "",
            description: config?.Description.map { String(cString: $0) } ?? "",
            filterSubject: config?.FilterSubject.map { String(cString: $0) } ?? "",
            deliveredStreamSequence: info.pointee.Delivered.Stream,
            ackFloorStreamSequence: info.pointee.AckFloor.Stream,
            ackPending: Int(clamping: info.pointee.NumAckPending), pending: info.pointee.NumPending,
            ackWait: .nanoseconds(config?.AckWait ?? 0), maxAckPending: Int(clamping: config?.MaxAckPending ?? 0))
    }
}

/// A message a consumer delivered.
package struct ConsumedMessage: Equatable, Sendable {
    package let subject: String
    /// Its sequence in the stream.
    package let streamSequence: UInt64
    /// How many times the consumer has delivered it, this time included (more than 1: a redelivery).
    package let deliveries: UInt64
    package let payload: [UInt8]
    /// Each header's values, in the order they were added.
    package let headers: [String: [String]]
}

/// The reading end of a durable pull consumer (`NATSConnection.pullSubscribe`). Used by one thread at a time,
/// the one that owns the reading (every call **blocks**).
package final class NATSPullSubscription: @unchecked Sendable {
    // @unchecked: nats.c's subscription locks inside; the owner calls `fetch` from one thread.
    private let subscription: OpaquePointer
    /// Kept so the connection outlives the subscription.
    private let connection: NATSConnection
    private let name: String

    init(subscription: OpaquePointer, connection: NATSConnection, name: String) {
        self.subscription = subscription
        self.connection = connection
        self.name = name
    }

    deinit {
        // Only the client's side: the consumer was made by its owner (not by this subscription), so the
        // server keeps it, with its place.
        natsSubscription_Destroy(subscription)
    }

    /// Up to `batch` messages, in the consumer's order: as soon as some are there (not necessarily `batch`),
    /// or none (an empty batch) when none came within `timeout`. **Blocks** until then. Each message is
    /// acknowledged through the batch (`acknowledge`), after its reader has done with it.
    package func fetch(batch: Int, timeout: Duration) throws -> NATSFetchedBatch {
        var list = natsMsgList()
        var code = jsErrCode(0)
        let status = natsSubscription_Fetch(
            &list, subscription, Int32(clamping: max(1, batch)), natsMilliseconds(timeout), &code)
        if status == NATS_TIMEOUT { return NATSFetchedBatch(list: list) }
        guard status == NATS_OK else {
            let error = NATSError.from(status, jetStreamCode: code, operation: "fetch from \(name)")
            natsMsgList_Destroy(&list)
            throw error
        }
        return NATSFetchedBatch(list: list)
    }
}

/// Messages one fetch returned, which it holds until they are acknowledged (or given up: a message never
/// acknowledged is delivered again after the consumer's ack wait).
package final class NATSFetchedBatch: @unchecked Sendable {
    // @unchecked: used by the thread that fetched it, one call at a time.
    private var list: natsMsgList
    package let messages: [ConsumedMessage]

    init(list: natsMsgList) {
        self.list = list
        var messages: [ConsumedMessage] = []
        for index in 0..<Int(max(0, list.Count)) {
            guard let message = list.Msgs?[index] else { continue }
            var meta: UnsafeMutablePointer<jsMsgMetaData>?
            var sequence: UInt64 = 0
            var deliveries: UInt64 = 1
            if natsMsg_GetMetaData(&meta, message) == NATS_OK, let meta {
                sequence = meta.pointee.Sequence.Stream
                deliveries = meta.pointee.NumDelivered
                jsMsgMetaData_Destroy(meta)
            }
            messages.append(
                ConsumedMessage(
                    subject: natsMsg_GetSubject(message).map { String(cString: $0) } ?? "",
                    streamSequence: sequence, deliveries: deliveries, payload: NATSConnection.payload(of: message),
                    headers: NATSConnection.headers(of: message)))
        }
        self.messages = messages
    }

    deinit { natsMsgList_Destroy(&list) }

    /// Acknowledges the first `count` messages (all when nil). Acknowledgements are sent without waiting for
    /// the server's answer: one lost on the way means the message comes again after the ack wait, which the
    /// reader must recognize (as a redelivery). Throws the first failure to send.
    package func acknowledge(first count: Int? = nil) throws {
        let upTo = min(count ?? messages.count, Int(max(0, list.Count)))
        var failure: NATSError?
        for index in 0..<upTo {
            guard let message = list.Msgs?[index] else { continue }
            let status = natsMsg_Ack(message, nil)
            if status != NATS_OK, failure == nil {
                failure = NATSError.from(
                    status, operation: "acknowledge stream message \(messages[index].streamSequence)")
            }
        }
        if let failure { throw failure }
    }
}
