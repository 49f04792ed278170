import CCrypto
import Foundation
import GeofenceStore

/// The HTTP API's bearer tokens: made from 32 random bytes, kept in the store only as their SHA-256.
package enum HTTPTokens {
    /// What every token begins with, so that one found in a file or a log is recognisable.
    package static let prefix = "gft_"

    /// A new token: the prefix and 64 hex digits of OpenSSL's CSPRNG.
    package static func make() throws -> String {
        var bytes = [UInt8](repeating: 0, count: 32)
        let ok = bytes.withUnsafeMutableBufferPointer { CCrypto_random($0.baseAddress, $0.count) }
        guard ok == 1 else {
            throw TokenError(description: "no random bytes for a token (OpenSSL's RAND_bytes failed)")
        }
        return prefix + HTTPSink.hex(bytes)
    }

    /// The SHA-256 of `token` in lower-case hex: what the store keeps and looks tokens up by.
    package static func hash(_ token: String) -> String {
        let bytes = Array(token.utf8)
        var out = [UInt8](repeating: 0, count: 32)
        let ok = bytes.withUnsafeBytes { b in
            out.withUnsafeMutableBufferPointer { CCrypto_sha256(b.baseAddress, b.count, $0.baseAddress) }
        }
        return ok == 1 ? HTTPSink.hex(out) : ""
    }

    package struct TokenError: Error, CustomStringConvertible {
        package var description: String
    }
}
