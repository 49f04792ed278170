import Foundation
import GeofenceEngine
import GeofenceTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// geofence's own MQTT client against a scripted peer on loopback: what a real broker rarely does on cue
/// (vanish while messages are being written, lose a PUBACK across a reconnection, refuse a subscription),
/// byte for byte. The real broker's tests are `MQTTSourceTests` and `MQTTSinkTests`.
@Suite("MQTT client against a scripted broker", .serialized)
struct NativeMQTTClientTests {
    /// One listening socket on a free loopback port; `accept` gives each connection to the script.
    final class ScriptedBroker: @unchecked Sendable {
        private(set) var listener: Int32
        let port: Int32

        init() throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            listener = fd
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = 0
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                    bind(fd, pointer, length) == 0 && listen(fd, 4) == 0 && getsockname(fd, pointer, &length) == 0
                }
            }
            guard bound else { throw POSIXError(.EADDRINUSE) }
            port = Int32(UInt16(bigEndian: address.sin_port))
        }

        deinit { closeListener() }

        /// No more connections: a client now finds the port closed.
        func closeListener() {
            if listener >= 0 { close(listener) }
            listener = -1
        }

        /// The next connection, within 5 s.
        func accept() throws -> Connection {
            var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
            guard poll(&fds, 1, 5_000) == 1 else { throw POSIXError(.ETIMEDOUT) }
            return Connection(fd: Glibc.accept(listener, nil, nil))
        }
    }

    /// A connection from the client: its packets read whole, bytes written as given.
    final class Connection {
        var fd: Int32
        private var reader = MQTTPacketReader(maximumLength: 1 << 20)
        private var buffer = [UInt8]()

        init(fd: Int32) { self.fd = fd }
        deinit { if fd >= 0 { close(fd) } }

        func send(_ bytes: [UInt8]) { _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) } }

        /// The next packet's fixed header and body, within 5 s; nil: the client closed the connection.
        func next() throws -> (header: UInt8, body: [UInt8])? {
            while true {
                if let packet = try Self.split(&buffer) { return packet }
                var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
                guard poll(&fds, 1, 5_000) == 1 else { throw POSIXError(.ETIMEDOUT) }
                var chunk = [UInt8](repeating: 0, count: 4096)
                let n = read(fd, &chunk, chunk.count)
                if n <= 0 { return nil }
                buffer += chunk[..<n]
            }
        }

        /// The CONNECT, answered with CONNACK 0 (or `code`).
        func acceptConnect(sessionPresent: Bool = false, code: UInt8 = 0) throws {
            let connect = try #require(try next())
            #expect(connect.header == MQTTPacket.connect)
            send([MQTTPacket.connack, 2, sessionPresent ? 1 : 0, code])
        }

        private static func split(_ buffer: inout [UInt8]) throws -> (header: UInt8, body: [UInt8])? {
            guard buffer.count >= 2 else { return nil }
            var length = 0
            var shift = 0
            var index = 1
            while true {
                guard index < buffer.count else { return nil }
                length |= Int(buffer[index] & 0x7F) << shift
                index += 1
                if buffer[index - 1] & 0x80 == 0 { break }
                shift += 7
            }
            guard buffer.count >= index + length else { return nil }
            let packet = (buffer[0], Array(buffer[index..<(index + length)]))
            buffer.removeFirst(index + length)
            return packet
        }
    }

    /// What the client reported, in order.
    final class Events: Sendable {
        private let seen = Mutex<[String]>([])
        var all: [String] { seen.withLock { $0 } }

        func record(_ event: MQTTEvent) {
            let text: String
            switch event {
            case .connected: text = "connected"
            case .refused(let why): text = "refused: \(why)"
            case .disconnected(let why): text = "disconnected: \(why)"
            case .message(let topic, let payload, _): text = "message \(topic) \(payload.count)"
            case .tooLong(let topic, let bytes, _): text = "too long \(topic) \(bytes)"
            case .published(let id): text = "published \(id)"
            }
            seen.withLock { $0.append(text) }
        }

        /// Until `count` events start with `prefix`.
        func wait(for prefix: String, count: Int = 1, seconds: Double = 5) -> Bool {
            Wait.blocking(timeout: seconds, every: .milliseconds(5)) {
                all.filter { $0.hasPrefix(prefix) }.count >= count
            }
        }
    }

    static func client(_ broker: ScriptedBroker, filter: String? = nil, events: Events) -> NativeMQTTClient {
        var options = MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "test", topicFilter: filter)
        options.reconnectDelay = 0
        options.sendMaximum = 1_000
        return NativeMQTTClient(options: options) { events.record($0) }
    }

    @Test("deferred acknowledgements: a PUBACK only when acknowledged; those of a lost connection are dropped")
    func deferredAcknowledgements() throws {
        let broker = try ScriptedBroker()
        let receipts = Mutex<[UInt16: MQTTReceipt]>([:])
        let events = Events()
        var options = MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "test")
        options.reconnectDelay = 0
        options.deferAcknowledgements = true
        let client = NativeMQTTClient(options: options) { event in
            if case .message(_, _, let receipt?) = event { receipts.withLock { $0[receipt.packetID] = receipt } }
            events.record(event)
        }
        defer { client.stop() }
        let starting = Thread { try? client.start(timeout: 5) }
        starting.start()
        var first: Connection? = try broker.accept()
        try first?.acceptConnect()
        #expect(events.wait(for: "connected"))
        first?.send(MQTTPacketTests.incoming(topic: "fleet/v", payload: Array("{}".utf8), qos: 1, id: 7))
        first?.send(MQTTPacketTests.incoming(topic: "fleet/v", payload: Array("{}".utf8), qos: 1, id: 8))
        #expect(events.wait(for: "message", count: 2), "\(events.all)")
        // Only 8 is acknowledged: the next packet is its PUBACK (on receipt, 7's would have come first).
        let eight = try #require(receipts.withLock { $0[8] })
        client.acknowledge([eight])
        let ack = try #require(try first?.next())
        #expect(ack.header == MQTTPacket.puback && ack.body == [0, 8], "\(ack)")

        // The connection is lost with 7 unacknowledged; its receipt, acknowledged now, names the old
        // connection: nothing is sent for it on the new one.
        first = nil
        let second = try broker.accept()
        try second.acceptConnect(sessionPresent: true)
        #expect(events.wait(for: "connected", count: 2), "\(events.all)")
        client.acknowledge([try #require(receipts.withLock { $0[7] })])
        second.send(MQTTPacketTests.incoming(topic: "fleet/v", payload: Array("{}".utf8), qos: 1, id: 9))
        #expect(events.wait(for: "message", count: 3), "\(events.all)")
        let nine = try #require(receipts.withLock { $0[9] })
        #expect(nine.connection != eight.connection)
        client.acknowledge([nine])
        let next = try #require(try second.next())
        #expect(next.header == MQTTPacket.puback && next.body == [0, 9], "no PUBACK 7 on the new connection: \(next)")
    }

    @Test("a broker that vanishes while an acknowledgement is due: a disconnection reported, then a reconnection")
    func vanishingBroker() throws {
        let broker = try ScriptedBroker()
        let events = Events()
        var options = MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "test")
        options.reconnectDelay = 0
        // The handler takes its time over a message: meanwhile the broker is gone, and the PUBACK written
        // after it meets a reset socket. (The slow handler is the scenario, not a wait.)
        let handling = Atomic(false)
        let client = NativeMQTTClient(options: options) { event in
            if case .message = event {
                handling.store(true, ordering: .releasing)
                usleep(300_000)
            }
            events.record(event)
        }
        defer { client.stop() }
        let starting = Thread { try? client.start(timeout: 5) }
        starting.start()
        let first = try broker.accept()
        try first.acceptConnect()
        #expect(events.wait(for: "connected"))
        first.send(MQTTPacketTests.incoming(topic: "fleet/v", payload: Array("{}".utf8), qos: 1, id: 1))
        _ = Wait.blocking(timeout: 5, every: .milliseconds(1)) { handling.load(ordering: .acquiring) }
        // Gone, with a reset (not a polite FIN).
        var linger = linger(l_onoff: 1, l_linger: 0)
        setsockopt(first.fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
        close(first.fd)
        first.fd = -1
        #expect(events.wait(for: "disconnected"), "\(events.all)")
        #expect(events.all.contains("message fleet/v 2"))
        // Back at once (no delay configured), with a new CONNECT.
        let second = try broker.accept()
        try second.acceptConnect(sessionPresent: true)
        #expect(events.wait(for: "connected", count: 2), "\(events.all)")
        client.stop()
    }

    @Test("a message unacknowledged when the connection is lost is sent again, DUP set, then acknowledged")
    func resendAfterReconnection() throws {
        let broker = try ScriptedBroker()
        let events = Events()
        let client = Self.client(broker, events: events)
        defer { client.stop() }
        let starting = Thread { try? client.start(timeout: 5) }
        starting.start()
        var connection: Connection? = try broker.accept()
        try connection?.acceptConnect()
        #expect(events.wait(for: "connected"))
        let one = try client.publish(topic: "geofence/a", payload: Array("first".utf8), retain: false)
        let two = try client.publish(topic: "geofence/b", payload: Array("second".utf8), retain: true)
        let sent = try #require(try connection?.next())
        #expect(sent.header == MQTTPacket.publish | 0x02, "QoS 1, not retained, not a duplicate")
        let sentTwo = try #require(try connection?.next())
        #expect(sentTwo.header == MQTTPacket.publish | 0x03)
        // The first is acknowledged; the second's PUBACK is lost with the connection.
        connection?.send([MQTTPacket.puback, 2, UInt8(one >> 8), UInt8(one & 0xFF)])
        #expect(events.wait(for: "published \(one)"))
        connection = nil

        let again = try broker.accept()
        try again.acceptConnect(sessionPresent: true)
        let resent = try #require(try again.next())
        #expect(resent.header == MQTTPacket.publish | 0x08 | 0x03, "DUP, QoS 1, retained")
        #expect(resent.body == sentTwo.body, "the same topic, id and payload")
        again.send([MQTTPacket.puback, 2, UInt8(two >> 8), UInt8(two & 0xFF)])
        #expect(events.wait(for: "published \(two)"))
        #expect(events.all.filter { $0.hasPrefix("published") } == ["published \(one)", "published \(two)"])
        #expect(events.all.contains { $0.hasPrefix("disconnected") })
        client.stop()
        // A graceful stop ends with DISCONNECT, so that the broker does not publish the will.
        #expect(try again.next()?.header == MQTTPacket.disconnect)
    }

    @Test("a subscription the broker refuses is said; messages are acknowledged after the handler, in one write")
    func subscriptionAndAcknowledgements() throws {
        let broker = try ScriptedBroker()
        let events = Events()
        var options = MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "test", topicFilter: "fleet/#")
        options.reconnectDelay = 0
        // The first message's handler takes 0.3 s: its PUBACK, and those of the messages read with it, after.
        // (The slow handler is the scenario, not a wait.)
        let first = Atomic(true)
        let client = NativeMQTTClient(options: options) { event in
            if case .message = event, first.exchange(false, ordering: .relaxed) { usleep(300_000) }
            events.record(event)
        }
        defer { client.stop() }
        let starting = Thread { try? client.start(timeout: 5) }
        starting.start()
        let connection = try broker.accept()
        try connection.acceptConnect()
        let subscribe = try #require(try connection.next())
        #expect(subscribe.header == MQTTPacket.subscribe)
        #expect(Array(subscribe.body[2...]) == [0, 7] + Array("fleet/#".utf8) + [1])
        connection.send([MQTTPacket.suback, 3, subscribe.body[0], subscribe.body[1], 0x80])
        #expect(events.wait(for: "refused: the broker refused the subscription to fleet/#"), "\(events.all)")
        // Three QoS 1 messages in one write, and one longer than the client keeps: each acknowledged.
        var burst: [UInt8] = []
        for id in [UInt16(10), 11, 12] {
            burst += MQTTPacketTests.incoming(topic: "fleet/v", payload: Array("{}".utf8), qos: 1, id: id)
        }
        burst += MQTTPacketTests.incoming(
            topic: "fleet/huge", payload: [UInt8](repeating: 0x20, count: 300_000), qos: 1, id: 13)
        let sent = Date()
        connection.send(burst)
        // The four PUBACKs come in one read: one write, after the slow handler.
        var fds = [pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)]
        #expect(poll(&fds, 1, 5_000) == 1)
        let waited = Date().timeIntervalSince(sent)
        // Kept: the read below asserts how the client wrote its acknowledgements, so no condition on the bytes
        // can stand in for this pause.
        usleep(50_000)
        var bytes = [UInt8](repeating: 0, count: 64)
        let n = read(connection.fd, &bytes, bytes.count)
        #expect(waited >= 0.25, "acknowledged \(waited) s after, before the handler returned")
        var expected: [UInt8] = []
        for id in [UInt16(10), 11, 12, 13] {
            MQTTPacket.appendAcknowledgement(MQTTPacket.puback, id: id, to: &expected)
        }
        #expect(Array(bytes[..<max(0, n)]) == expected, "one read of all four")
        #expect(events.all.filter { $0.hasPrefix("message") } == Array(repeating: "message fleet/v 2", count: 3))
        #expect(events.all.contains("too long fleet/huge 300000"), "\(events.all)")
    }

    @Test(
        "at most sendMaximum messages in flight; the rest wait in order, and one published offline goes on connecting")
    func inFlightWindow() throws {
        let broker = try ScriptedBroker()
        let events = Events()
        var options = MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "test")
        options.reconnectDelay = 0
        options.sendMaximum = 2
        let client = NativeMQTTClient(options: options) { events.record($0) }
        defer { client.stop() }
        let starting = Thread { try? client.start(timeout: 5) }
        starting.start()
        let connection = try broker.accept()
        try connection.acceptConnect()
        #expect(events.wait(for: "connected"))
        let ids = try (0..<5).map { try client.publish(topic: "t", payload: [UInt8($0)], retain: false) }
        var received: [UInt8] = []
        for _ in 0..<2 { received.append(try #require(try connection.next()).body.last!) }
        #expect(received == [0, 1])
        // Nothing more until a PUBACK.
        var fds = [pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)]
        #expect(poll(&fds, 1, 200) == 0, "a third message before any PUBACK")
        for id in ids {
            connection.send([MQTTPacket.puback, 2, UInt8(id >> 8), UInt8(id & 0xFF)])
            if received.count < 5 { received.append(try #require(try connection.next()).body.last!) }
        }
        #expect(received == [0, 1, 2, 3, 4])
        #expect(events.wait(for: "published", count: 5), "\(events.all)")
    }

    @Test("a packet before CONNACK is no MQTT broker: the connection fails at start, nothing is reported")
    func packetBeforeConnack() throws {
        let broker = try ScriptedBroker()
        let events = Events()
        let client = Self.client(broker, events: events)
        defer { client.stop() }
        let started = Atomic(false)
        let answering = Thread {
            guard let connection = try? broker.accept(), (try? connection.next()) != nil else { return }
            // A PUBACK for a message never sent, then the CONNACK; the connection stays open until `start`
            // has given its answer.
            connection.send([MQTTPacket.puback, 2, 0, 1, MQTTPacket.connack, 2, 0, 0])
            _ = Wait.blocking(timeout: 5) { started.load(ordering: .acquiring) }
        }
        answering.start()
        do {
            try client.start(timeout: 5)
            Issue.record("started")
        } catch {
            #expect(error.description.hasSuffix("the broker sent a packet before its CONNACK"), "\(error)")
        }
        started.store(true, ordering: .releasing)
        #expect(events.all.isEmpty, "\(events.all)")
    }

    @Test("at start: a refusal and an unreachable broker are errors in the same words as libmosquitto's")
    func startErrors() throws {
        let broker = try ScriptedBroker()
        let events = Events()
        let refused = NativeMQTTClient(
            options: MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "x"), handler: { events.record($0) })
        let answer = Thread {
            if let connection = try? broker.accept() { try? connection.acceptConnect(code: 5) }
        }
        answer.start()
        do {
            try refused.start(timeout: 5)
            Issue.record("a refused connection started")
        } catch {
            #expect(
                error.description
                    == "the MQTT broker at 127.0.0.1:\(broker.port) refused the connection: Connection Refused: "
                    + "not authorised")
        }
        broker.closeListener()
        let unreachable = NativeMQTTClient(
            options: MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "x"), handler: { events.record($0) })
        do {
            try unreachable.start(timeout: 5)
            Issue.record("an unreachable broker started")
        } catch {
            #expect(
                error.description == "cannot connect to the MQTT broker at 127.0.0.1:\(broker.port): Connection refused"
            )
        }
        #expect(events.all.isEmpty, "a failed start reports nothing to the handler: \(events.all)")
    }
}
