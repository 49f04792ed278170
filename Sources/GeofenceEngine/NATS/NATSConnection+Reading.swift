import CNATS

#if canImport(Glibc)
    import Glibc
#endif

extension NATSConnection {
    /// Reads `stream` in order, from sequence `from` through the last message it held when the call began (or
    /// the last that `filter` matches), giving each message (its subject, stream sequence, payload and
    /// headers) to `body`; how many it gave. `filter` narrows it to a subject pattern within the stream's
    /// subjects (nil: the stream's own subjects, which must then be one pattern). Messages stored meanwhile
    /// are not read.
    ///
    /// An ordered consumer (ephemeral, no acknowledgements, flow-controlled), so a stream of a million
    /// messages reads at the network's pace, not one request per message. When nothing comes for
    /// `idleTimeout` (a consumer lost with a server), it starts a new one after the last message read, up to
    /// `attempts` times; then `NATSError.Kind.timeout`. **Blocks** until done.
    @discardableResult
    package func readStream(
        _ stream: String, filter: String? = nil, from first: UInt64 = 1, idleTimeout: Duration = .seconds(5),
        attempts: Int = 4, _ body: (StoredMessage) throws -> Void
    ) throws -> Int {
        guard let info = try streamInfo(name: stream) else {
            throw NATSError(kind: .other, operation: "read stream \(stream)", text: "no such stream")
        }
        let last = info.lastSequence
        guard last >= max(first, 1), info.messages > 0 else { return 0 }
        guard let subject = filter ?? (info.subjects.count == 1 ? info.subjects[0] : nil) else {
            throw NATSError(
                kind: .invalidArgument, operation: "read stream \(stream)",
                text: "the stream has \(info.subjects.count) subjects: give a filter")
        }
        var count = 0
        var next = max(first, 1)
        var attempt = 1
        while true {
            do {
                if try readOrdered(
                    stream, subject: subject, from: next, through: last, idleTimeout: idleTimeout,
                    { message in
                        try body(message)
                        count += 1
                        next = message.sequence + 1
                    })
                {
                    return count
                }
            } catch let error as NATSError where error.kind == .timeout && attempt < max(1, attempts) {
                attempt += 1
            }
        }
    }

    /// One ordered consumer from `first`; true when it reached `last` or had nothing more pending.
    private func readOrdered(
        _ stream: String, subject: String, from first: UInt64, through last: UInt64, idleTimeout: Duration,
        _ body: (StoredMessage) throws -> Void
    ) throws -> Bool {
        var options = jsSubOptions()
        jsSubOptions_Init(&options)
        options.Ordered = true
        options.Config.DeliverPolicy = js_DeliverByStartSequence
        options.Config.OptStartSeq = first
        var subscription: OpaquePointer?
        var code = jsErrCode(0)
        let status = stream.withCString { name in
            options.Stream = name
            return js_SubscribeSync(&subscription, jetStream, subject, nil, &options, &code)
        }
        guard status == NATS_OK, let subscription else {
            throw NATSError.from(status, jetStreamCode: code, operation: "read stream \(stream)")
        }
        defer {
            natsSubscription_Unsubscribe(subscription)
            natsSubscription_Destroy(subscription)
        }
        while true {
            var message: OpaquePointer?
            let next = natsSubscription_NextMsg(&message, subscription, natsMilliseconds(idleTimeout))
            guard next == NATS_OK, let message else {
                throw NATSError.from(
                    next, operation: "read stream \(stream) (from sequence \(first), up to \(last) wanted)")
            }
            defer { natsMsg_Destroy(message) }
            var meta: UnsafeMutablePointer<jsMsgMetaData>?
            guard natsMsg_GetMetaData(&meta, message) == NATS_OK, let meta else { continue }
            let sequence = meta.pointee.Sequence.Stream
            // Nothing more for this consumer now (a filter may exclude the stream's last message).
            let pending = meta.pointee.NumPending
            jsMsgMetaData_Destroy(meta)
            try body(
                StoredMessage(
                    subject: natsMsg_GetSubject(message).map { String(cString: $0) } ?? "", sequence: sequence,
                    payload: Self.payload(of: message), headers: Self.headers(of: message)))
            if sequence >= last || pending == 0 { return true }
        }
    }
}
