import CMosquitto
import Foundation

/// One MQTT connection through libmosquitto, for TLS (`mqtts://`): connect, subscribe, and the network
/// loop on libmosquitto's own thread (`mosquitto_loop_start`), which also reconnects with backoff
/// (`mosquitto_reconnect_delay_set`) and calls back into Swift. Plain connections use `NativeMQTTClient`
/// (`Docs/mqtt.md` says why).
///
/// libmosquitto's rules: `mosquitto_lib_init` once per process; with the threaded loop, the callbacks
/// run on the loop thread, and `subscribe`/`disconnect` may be called from any thread. The handler is
/// called on the loop thread, in order; while it runs, no further message is read, so a handler that
/// waits holds the broker back (its QoS 1 in-flight window) rather than filling memory.
final class MosquittoClient: MQTTClient, @unchecked Sendable {
    // @unchecked: `handle` is used through libmosquitto, whose threaded API is safe to call from any
    // thread; the Swift state (`firstConnect`, `loopRunning`, `started`, `lastError`) is guarded by `lock`.

    typealias Event = MQTTEvent
    typealias Options = MQTTOptions

    private static let initialized: Void = { _ = mosquitto_lib_init() }()

    private let handle: OpaquePointer
    private let options: Options
    private let handler: @Sendable (Event) -> Void
    private let lock = NSCondition()
    private var firstConnect: Event?
    private var loopRunning = false
    /// `start` has returned: from now on, losing the connection is reported (and retried), not thrown.
    private var started = false
    /// The last error libmosquitto logged (a failed TLS handshake): at start, the reason the connection failed.
    private var lastError: String?
    /// Why the connection went away before the broker's CONNACK (a TLS 1.3 broker that wants a client
    /// certificate says so only after the handshake), for `start`.
    private var lostBeforeAnswer: String?
    private var isStarted: Bool { lock.withLock { started } }

    /// A client with a persistent session (clean session off) under `options.clientID`.
    init(options: Options, handler: @escaping @Sendable (Event) -> Void) throws(MQTTError) {
        _ = Self.initialized
        self.options = options
        self.handler = handler
        guard let made = mosquitto_new(options.clientID, false, nil) else {
            throw MQTTError(description: "cannot make an MQTT client: \(String(cString: strerror(errno)))")
        }
        handle = made
        mosquitto_user_data_set(handle, Unmanaged.passUnretained(self).toOpaque())
        _ = mosquitto_int_option(handle, MOSQ_OPT_PROTOCOL_VERSION, CMosquitto_PROTOCOL_V311)
        if let username = options.username {
            _ = mosquitto_username_pw_set(handle, username, options.password)
        }
        if options.tls {
            // The broker's certificate and host name are checked (libmosquitto's default); never insecure.
            var code = MOSQ_ERR_SUCCESS.rawValue
            if options.caFile == nil { code = mosquitto_int_option(handle, MOSQ_OPT_TLS_USE_OS_CERTS, 1) }
            if code == MOSQ_ERR_SUCCESS.rawValue, options.caFile != nil || options.certificateFile != nil {
                // libmosquitto wants a CA file or directory with a client certificate: the system's directory
                // when no CA file is given. A key with a passphrase is refused rather than asked for on a
                // terminal a daemon does not have.
                code = mosquitto_tls_set(
                    handle, options.caFile, options.caFile == nil ? "/etc/ssl/certs" : nil, options.certificateFile,
                    options.keyFile
                ) { _, _, _, _ in 0 }
            }
            // (Thrown once every property is set: `deinit` runs and destroys the handle.)
            guard code == MOSQ_ERR_SUCCESS.rawValue else {
                let what = options.certificateFile == nil ? "the CA certificates" : "the certificates and key"
                throw MQTTError(description: "cannot use \(what) for TLS: \(Self.text(code))")
            }
        }
        if let will = options.will {
            let code = mosquitto_will_set(
                handle, will.topic, Int32(will.payload.utf8.count), will.payload, 1, will.retain)
            guard code == MOSQ_ERR_SUCCESS.rawValue else {
                throw MQTTError(description: "cannot set the last will on \(will.topic): \(Self.text(code))")
            }
        }
        _ = mosquitto_int_option(handle, MOSQ_OPT_SEND_MAXIMUM, options.sendMaximum)
        mosquitto_publish_callback_set(handle) { _, object, mid in
            MosquittoClient.from(object)?.handler(.published(mid))
        }
        _ = mosquitto_reconnect_delay_set(handle, options.reconnectDelay, options.reconnectDelayMax, true)
        mosquitto_connect_callback_set(handle) { _, object, code in
            MosquittoClient.from(object)?.connected(code: code)
        }
        mosquitto_disconnect_callback_set(handle) { _, object, code in
            MosquittoClient.from(object)?.disconnected(code: code)
        }
        // libmosquitto says why a TLS handshake failed only in its log: the last error is kept for `start`.
        mosquitto_log_callback_set(handle) { _, object, level, text in
            guard level & Int32(MOSQ_LOG_ERR) != 0, let text, let client = MosquittoClient.from(object) else { return }
            let line = String(cString: text)
            client.lock.withLock {
                client.lastError = line
                client.lock.broadcast()
            }
        }
        mosquitto_message_callback_set(handle) { _, object, message in
            guard let client = MosquittoClient.from(object), let message else { return }
            let topic = String(cString: message.pointee.topic)
            let count = Int(message.pointee.payloadlen)
            let payload =
                count > 0 && message.pointee.payload != nil
                ? [UInt8](UnsafeRawBufferPointer(start: message.pointee.payload, count: count)) : []
            client.handler(.message(topic: topic, payload: payload, receipt: nil))
        }
    }

