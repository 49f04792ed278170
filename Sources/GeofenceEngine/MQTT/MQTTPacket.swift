/// The MQTT 3.1.1 packets geofence's own client writes and reads (OASIS Standard, 29 October 2014):
/// CONNECT, SUBSCRIBE, PUBLISH at QoS 0-2, their acknowledgements, PINGREQ and DISCONNECT.
///
/// Pure functions and a reader over bytes, so that every rule of the wire format is tested without a
/// socket (`MQTTPacketTests`); the client (`NativeMQTTClient`) only moves the bytes.
package enum MQTTPacket {
    package static let connect: UInt8 = 0x10
    package static let connack: UInt8 = 0x20
    package static let publish: UInt8 = 0x30
    package static let puback: UInt8 = 0x40
    static let pubrec: UInt8 = 0x50
    /// PUBREL and SUBSCRIBE carry the fixed flags 0b0010 (§3.6.1, §3.8.1).
    package static let pubrel: UInt8 = 0x62
    static let pubcomp: UInt8 = 0x70
    package static let subscribe: UInt8 = 0x82
    package static let suback: UInt8 = 0x90
    static let pingreq: UInt8 = 0xC0
    static let pingresp: UInt8 = 0xD0
    package static let disconnect: UInt8 = 0xE0
    /// The DUP flag of a PUBLISH sent again (§3.3.1.1).
    static let duplicate: UInt8 = 0x08
    /// The largest Remaining Length the protocol can say (four bytes of seven bits, §2.2.3).
    static let maximumRemainingLength = 268_435_455

    package struct Will: Equatable {
        var topic: String
        var payload: [UInt8]
        var retain: Bool

        package init(topic: String, payload: [UInt8], retain: Bool) {
            self.topic = topic
            self.payload = payload
            self.retain = retain
        }
    }

    /// Remaining Length: seven bits a byte, least significant first, the high bit saying more follow.
    package static func appendLength(_ length: Int, to bytes: inout [UInt8]) {
        var left = length
        repeat {
            var byte = UInt8(left & 0x7F)
            left >>= 7
            if left > 0 { byte |= 0x80 }
            bytes.append(byte)
        } while left > 0
    }

    /// A UTF-8 string or binary field: its length in two bytes, big-endian, then the bytes.
    package static func appendField<Bytes: Collection<UInt8>>(_ field: Bytes, to bytes: inout [UInt8]) {
        append16(UInt16(field.count), to: &bytes)
        bytes.append(contentsOf: field)
    }

    package static func append16(_ value: UInt16, to bytes: inout [UInt8]) {
        bytes.append(UInt8(value >> 8))
        bytes.append(UInt8(value & 0xFF))
    }

    /// CONNECT at protocol level 4 (3.1.1). `cleanSession` false: the broker keeps the subscription and the
    /// QoS 1 messages for it while the client is away, and the client's unacknowledged ones stay its own.
    package static func connectPacket(
        clientID: String, cleanSession: Bool, keepalive: UInt16, username: String?, password: String?,
        will: Will?
    ) -> [UInt8] {
        var body: [UInt8] = []
        appendField(Array("MQTT".utf8), to: &body)
        body.append(4)
        var flags: UInt8 = cleanSession ? 0x02 : 0
        if let will {
            // Will QoS 1 (bits 3-4 = 01), and its retain flag.
            flags |= 0x04 | 0x08
            if will.retain { flags |= 0x20 }
        }
        if username != nil { flags |= 0x80 }
        if username != nil, password != nil { flags |= 0x40 }
        body.append(flags)
        append16(keepalive, to: &body)
        appendField(Array(clientID.utf8), to: &body)
        if let will {
            appendField(Array(will.topic.utf8), to: &body)
            appendField(will.payload, to: &body)
        }
        if let username {
            appendField(Array(username.utf8), to: &body)
            if let password { appendField(Array(password.utf8), to: &body) }
        }
        return framed(connect, body)
    }

    /// SUBSCRIBE to one filter at QoS 1.
    package static func subscribePacket(id: UInt16, filter: String) -> [UInt8] {
        var body: [UInt8] = []
        append16(id, to: &body)
        appendField(Array(filter.utf8), to: &body)
        body.append(1)
        return framed(subscribe, body)
    }

    /// PUBLISH at QoS 1 with packet identifier `id`.
    package static func publishPacket(topic: [UInt8], payload: [UInt8], id: UInt16, retain: Bool) -> [UInt8] {
        let remaining = 2 + topic.count + 2 + payload.count
        var bytes: [UInt8] = []
        bytes.reserveCapacity(remaining + 5)
        bytes.append(publish | 0x02 | (retain ? 0x01 : 0))
        appendLength(remaining, to: &bytes)
        appendField(topic, to: &bytes)
        append16(id, to: &bytes)
        bytes.append(contentsOf: payload)
        return bytes
    }

    /// PUBACK, PUBREC, PUBREL or PUBCOMP: the type and the packet identifier.
    package static func appendAcknowledgement(_ type: UInt8, id: UInt16, to bytes: inout [UInt8]) {
        bytes.append(type)
        bytes.append(2)
        append16(id, to: &bytes)
    }

    package static func framed(_ header: UInt8, _ body: [UInt8]) -> [UInt8] {
        var bytes = [header]
        appendLength(body.count, to: &bytes)
        bytes.append(contentsOf: body)
        return bytes
    }

    /// A topic a PUBLISH may carry (§4.7): not empty, no wildcard, no NUL, at most 65,535 bytes.
    package static func problem(publishingTo topic: String) -> String? {
        if topic.isEmpty { return "the topic is empty" }
        if topic.utf8.count > 65_535 { return "the topic is longer than 65,535 bytes" }
        if topic.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") || $0 == 0 }) {
            return "the topic has a wildcard (+ or #) or a NUL"
        }
        return nil
    }

    /// What CONNACK's return code says (§3.2.2.3), in the words libmosquitto uses.
    package static func refusal(_ code: UInt8) -> String {
        switch code {
        case 1: "Connection Refused: unacceptable protocol version"
        case 2: "Connection Refused: identifier rejected"
        case 3: "Connection Refused: broker unavailable"
        case 4: "Connection Refused: bad user name or password"
        case 5: "Connection Refused: not authorised"
        default: "Connection Refused: unknown reason"
        }
    }
}

