import CNATS
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// JetStream publishes kept in flight together (nats.c's asynchronous publish): `publish` sends and returns at
/// once (waiting only while `maxPending` are unanswered), `settle` waits for every answer since the last
/// settle and says which messages were stored, which were duplicates and which failed, by message id. A
/// producer that needs thousands of acknowledged publishes a second (a fleet's fixes, the bench) uses this;
/// one publish at a time waits a round trip through the stream's replicas for each.
///
/// One thread uses a publisher at a time (it blocks, by the concurrency rule of Docs/architecture.md);
/// nats.c answers on a thread of its own.
package final class NATSPipelinedPublisher: @unchecked Sendable {
    // @unchecked: `answers` is shared with nats.c's thread and only touched under its lock; the rest is set
    // in `init` or used by the one thread that publishes.

    /// What became of the messages sent since the last `settle`.
    package struct Settlement: Sendable {
        /// Stored now.
        package var stored = 0
        /// Acknowledged as a duplicate of a message id stored within the stream's duplicate window: stored
        /// before (a resend of a publish whose acknowledgement was lost), nothing new.
        package var duplicates = 0
        /// Refused or unanswered (`.timeout`), by message id: send them again with the same id.
        package var failed: [(messageID: String, error: NATSError)] = []
    }

    private let connection: NATSConnection
    private let context: OpaquePointer
    private let answers: Answers
    private let ackTimeout: Duration
    private var sent = 0

    /// The answers nats.c's thread hands over.
    private final class Answers: @unchecked Sendable {
        let condition = NSCondition()
        var settlement = Settlement()
        var count = 0
    }

    /// A publisher on `connection` (a JetStream context of its own), with at most `maxPending` messages
    /// unanswered and `ackTimeout` for each answer.
    package init(connection: NATSConnection, maxPending: Int = 4096, ackTimeout: Duration = .seconds(5)) throws {
        self.connection = connection
        self.ackTimeout = ackTimeout
        answers = Answers()
        var options = jsOptions()
        jsOptions_Init(&options)
        options.Wait = natsMilliseconds(connection.requestTimeout)
        options.PublishAsync.MaxPending = Int64(clamping: max(1, maxPending))
        options.PublishAsync.AckHandlerClosure = Unmanaged.passUnretained(answers).toOpaque()
        options.PublishAsync.AckHandler = { _, message, ack, failure, closure in
            defer { natsMsg_Destroy(message) }
            guard let closure else { return }
            let answers = Unmanaged<Answers>.fromOpaque(closure).takeUnretainedValue()
            var failed: (String, NATSError)?
            if ack == nil {
                let id = message.flatMap { NATSPipelinedPublisher.messageID(of: $0) } ?? ""
                let status = failure?.pointee.Err ?? NATS_ERR
                let code = failure?.pointee.ErrCode ?? jsErrCode(0)
                let text = failure?.pointee.ErrText.map { String(cString: $0) }
                var error = NATSError.from(status, jetStreamCode: code, operation: "JetStream publish \(id)")
                if let text, !text.isEmpty {
                    error = NATSError(
                        kind: error.kind, operation: error.operation, status: error.status,
                        jetStreamCode: error.jetStreamCode, text: text)
                }
                failed = (id, error)
            }
            answers.condition.lock()
            if let failed {
                answers.settlement.failed.append((messageID: failed.0, error: failed.1))
            } else if ack?.pointee.Duplicate == true {
                answers.settlement.duplicates += 1
            } else {
                answers.settlement.stored += 1
            }
            answers.count += 1
            answers.condition.broadcast()
            answers.condition.unlock()
        }
        var context: OpaquePointer?
        let status = natsConnection_JetStream(&context, connection.connection, &options)
        guard status == NATS_OK, let context else { throw NATSError.from(status, operation: "JetStream context") }
        self.context = context
    }

    deinit {
        // Waits for what is in flight, so nats.c calls no handler after `answers` is gone.
        var options = jsPubOptions()
        jsPubOptions_Init(&options)
        options.MaxWait = natsMilliseconds(ackTimeout)
        _ = js_PublishAsyncComplete(context, &options)
        jsCtx_Destroy(context)
        withExtendedLifetime(answers) {}
    }

    /// Sends one message with `Nats-Msg-Id` `messageID` (which `settle` reports it by), without waiting for
    /// its acknowledgement. **Blocks** only while `maxPending` messages are unanswered.
    package func publish(subject: String, payload: [UInt8], messageID: String, headers: [(String, String)] = [])
        throws
    {
        var message: OpaquePointer? = try NATSConnection.message(subject: subject, payload: payload, headers: headers)
        defer { if message != nil { natsMsg_Destroy(message) } }
        var options = jsPubOptions()
        jsPubOptions_Init(&options)
        options.MaxWait = natsMilliseconds(ackTimeout)
        let status = messageID.withCString { id in
            options.MsgId = id
            return js_PublishMsgAsync(context, &message, &options)
        }
        guard status == NATS_OK else { throw NATSError.from(status, operation: "JetStream publish to \(subject)") }
        sent += 1
    }

    /// Waits until every message sent since the last settle is answered (or `timeout` has passed: those
    /// unanswered are failed with `.timeout`); what became of them. **Blocks**.
    package func settle(timeout: Duration) -> Settlement {
        var options = jsPubOptions()
        jsPubOptions_Init(&options)
        options.MaxWait = natsMilliseconds(timeout)
        var unanswered: [String] = []
        if js_PublishAsyncComplete(context, &options) != NATS_OK {
            var pending = natsMsgList()
            if js_PublishAsyncGetPendingList(&pending, context) == NATS_OK {
                for index in 0..<Int(max(0, pending.Count)) {
                    if let message = pending.Msgs[index] { unanswered.append(Self.messageID(of: message) ?? "") }
                }
                natsMsgList_Destroy(&pending)
            }
        }
        answers.condition.lock()
        defer { answers.condition.unlock() }
        // The handler of the last answer may still be running when nats.c says all are in.
        let deadline = Date().addingTimeInterval(2)
        while answers.count + unanswered.count < sent, answers.condition.wait(until: deadline) {}
        var settlement = answers.settlement
        for id in unanswered {
            settlement.failed.append(
                (
                    messageID: id,
                    error: NATSError(kind: .timeout, operation: "JetStream publish \(id)", text: "no acknowledgement")
                ))
        }
        answers.settlement = Settlement()
        answers.count = 0
        sent = 0
        return settlement
    }

    static func messageID(of message: OpaquePointer) -> String? {
        var value: UnsafePointer<CChar>?
        guard natsMsgHeader_Get(message, "Nats-Msg-Id", &value) == NATS_OK, let value else { return nil }
        return String(cString: value)
    }
}
