import CNATS

/// A failed call into nats.c: what was being done, what it means for the caller (`kind`), and nats.c's own
/// words (the status text and the thread's last error), so no raw code leaks to callers and none is lost.
package struct NATSError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What a caller decides on.
    package enum Kind: Equatable, Sendable {
        /// A publish with an expected last subject sequence that the stream has moved past: the publisher is
        /// fenced (another owner published since), and nothing was stored.
        case wrongLastSequence
        /// A key-value update whose expected revision is not the key's latest: another writer won.
        case wrongRevision
        /// A key-value create of a key that exists (and is not deleted).
        case keyExists
        /// A write whose `Nats-Msg-Id` the stream had already stored within its duplicate window: nothing new
        /// was stored. For a key-value write guarded by a message id (`NATSKeyValue.update(_:_:revision:messageID:)`)
        /// this is a lost race: another writer that read the same revision got there first.
        case duplicate
        /// No answer within the time given (a server down, a cluster without a leader for now).
        case timeout
        /// Nobody serves the subject: no stream captures it, or JetStream is not there.
        case noResponders
        /// No server of the list could be reached, or the connection is closed.
        case notConnected
        /// The server refused the credentials: a wrong user name or password, or none where it wants some
        /// (nats.c's `NATS_CONNECTION_AUTH_FAILED`).
        case authorizationFailed
        /// The watcher was stopped (by `stop()`, from another thread).
        case stopped
        /// A value the caller gave is not valid (an empty URL list, a bad bucket or key name).
        case invalidArgument
        /// Anything else: see `status`, `jetStreamCode` and `text`.
        case other
    }

    package let kind: Kind
    /// What was being done, with its subject, stream, bucket or key.
    package let operation: String
    /// nats.c's `natsStatus` (0 when the failure is this wrapper's own, such as a bad argument).
    package let status: UInt32
    /// JetStream's error code (10071: wrong last sequence), 0 when the server gave none.
    package let jetStreamCode: Int
    /// `natsStatus_GetText`, and the thread's last error from nats.c when it says more.
    package let text: String

    package init(kind: Kind, operation: String, status: UInt32 = 0, jetStreamCode: Int = 0, text: String) {
        self.kind = kind
        self.operation = operation
        self.status = status
        self.jetStreamCode = jetStreamCode
        self.text = text
    }

    package var description: String {
        "NATS: \(operation): \(text)" + (jetStreamCode != 0 ? " (JetStream error \(jetStreamCode))" : "")
    }

    /// The error for `status` returned by the nats.c call just made on this thread (nats.c keeps the last
    /// error per thread, so this must run before anything else calls into it).
    static func from(
        _ status: natsStatus, jetStreamCode: jsErrCode = jsErrCode(0), operation: String, kind given: Kind? = nil
    ) -> NATSError {
        let statusText = natsStatus_GetText(status).map { String(cString: $0) } ?? "status \(status.rawValue)"
        var ignored = NATS_OK
        let last = nats_GetLastError(&ignored).map { String(cString: $0) } ?? ""
        var text = last.isEmpty || last == statusText ? statusText : "\(statusText): \(last)"
        if status == NATS_CONNECTION_AUTH_FAILED {
            // nats.c says "Authentication Violation: (conn.c:1905): Authorization Violation".
            text = "authorization failed: the server refused the user name or password (wrong or missing)"
        }
        let code = Int(jetStreamCode.rawValue)
        let kind: Kind
        if let given {
            kind = given
        } else if code == Int(JSStreamWrongLastSequenceErr.rawValue) {
            kind = .wrongLastSequence
        } else {
            switch status {
            case NATS_TIMEOUT: kind = .timeout
            case NATS_NO_RESPONDERS: kind = .noResponders
            case NATS_NO_SERVER, NATS_CONNECTION_CLOSED, NATS_NOT_YET_CONNECTED, NATS_CONNECTION_DISCONNECTED:
                kind = .notConnected
            case NATS_ILLEGAL_STATE: kind = .stopped
            case NATS_CONNECTION_AUTH_FAILED: kind = .authorizationFailed
            case NATS_INVALID_ARG, NATS_INVALID_SUBJECT: kind = .invalidArgument
            default: kind = .other
            }
        }
        return NATSError(kind: kind, operation: operation, status: status.rawValue, jetStreamCode: code, text: text)
    }
}

/// A time for nats.c (milliseconds, at least 1), from a `Duration` that may be anything: never a trap.
func natsMilliseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    guard seconds >= 0 else { return 1 }
    guard seconds < Int64.max / 1000 - 1 else { return Int64.max / 2 }
    return max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
}

/// A time for JetStream's configuration (nanoseconds), from a `Duration`, clamped as `natsMilliseconds` is.
func natsNanoseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    guard seconds >= 0 else { return 0 }
    guard seconds < Int64.max / 1_000_000_000 - 1 else { return Int64.max / 2 }
    return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
}