/// Splits the bytes read from a broker into packets.
///
/// Bytes are appended as they are read, whatever their boundaries; `next()` returns each whole packet
/// once. A PUBLISH longer than `maximumLength` is not kept: its topic and packet identifier are returned
/// with its length (`tooLong`), so it can be acknowledged and counted, and the rest of its bytes are dropped
/// as they arrive, so that memory stays bounded whatever the broker sends.
package struct MQTTPacketReader {
    package enum Packet: Equatable {
        case connack(sessionPresent: Bool, code: UInt8)
        /// `tooLong`: the payload's length, when it was longer than the reader keeps (`payload` is then empty).
        case publish(topic: String, payload: [UInt8], id: UInt16?, qos: UInt8, tooLong: Int?)
        case puback(UInt16)
        case pubrec(UInt16)
        case pubrel(UInt16)
        case pubcomp(UInt16)
        case suback(id: UInt16, codes: [UInt8])
        case pingresp
    }

    package struct Malformed: Error, Equatable, CustomStringConvertible {
        package var description: String
    }

    let maximumLength: Int
    private var buffer: [UInt8] = []
    private var start = 0
    /// Bytes of a too-long PUBLISH still to come and to drop.
    private var dropping = 0

    package init(maximumLength: Int) {
        self.maximumLength = maximumLength
    }

    /// Bytes waiting for the rest of their packet.
    package var buffered: Int { buffer.count - start }

    package mutating func append(_ bytes: UnsafeRawBufferPointer) {
        var bytes = bytes[...]
        if dropping > 0 {
            let dropped = min(dropping, bytes.count)
            dropping -= dropped
            bytes = bytes.dropFirst(dropped)
        }
        if start > 0, start == buffer.count || start >= 1 << 16 {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole packet, nil until more bytes are appended; thrown: the stream is not MQTT (the
    /// connection is to be closed).
    package mutating func next() throws(Malformed) -> Packet? {
        let count = buffer.count
        guard count - start >= 2 else { return nil }
        let header = buffer[start]
        var length = 0
        var shift = 0
        var index = start + 1
        while true {
            guard index < count else { return nil }
            let byte = buffer[index]
            index += 1
            length |= Int(byte & 0x7F) << shift
            if byte & 0x80 == 0 { break }
            shift += 7
            if shift == 28 { throw Malformed(description: "a packet length longer than four bytes") }
        }
        let body = index
        let type = header & 0xF0
        if length > maximumLength {
            guard type == MQTTPacket.publish else {
                throw Malformed(description: "a packet of type \(header >> 4) of \(length) bytes")
            }
            let qos = (header >> 1) & 0x03
            guard qos < 3 else { throw Malformed(description: "a PUBLISH at QoS 3") }
            guard count - body >= 2 else { return nil }
            let topicLength = Int(buffer[body]) << 8 | Int(buffer[body + 1])
            let head = 2 + topicLength + (qos > 0 ? 2 : 0)
            guard head <= length else { throw Malformed(description: "a PUBLISH whose topic is longer than it") }
            guard count - body >= head else { return nil }
            let topic = String(decoding: buffer[(body + 2)..<(body + 2 + topicLength)], as: UTF8.self)
            let id = qos > 0 ? Self.read16(buffer, body + 2 + topicLength) : nil
            guard id != 0 else { throw Malformed(description: "a PUBLISH with packet identifier 0") }
            let held = min(count - body, length)
            dropping = length - held
            start = body + held
            return .publish(topic: topic, payload: [], id: id, qos: qos, tooLong: length - head)
        }
        guard count - body >= length else { return nil }
        start = body + length
        return try Self.decode(header: header, buffer[body..<(body + length)])
    }

    private static func read16(_ bytes: [UInt8], _ at: Int) -> UInt16 {
        UInt16(bytes[at]) << 8 | UInt16(bytes[at + 1])
    }

    private static func decode(header: UInt8, _ body: ArraySlice<UInt8>) throws(Malformed) -> Packet {
        let at = body.startIndex
        func identifier() throws(Malformed) -> UInt16 {
            guard body.count >= 2 else { throw Malformed(description: "an acknowledgement without its identifier") }
            return UInt16(body[at]) << 8 | UInt16(body[at + 1])
        }
        switch header & 0xF0 {
        case MQTTPacket.connack:
            guard body.count == 2 else { throw Malformed(description: "a CONNACK of \(body.count) bytes") }
            return .connack(sessionPresent: body[at] & 0x01 != 0, code: body[at + 1])
        case MQTTPacket.publish:
            let qos = (header >> 1) & 0x03
            guard qos < 3 else { throw Malformed(description: "a PUBLISH at QoS 3") }
            guard body.count >= 2 else { throw Malformed(description: "a PUBLISH without a topic") }
            let topicLength = Int(body[at]) << 8 | Int(body[at + 1])
            let head = 2 + topicLength + (qos > 0 ? 2 : 0)
            guard head <= body.count else { throw Malformed(description: "a PUBLISH whose topic is longer than it") }
            let topic = String(decoding: body[(at + 2)..<(at + 2 + topicLength)], as: UTF8.self)
            let id = qos > 0 ? UInt16(body[at + 2 + topicLength]) << 8 | UInt16(body[at + 3 + topicLength]) : nil
            guard id != 0 else { throw Malformed(description: "a PUBLISH with packet identifier 0") }
            return .publish(topic: topic, payload: Array(body[(at + head)...]), id: id, qos: qos, tooLong: nil)
        case MQTTPacket.puback: return .puback(try identifier())
        case MQTTPacket.pubrec: return .pubrec(try identifier())
        case MQTTPacket.pubrel & 0xF0: return .pubrel(try identifier())
        case MQTTPacket.pubcomp: return .pubcomp(try identifier())
        case MQTTPacket.suback: return .suback(id: try identifier(), codes: Array(body.dropFirst(2)))
        case MQTTPacket.pingresp: return .pingresp
        default: throw Malformed(description: "a packet of type \(header >> 4), which a broker does not send")
        }
    }
}
