import Foundation
import GeofenceEngine
import Testing

/// The MQTT 3.1.1 wire format of geofence's own client, without a socket: what it writes, byte for byte
/// against the standard, and what it reads, whatever the boundaries of the reads.
@Suite("MQTT packets (MQTT 3.1.1 wire format)")
struct MQTTPacketTests {
    static func read(_ chunks: [[UInt8]], maximumLength: Int = 1 << 16) throws -> [MQTTPacketReader.Packet] {
        var reader = MQTTPacketReader(maximumLength: maximumLength)
        var packets: [MQTTPacketReader.Packet] = []
        for chunk in chunks {
            chunk.withUnsafeBytes { reader.append($0) }
            while let packet = try reader.next() { packets.append(packet) }
        }
        return packets
    }

    /// A PUBLISH as a broker sends it: QoS `qos`, identifier `id` when QoS > 0.
    static func incoming(topic: String, payload: [UInt8], qos: UInt8, id: UInt16 = 7) -> [UInt8] {
        var body: [UInt8] = []
        MQTTPacket.appendField(Array(topic.utf8), to: &body)
        if qos > 0 { MQTTPacket.append16(id, to: &body) }
        body += payload
        return MQTTPacket.framed(MQTTPacket.publish | qos << 1, body)
    }

    @Test("Remaining Length: one to four bytes at the standard's boundaries (§2.2.3)")
    func remainingLength() throws {
        let cases: [(Int, [UInt8])] = [
            (0, [0x00]), (127, [0x7F]), (128, [0x80, 0x01]), (16_383, [0xFF, 0x7F]), (16_384, [0x80, 0x80, 0x01]),
            (2_097_151, [0xFF, 0xFF, 0x7F]), (2_097_152, [0x80, 0x80, 0x80, 0x01]),
            (268_435_455, [0xFF, 0xFF, 0xFF, 0x7F]),
        ]
        for (length, bytes) in cases {
            var written: [UInt8] = []
            MQTTPacket.appendLength(length, to: &written)
            #expect(written == bytes, "\(length)")
        }
        // Read back: a PUBLISH whose length takes two bytes (a 200-byte payload).
        let payload = [UInt8](repeating: 0x61, count: 200)
        let packet = Self.incoming(topic: "t", payload: payload, qos: 0)
        #expect(Array(packet[1...2]) == [0xCB, 0x01])
        #expect(try Self.read([packet]) == [.publish(topic: "t", payload: payload, id: nil, qos: 0, tooLong: nil)])
    }

    @Test("CONNECT: protocol name and level, clean session off, will at QoS 1 retained, user name and password")
    func connect() {
        let bytes = MQTTPacket.connectPacket(
            clientID: "geofence-x", cleanSession: false, keepalive: 30, username: "u", password: "pw",
            will: .init(topic: "s", payload: Array("offline".utf8), retain: true))
        let body: [UInt8] =
            [0, 4] + Array("MQTT".utf8) + [4, 0b1110_1100, 0, 30] + [0, 10] + Array("geofence-x".utf8)
            + [0, 1, 0x73] + [0, 7] + Array("offline".utf8) + [0, 1, 0x75] + [0, 2] + Array("pw".utf8)
        #expect(bytes == [0x10, UInt8(body.count)] + body)
        // No will, no credentials, a clean session: the flags say only that.
        let plain = MQTTPacket.connectPacket(
            clientID: "c", cleanSession: true, keepalive: 5, username: nil, password: nil, will: nil)
        #expect(plain == [0x10, 13, 0, 4] + Array("MQTT".utf8) + [4, 0x02, 0, 5, 0, 1, 0x63])
    }

    @Test("SUBSCRIBE at QoS 1 with its fixed flags; PUBLISH at QoS 1 retained; acknowledgements")
    func outgoing() {
        #expect(MQTTPacket.subscribePacket(id: 0x0102, filter: "a/#") == [0x82, 8, 1, 2, 0, 3, 0x61, 0x2F, 0x23, 1])
        let publish = MQTTPacket.publishPacket(topic: Array("a/b".utf8), payload: [1, 2], id: 9, retain: true)
        #expect(publish == [0x33, 9, 0, 3, 0x61, 0x2F, 0x62, 0, 9, 1, 2])
        var acks: [UInt8] = []
        MQTTPacket.appendAcknowledgement(MQTTPacket.puback, id: 0xABCD, to: &acks)
        MQTTPacket.appendAcknowledgement(MQTTPacket.pubrel, id: 1, to: &acks)
        #expect(acks == [0x40, 2, 0xAB, 0xCD, 0x62, 2, 0, 1])
    }

