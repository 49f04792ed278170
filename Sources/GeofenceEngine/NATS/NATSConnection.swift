import CNATS
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A connection to a NATS cluster with its JetStream context: core publishes with headers, JetStream publishes
/// that are de-duplicated (`Nats-Msg-Id`) and fenced (`Nats-Expected-Last-Subject-Sequence`), streams, and
/// key-value buckets (`NATSKeyValue`). A thin layer over nats.c (Debian's libnats-dev 3.4); every failure is a
/// `NATSError`.
///
/// Every call that talks to the server **blocks** the calling thread until the server answers or the time
/// given runs out (nats.c's requests are synchronous): by the concurrency rule (Docs/architecture.md), call
/// them only on a thread that owns the connection's work, never on the cooperative pool.
package final class NATSConnection: @unchecked Sendable {
    // @unchecked: nats.c's connection and JetStream context lock inside and may be used from any thread
    // (nats.c's documentation); this object holds nothing mutable of its own after `init`.
    let connection: OpaquePointer
    let jetStream: OpaquePointer
    /// How long a JetStream request (a publish's acknowledgement, a stream or bucket call) may take.
    package let requestTimeout: Duration

    /// Connects to one of `urls` (`nats://HOST:PORT,HOST:PORT…`, the scheme optional after the first) and
    /// makes its JetStream context. When the server goes away, nats.c reconnects to another of the list (and
    /// those the cluster announced) on its own, for ever, `reconnectWait` apart per server. `user` and
    /// `password` (never part of `urls`, so that no error or log line holds them) authenticate to every server.
    /// With `ignoreDiscoveredServers` only to those of `urls` (a test that reaches the cluster through a fault
    /// proxy must not go around it). Without `buffersWhileReconnecting`, a publish made while nats.c reconnects
    /// fails at once rather than waiting in its buffer to be sent later. A call made while nats.c tries a server
    /// waits for that try (up to `connectTimeout`), whatever its own time limit. **Blocks** until connected or
    /// `connectTimeout` has passed for each server.
    package init(
        urls: String, name: String = "geofence", user: String? = nil, password: String? = nil,
        connectTimeout: Duration = .seconds(2), requestTimeout: Duration = .seconds(5),
        reconnectWait: Duration = .milliseconds(250), ignoreDiscoveredServers: Bool = false,
        buffersWhileReconnecting: Bool = true
    ) throws {
        let servers = try Self.serverList(urls)
        self.requestTimeout = requestTimeout
        var options: OpaquePointer?
        var status = natsOptions_Create(&options)
        guard status == NATS_OK, let options else { throw NATSError.from(status, operation: "options") }
        defer { natsOptions_Destroy(options) }
        let copies = servers.map { strdup($0) }
        defer { for copy in copies { free(copy) } }
        var pointers = copies.map { UnsafePointer<CChar>($0) }
        status = pointers.withUnsafeMutableBufferPointer {
            natsOptions_SetServers(options, $0.baseAddress, Int32($0.count))
        }
        if status == NATS_OK { status = natsOptions_SetName(options, name) }
        if status == NATS_OK, user != nil || password != nil {
            status = natsOptions_SetUserInfo(options, user, password)
        }
        if status == NATS_OK { status = natsOptions_SetTimeout(options, natsMilliseconds(connectTimeout)) }
        if status == NATS_OK { status = natsOptions_SetAllowReconnect(options, true) }
        if status == NATS_OK { status = natsOptions_SetMaxReconnect(options, -1) }
        if status == NATS_OK { status = natsOptions_SetReconnectWait(options, natsMilliseconds(reconnectWait)) }
        if status == NATS_OK { status = natsOptions_SetIgnoreDiscoveredServers(options, ignoreDiscoveredServers) }
        // nats.c keeps what is published while it reconnects and sends it once connected again: a partition's
        // owner must not have a publish go out after its lease ended, so its connection keeps nothing (a publish
        // fails at once instead).
        if status == NATS_OK, !buffersWhileReconnecting { status = natsOptions_SetReconnectBufSize(options, 1) }
        guard status == NATS_OK else { throw NATSError.from(status, operation: "options for \(urls)") }

        var connection: OpaquePointer?
        status = natsConnection_Connect(&connection, options)
        guard status == NATS_OK, let connection else {
            throw NATSError.from(status, operation: "connect to \(servers.joined(separator: ","))")
        }
        var jsOptions = jsOptions()
        jsOptions_Init(&jsOptions)
        jsOptions.Wait = natsMilliseconds(requestTimeout)
        var context: OpaquePointer?
        status = natsConnection_JetStream(&context, connection, &jsOptions)
        guard status == NATS_OK, let context else {
            let error = NATSError.from(status, operation: "JetStream context")
            natsConnection_Destroy(connection)
            throw error
        }
        self.connection = connection
        jetStream = context
    }

    deinit {
        jsCtx_Destroy(jetStream)
        natsConnection_Close(connection)
        natsConnection_Destroy(connection)
    }

    /// `urls` as nats.c's server list: split at commas, each with `nats://` unless it has a scheme.
    static func serverList(_ urls: String) throws -> [String] {
        let servers = urls.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard !servers.isEmpty, servers.allSatisfy({ !$0.isEmpty }) else {
            throw NATSError(
                kind: .invalidArgument, operation: "connect", text: "no server in the URL list \"\(urls)\"")
        }
        return servers.map { $0.contains("://") ? $0 : "nats://" + $0 }
    }

    /// The URL of the server connected to now (nil while reconnecting).
    package var connectedURL: String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard natsConnection_GetConnectedUrl(connection, &buffer, buffer.count) == NATS_OK else { return nil }
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
    }

    /// How many servers the connection knows of: those of the URL list and those the cluster announced
    /// (at least 1 once connected). A bucket or stream gets `min(3, this)` replicas.
    package var knownServerCount: Int {
        var servers: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        var count: Int32 = 0
        guard natsConnection_GetServers(connection, &servers, &count) == NATS_OK, let servers else { return 1 }
        var distinct = Set<String>()
        for index in 0..<Int(max(0, count)) {
            if let server = servers[index] {
                distinct.insert(String(cString: server))
                free(server)
            }
        }
        free(servers)
        return max(1, distinct.count)
    }

    /// A core NATS publish (at most once, no acknowledgement) with `headers`, then a flush: **blocks** until
    /// the server has read it (or `requestTimeout`).
    package func publish(subject: String, payload: [UInt8], headers: [(String, String)] = []) throws {
        let message = try Self.message(subject: subject, payload: payload, headers: headers)
        defer { natsMsg_Destroy(message) }
        var status = natsConnection_PublishMsg(connection, message)
        if status == NATS_OK { status = natsConnection_FlushTimeout(connection, natsMilliseconds(requestTimeout)) }
        guard status == NATS_OK else { throw NATSError.from(status, operation: "publish to \(subject)") }
    }

    /// What JetStream said it stored.
    package struct PublishAck: Equatable, Sendable {
        package let stream: String
        /// The stream sequence of the message (of the first one, for a duplicate).
        package let sequence: UInt64
        /// The message had a `Nats-Msg-Id` already seen within the stream's duplicate window: nothing new was
        /// stored.
        package let duplicate: Bool
    }

    /// A JetStream publish: stored (replicated to the stream's quorum) once this returns.
    ///
    /// - `messageID`: `Nats-Msg-Id`; a second message with the same one within the stream's duplicate window
    ///   is acknowledged as a duplicate and not stored.
    /// - `expectedLastSubjectSequence`: `Nats-Expected-Last-Subject-Sequence`; the stream refuses the message
    ///   (`NATSError.Kind.wrongLastSequence`: fenced) unless the last message on `subject` has this sequence;
    ///   0 expects no message on the subject yet.
    ///
    /// **Blocks** until acknowledged or refused, or `timeout` (nil: `requestTimeout`; `.timeout`: it may or may
    /// not have been stored; publish again with the same `messageID`).
    package func jetStreamPublish(
        subject: String, payload: [UInt8], headers: [(String, String)] = [], messageID: String? = nil,
        expectedLastSubjectSequence: UInt64? = nil, timeout: Duration? = nil
    ) throws -> PublishAck {
        let message = try Self.message(subject: subject, payload: payload, headers: headers)
        defer { natsMsg_Destroy(message) }
        var options = jsPubOptions()
        jsPubOptions_Init(&options)
        options.MaxWait = max(1, natsMilliseconds(timeout ?? requestTimeout))
        if let expected = expectedLastSubjectSequence {
            if expected == 0 { options.ExpectNoMessage = true } else { options.ExpectLastSubjectSeq = expected }
        }
        let id = messageID.map { strdup($0) }
        defer { id.map { free($0) } }
        options.MsgId = id.map { UnsafePointer($0) } ?? nil
        var ack: UnsafeMutablePointer<jsPubAck>?
        var code = jsErrCode(0)
        let status = js_PublishMsg(&ack, jetStream, message, &options, &code)
        defer { jsPubAck_Destroy(ack) }
        guard status == NATS_OK, let ack else {
            throw NATSError.from(status, jetStreamCode: code, operation: "JetStream publish to \(subject)")
        }
        return PublishAck(
            stream: ack.pointee.Stream.map { String(cString: $0) } ?? "", sequence: ack.pointee.Sequence,
            duplicate: ack.pointee.Duplicate)
    }

    /// A message built for nats.c; the caller destroys it.
    static func message(subject: String, payload: [UInt8], headers: [(String, String)]) throws
        -> OpaquePointer
    {
        var message: OpaquePointer?
        var status = payload.withUnsafeBufferPointer {
            natsMsg_Create(
                &message, subject, nil, UnsafeRawPointer($0.baseAddress)?.assumingMemoryBound(to: CChar.self),
                Int32($0.count))
        }
        guard status == NATS_OK, let message else { throw NATSError.from(status, operation: "message to \(subject)") }
        for (key, value) in headers where status == NATS_OK {
            status = natsMsgHeader_Add(message, key, value)
        }
        guard status == NATS_OK else {
            let error = NATSError.from(status, operation: "headers of a message to \(subject)")
            natsMsg_Destroy(message)
            throw error
        }
        return message
    }
}
