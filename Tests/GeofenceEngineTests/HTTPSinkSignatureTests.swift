import Foundation
import GeofenceEngine
import Testing

/// The webhook sink's signature: HMAC-SHA256 (through libcrypto) against RFC 4231's vectors, and the header
/// against one made by `openssl dgst -sha256 -hmac`.
@Suite("HTTP sink signature")
struct HTTPSinkSignatureTests {
    @Test("HMAC-SHA256: RFC 4231 test cases 1, 2 and 6 (a key longer than a block)")
    func rfc4231() {
        let cases: [(key: [UInt8], data: String, mac: String)] = [
            (
                [UInt8](repeating: 0x0b, count: 20), "Hi There",
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
            ),
            (
                Array("Jefe".utf8), "what do ya want for nothing?",
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
            ),
            (
                [UInt8](repeating: 0xaa, count: 131), "Test Using Larger Than Block-Size Key - Hash Key First",
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
            ),
        ]
        for c in cases {
            #expect(HTTPSink.hex(HTTPSink.hmacSHA256(key: c.key, message: Array(c.data.utf8))) == c.mac, "\(c.data)")
        }
    }

    @Test("t=UNIX,v1=HEX over \"<t>.<body>\", as openssl computes it")
    func header() {
        // printf '%s' '1796326088.{"a":1}' | openssl dgst -sha256 -hmac k3y
        let signature = HTTPSink.signature(
            secret: Array("k3y".utf8), body: Array(#"{"a":1}"#.utf8), now: Date(timeIntervalSince1970: 1_796_326_088.9))
        #expect(signature == "t=1796326088,v1=bf9c28b8bac9abfd45f6a0876dcd1e6e9b16a3a53a9c66c07464afa2a0909edd")
    }

    @Test("headers: Name: value, no line breaks, none of the sink's own")
    func headers() {
        #expect(HTTPSinkKind.headerProblem("Authorization: Bearer x") == nil)
        #expect(HTTPSinkKind.headerProblem("X-A:b") == nil)
        #expect(HTTPSinkKind.headerProblem("X-A") != nil)
        #expect(HTTPSinkKind.headerProblem("X-A: ") != nil)
        #expect(HTTPSinkKind.headerProblem("X-A: a\nb") != nil)
        #expect(HTTPSinkKind.headerProblem("Host: evil") != nil)
        #expect(HTTPSinkKind.headerProblem("x-geofence-event-id: 1") != nil)
    }
}
