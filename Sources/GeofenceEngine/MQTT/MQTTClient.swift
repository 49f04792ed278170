import Foundation

/// One MQTT 3.1.1 connection with a persistent session, as the MQTT source and sink use it: connect (and
/// subscribe, for a source), publish at QoS 1, and events reported to a handler on the client's own
/// thread, in order. Losing the connection after `start` is reported and retried with backoff, never
/// thrown.
///
/// Two implementations: `NativeMQTTClient`, geofence's own, for plain TCP (buffered reads and batched
/// writes: a few system calls per hundreds of messages); `MosquittoClient`, libmosquitto, for TLS. `make`
/// picks one; `Docs/mqtt.md` says why there are two.
protocol MQTTClient: AnyObject, Sendable {
    /// Connects and waits up to `timeout` seconds for the broker's answer: an unreachable or refusing
    /// broker at start is an error to say at once, not a source that stays quiet.
    func start(timeout: Double) throws(MQTTError)
    /// Disconnects (the broker keeps the session and queues QoS 1 messages for it) and ends the thread.
    func stop()
    /// Hands a QoS 1 message to the client, which sends it (or keeps it until the connection is back, and
    /// sends it again after a reconnection until the broker acknowledges it). Returns its message id, which
    /// `.published` reports with the PUBACK.
    func publish(topic: String, payload: [UInt8], retain: Bool) throws(MQTTError) -> Int32
    var address: String { get }
    /// Unacknowledged messages a publisher should keep handed to this client, at most: as many as keep the
    /// broker busy, and no more than the client holds cheaply.
    var preferredWindow: Int { get }
    /// Sends the acknowledgements (PUBACK) of messages reported with a receipt (`deferAcknowledgements`), in
    /// the order given, which must be the order received. Receipts of an earlier connection are dropped: the
    /// broker sends their messages again, with DUP.
    func acknowledge(_ receipts: [MQTTReceipt])
}

/// An incoming QoS 1 message whose acknowledgement waits for `MQTTClient.acknowledge`.
package struct MQTTReceipt: Sendable, Equatable {
    /// Which connection it came on (counted by the client).
    package var connection: Int
    package var packetID: UInt16
}

/// What a client's thread reports.
package enum MQTTEvent: Sendable {
    /// The broker accepted the connection, and the subscription has been asked for again.
    case connected
    /// The broker answered the connection (or the subscription) with a refusal: bad credentials, a
    /// client id or a topic filter refused.
    case refused(String)
    /// The connection went away; the client reconnects on its own.
    case disconnected(String)
    /// `receipt`: the message waits for `acknowledge` (nil: acknowledged by the client, or QoS 0).
    case message(topic: String, payload: [UInt8], receipt: MQTTReceipt? = nil)
    /// A message longer than the client keeps (`bytes`: its payload's length), dropped; acknowledged by the
    /// client, or (with a receipt) by `acknowledge`.
    case tooLong(topic: String, bytes: Int, receipt: MQTTReceipt? = nil)
    /// The broker acknowledged (PUBACK) the QoS 1 message `publish` numbered so.
    case published(Int32)
}

/// A message the broker publishes for us when the connection is lost without a DISCONNECT.
package struct MQTTWill: Sendable {
    package var topic: String
    package var payload: String
    package var retain = true

    package init(topic: String, payload: String, retain: Bool = true) {
        self.topic = topic
        self.payload = payload
        self.retain = retain
    }
}

/// One client's settings: which broker, as whom, what to subscribe to, and how it behaves.
package struct MQTTOptions: Sendable {
    package var host: String
    package var port: Int32
    package var clientID: String
    package var username: String?
    package var password: String?
    /// What to subscribe to at every connection (QoS 1); nil: a client that only publishes.
    package var topicFilter: String?
    package var will: MQTTWill?
    /// QoS 1 messages sent and not yet acknowledged, at most (more wait in the client's queue).
    package var sendMaximum: Int32
    /// TLS, with the CA certificates of `caFile` (nil: the system's), and the client's own certificate
    /// and key when the broker asks for one.
    package var tls: Bool
    package var caFile: String?
    package var certificateFile: String?
    package var keyFile: String?
    package var keepalive: Int32
    /// Reconnect delays, seconds: first, at most (doubling in between).
    package var reconnectDelay: UInt32
    package var reconnectDelayMax: UInt32
    /// Incoming QoS 1 messages are acknowledged only through `acknowledge` (the MQTT source's
    /// `--mqtt-ack commit`); false: once the handler has returned. libmosquitto acknowledges inside the
    /// library, whatever this says.
    package var deferAcknowledgements: Bool

    /// Every setting, in the order of the properties; the defaults are those the sources and sinks start from.
    package init(
        host: String, port: Int32, clientID: String, username: String? = nil, password: String? = nil,
        topicFilter: String? = nil, will: MQTTWill? = nil, sendMaximum: Int32 = 20, tls: Bool = false,
        caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil, keepalive: Int32 = 30,
        reconnectDelay: UInt32 = 1, reconnectDelayMax: UInt32 = 30, deferAcknowledgements: Bool = false
    ) {
        self.host = host
        self.port = port
        self.clientID = clientID
        self.username = username
        self.password = password
        self.topicFilter = topicFilter
        self.will = will
        self.sendMaximum = sendMaximum
        self.tls = tls
        self.caFile = caFile
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.keepalive = keepalive
        self.reconnectDelay = reconnectDelay
        self.reconnectDelayMax = reconnectDelayMax
        self.deferAcknowledgements = deferAcknowledgements
    }
}

/// Which client `makeMQTTClient` builds for a plain connection: geofence's own unless
/// `GEOFENCE_MQTT_CLIENT=libmosquitto` says otherwise (for comparing the two in one benchmark run).
enum MQTTClientKind: String, Sendable {
    case native
    case libmosquitto

    static var forPlainConnections: MQTTClientKind {
        ProcessInfo.processInfo.environment["GEOFENCE_MQTT_CLIENT"].flatMap(MQTTClientKind.init(rawValue:)) ?? .native
    }
}

/// The client for `options`: libmosquitto for TLS, geofence's own for plain TCP.
func makeMQTTClient(
    options: MQTTOptions, handler: @escaping @Sendable (MQTTEvent) -> Void
) throws(MQTTError) -> any MQTTClient {
    if options.tls || MQTTClientKind.forPlainConnections == .libmosquitto {
        return try MosquittoClient(options: options, handler: handler)
    }
    return NativeMQTTClient(options: options, handler: handler)
}

/// An MQTT source that cannot start: a broker unreachable or refusing at start, a bad password file.
public struct MQTTError: Error, CustomStringConvertible {
    /// What went wrong, in one line a person can act on (the broker's refusal, the system's reason).
    public var description: String
}