    deinit {
        stop()
        mosquitto_destroy(handle)
    }

    private static func from(_ object: UnsafeMutableRawPointer?) -> MosquittoClient? {
        object.map { Unmanaged<MosquittoClient>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Connects, starts the loop, and waits up to `timeout` seconds for the broker's answer: an
    /// unreachable or refusing broker at start is an error to say at once, not a source that stays quiet.
    func start(timeout: Double) throws(MQTTError) {
        // Without OpenSSL's word on certificates, the likeliest cause for a TLS broker that hangs up
        // unanswered (libmosquitto then says "Protocol error" or nothing at all, depending on timing: in
        // `mosquitto_connect` itself, or once the loop runs).
        let hint =
            options.tls && options.certificateFile == nil
            ? " (the broker closed the TLS connection before answering; if it wants a client certificate, "
                + "give one: --mqtt-cert and --mqtt-key for a source, --cert and --key for a sink)" : ""
        let code = mosquitto_connect(handle, options.host, options.port, options.keepalive)
        guard code == MOSQ_ERR_SUCCESS.rawValue else {
            // A TLS handshake that fails inside `mosquitto_connect` says why only in libmosquitto's log.
            let error = errno
            let logged = code == MOSQ_ERR_TLS.rawValue ? lock.withLock { lastError } : nil
            let reason =
                code == MOSQ_ERR_ERRNO.rawValue ? String(cString: strerror(error)) : logged ?? Self.text(code)
            // A broker that cannot be reached needs no word on certificates; one that hung up in the handshake
            // (EPROTO, ECONNRESET, EPIPE from OpenSSL's socket) may want one.
            let hungUp = [EPROTO, ECONNRESET, EPIPE].contains(error)
            let said = (code == MOSQ_ERR_ERRNO.rawValue && !hungUp) || reason.contains("certificate") ? "" : hint
            throw MQTTError(description: "cannot connect to the MQTT broker at \(address): \(reason)\(said)")
        }
        let looping = mosquitto_loop_start(handle)
        guard looping == MOSQ_ERR_SUCCESS.rawValue else {
            throw MQTTError(description: "cannot start the MQTT client's loop: \(Self.text(looping))")
        }
        lock.withLock { loopRunning = true }
        let deadline = Date().addingTimeInterval(timeout)
        let answer: Event? = lock.withLock {
            while firstConnect == nil, lastError == nil, lostBeforeAnswer == nil, lock.wait(until: deadline) {}
            // Lost: OpenSSL's reason, logged a moment later, says more than libmosquitto's code.
            if firstConnect == nil, lastError == nil, lostBeforeAnswer != nil {
                let grace = Date().addingTimeInterval(0.5)
                while lastError == nil, lock.wait(until: grace) {}
            }
            return firstConnect
        }
        switch answer {
        case .connected:
            lock.withLock { started = true }
            // The log was wanted for the reason a connection fails at start. Set, libmosquitto formats a
            // debug line (vsnprintf into a malloc'd buffer) for every packet sent and received.
            mosquitto_log_callback_set(handle, nil)
            return
        case .refused(let why):
            stop()
            throw MQTTError(description: "the MQTT broker at \(address) refused the connection: \(why)")
        default:
            stop()
            let (logged, lost) = lock.withLock { (lastError, lostBeforeAnswer) }
            if let logged {
                let said = logged.contains("certificate") ? "" : hint
                throw MQTTError(description: "cannot connect to the MQTT broker at \(address): \(logged)\(said)")
            }
            if let lost {
                throw MQTTError(description: "cannot connect to the MQTT broker at \(address): \(lost)\(hint)")
            }
            throw MQTTError(
                description: "the MQTT broker at \(address) did not answer within \(Int(timeout)) s")
        }
    }

    /// Disconnects (the broker keeps the session and queues QoS 1 messages for it) and ends the loop.
    func stop() {
        let running = lock.withLock {
            defer { loopRunning = false }
            return loopRunning
        }
        guard running else { return }
        _ = mosquitto_disconnect(handle)
        _ = mosquitto_loop_stop(handle, false)
    }

    var address: String { "\(options.host):\(options.port)" }

    /// libmosquitto walks its list of held messages from the head for every message sent and every PUBACK:
    /// handed thousands, that walk was a third of the engine's time.
    var preferredWindow: Int { 128 }

    /// libmosquitto acknowledges a message itself, before its callback runs: it never reports a receipt.
    func acknowledge(_ receipts: [MQTTReceipt]) {}

    /// Hands a QoS 1 message to libmosquitto, which sends it (or keeps it until the connection is back, and
    /// sends it again after a reconnection until the broker acknowledges it). Returns its message id, which
    /// `.published` reports with the PUBACK.
    ///
    /// `MOSQ_ERR_NO_CONN` is not a failure: the message is queued, and goes out when the connection returns.
    func publish(topic: String, payload: [UInt8], retain: Bool) throws(MQTTError) -> Int32 {
        var mid: Int32 = 0
        let code = payload.withUnsafeBytes { bytes in
            mosquitto_publish(handle, &mid, topic, Int32(bytes.count), bytes.baseAddress, 1, retain)
        }
        guard code == MOSQ_ERR_SUCCESS.rawValue || code == MOSQ_ERR_NO_CONN.rawValue else {
            throw MQTTError(description: "cannot publish to \(topic): \(Self.text(code))")
        }
        return mid
    }

    private func connected(code: Int32) {
        let event: Event
        if code == 0 {
            // Subscribed again at every connection: a broker that lost its session (no persistence) must
            // still send the topic's messages.
            if let filter = options.topicFilter {
                let subscribed = mosquitto_subscribe(handle, nil, filter, 1)
                event =
                    subscribed == MOSQ_ERR_SUCCESS.rawValue
                    ? .connected : .refused("cannot subscribe to \(filter): \(Self.text(subscribed))")
            } else {
                event = .connected
            }
        } else {
            var words = String(cString: mosquitto_connack_string(code))
            if words.hasSuffix(".") { words.removeLast() }
            event = .refused(words)
        }
        let first = lock.withLock {
            defer {
                firstConnect = firstConnect ?? event
                lock.broadcast()
            }
            return firstConnect == nil
        }
        // A refusal at the first connection is `start`'s error to throw, not a reconnection to report.
        if first, case .refused = event { return }
        if case .refused = event, !isStarted { return }
        handler(event)
    }

    private func disconnected(code: Int32) {
        // 0: our own `mosquitto_disconnect`; before `start` has returned, its error says it all.
        guard code != 0 else { return }
        guard isStarted else {
            lock.withLock {
                lostBeforeAnswer = lostBeforeAnswer ?? Self.text(code)
                lock.broadcast()
            }
            return
        }
        handler(.disconnected(Self.text(code)))
    }

    private static func text(_ code: Int32) -> String {
        var words = String(cString: mosquitto_strerror(code))
        if words.hasSuffix(".") { words.removeLast() }
        return words.prefix(1).lowercased() + words.dropFirst()
    }
}