    @Test("packets split anywhere between reads come out whole, once each, in order")
    func splitReads() throws {
        let stream =
            [0x20, 2, 1, 0] + Self.incoming(topic: "fleet/a", payload: Array(#"{"class":"TPV"}"#.utf8), qos: 1, id: 300)
            + [0x40, 2, 0, 5] + Self.incoming(topic: "q0", payload: [], qos: 0) + [0x90, 3, 0, 1, 1]
            + Self.incoming(topic: "q2", payload: [9], qos: 2, id: 8) + [0x62, 2, 0, 8] + [0xD0, 0]
        let expected: [MQTTPacketReader.Packet] = [
            .connack(sessionPresent: true, code: 0),
            .publish(topic: "fleet/a", payload: Array(#"{"class":"TPV"}"#.utf8), id: 300, qos: 1, tooLong: nil),
            .puback(5), .publish(topic: "q0", payload: [], id: nil, qos: 0, tooLong: nil),
            .suback(id: 1, codes: [1]), .publish(topic: "q2", payload: [9], id: 8, qos: 2, tooLong: nil), .pubrel(8),
            .pingresp,
        ]
        #expect(try Self.read([stream]) == expected)
        // Every cut in two, and one byte at a time.
        for cut in 1..<stream.count {
            #expect(try Self.read([Array(stream[..<cut]), Array(stream[cut...])]) == expected, "cut at \(cut)")
        }
        #expect(try Self.read(stream.map { [$0] }) == expected)
    }

    @Test("a PUBLISH longer than the reader keeps: its topic, id and length, its bytes dropped, the next one whole")
    func tooLong() throws {
        let big = [UInt8](repeating: 0x7A, count: 100_000)
        let stream =
            Self.incoming(topic: "fleet/huge", payload: big, qos: 1, id: 42)
            + Self.incoming(topic: "fleet/next", payload: [1], qos: 1, id: 43)
        let expected: [MQTTPacketReader.Packet] = [
            .publish(topic: "fleet/huge", payload: [], id: 42, qos: 1, tooLong: 100_000),
            .publish(topic: "fleet/next", payload: [1], id: 43, qos: 1, tooLong: nil),
        ]
        #expect(try Self.read([stream], maximumLength: 4096) == expected)
        // In reads of 1,000 bytes, the reader never holds more than a read and a packet it keeps.
        var reader = MQTTPacketReader(maximumLength: 4096)
        var packets: [MQTTPacketReader.Packet] = []
        var held = 0
        for start in stride(from: 0, to: stream.count, by: 1000) {
            stream[start..<min(start + 1000, stream.count)].withUnsafeBytes { reader.append($0) }
            while let packet = try reader.next() { packets.append(packet) }
            held = max(held, reader.buffered)
        }
        #expect(packets == expected)
        #expect(held <= 1000, "\(held) bytes held")
    }

    @Test("what is not MQTT from a broker is an error, never a crash: lengths, types, topics longer than the packet")
    func malformed() {
        let cases: [[UInt8]] = [
            [0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01],  // a length of five bytes
            [0x10, 0],  // CONNECT, which a broker does not send
            [0x30, 3, 0, 9, 0x61],  // a topic of 9 bytes in a packet of 3
            [0x36, 2, 0, 0],  // QoS 3
            [0x20, 1, 0],  // a CONNACK of one byte
            [0x40, 0],  // a PUBACK without its identifier
            [0xA0, 0x80, 0x80, 0x04],  // a packet of 65,536 bytes that is not a PUBLISH, above the maximum
            [0x36, 0x88, 0x27, 0, 1, 0x74, 0, 1],  // QoS 3 in a PUBLISH above the maximum
            Self.incoming(topic: "t", payload: [1], qos: 1, id: 0),  // packet identifier 0
            [0x32, 0x88, 0x27, 0, 1, 0x74, 0, 0],  // the same above the maximum
        ]
        for bytes in cases {
            #expect(throws: MQTTPacketReader.Malformed.self, "\(bytes)") {
                _ = try Self.read([bytes], maximumLength: 4096)
            }
        }
    }

    @Test("a topic is checked before it is published: empty, wildcards, NUL and length are refused")
    func publishTopics() {
        #expect(MQTTPacket.problem(publishingTo: "geofence/truck-1/depot/event") == nil)
        for topic in ["", "a/+/b", "a/#", "a\u{0}b", String(repeating: "x", count: 65_536)] {
            #expect(MQTTPacket.problem(publishingTo: topic) != nil, "\(topic.prefix(10))")
        }
        #expect(MQTTPacket.refusal(5) == "Connection Refused: not authorised")
    }
}
