import Foundation
import GeofenceCore
import GeofenceStore

/// How a region is kept in the cluster's bucket `geofence-regions` (Docs/cluster.md, "Regions"): the key is
/// the region's id in the alphabet key-value keys allow, the value the region as `export` writes it.
package enum ClusterRegionCodec {
    /// The bucket every engine of a cluster follows.
    package static let bucket = "geofence-regions"
    /// The stream behind it.
    package static let stream = "KV_" + bucket
    /// Every key's subject.
    package static let subjects = "$KV.\(bucket).>"
    /// The subject prefix before a key.
    package static let subjectPrefix = "$KV.\(bucket)."
    /// How the bucket's stream is read: every message in order (`false`), not the last message of each key
    /// (`DeliverLastPerSubject`). The bucket keeps one value per key (history 1), so both give the same, but
    /// nats-server 2.9 was twice as slow with a last-per-subject consumer over a million keys
    /// (Docs/cluster.md, "Regions": measured). With more history, every older value is read and overwritten
    /// in order, which ends in the same state.
    package static let readLastPerSubject = false
    /// A key no region id makes (`=5F` escapes `_`, which a key keeps as it is): the delete markers a store
    /// writes there order its reads after an acknowledged write (`ClusterRegionStore`'s re-runs). Engines
    /// skip it without a log line.
    package static let barrierKey = "=5Fbarrier"
    /// The header naming the request (`--request-id`) that wrote an entry, so that the same command run
    /// again recognizes its own writes.
    package static let requestHeader = "Geofence-Request"

    /// The key for `id`: ASCII letters, digits, `-` and `_` as they are; every other byte of its UTF-8 as
    /// `=XX` (two upper-case hex digits). Reversible, no `.` (so no empty subject token), and a plain id
    /// (`depot`, `customer-42`) is its own key.
    package static func key(for id: String) -> String {
        var key = ""
        key.reserveCapacity(id.utf8.count)
        let digits = Array("0123456789ABCDEF")
        for byte in id.utf8 {
            if isPlain(byte) {
                key.append(Character(Unicode.Scalar(byte)))
            } else {
                key.append("=")
                key.append(digits[Int(byte >> 4)])
                key.append(digits[Int(byte & 15)])
            }
        }
        return key
    }

    /// The id a key stands for; nil when the key is not one `key(for:)` makes (another byte than the
    /// plain ones and `=XX`, lower-case hex, an escape of a plain byte, or not UTF-8).
    package static func id(forKey key: String) -> String? {
        var bytes: [UInt8] = []
        let utf8 = Array(key.utf8)
        var index = 0
        while index < utf8.count {
            let byte = utf8[index]
            if isPlain(byte) {
                bytes.append(byte)
                index += 1
            } else if byte == UInt8(ascii: "="), index + 2 < utf8.count, let high = hex(utf8[index + 1]),
                let low = hex(utf8[index + 2])
            {
                let decoded = high << 4 | low
                guard !isPlain(decoded) else { return nil }
                bytes.append(decoded)
                index += 3
            } else {
                return nil
            }
        }
        guard !bytes.isEmpty, let id = String(validating: bytes, as: UTF8.self) else { return nil }
        return id
    }

    private static func isPlain(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }

    private static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The key of a subject of the bucket's stream; nil for another subject.
    static func key(ofSubject subject: String) -> String? {
        guard subject.hasPrefix(subjectPrefix) else { return nil }
        return String(subject.dropFirst(subjectPrefix.count))
    }

    /// A server time in nanoseconds since 1970 as a date.
    package static func date(nanoseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(nanoseconds) / 1e9)
    }

    /// The value stored for `region`: its JSON as `export` writes it.
    package static func value(_ region: Region) -> [UInt8] {
        Array(JSONValue.object(RegionJSON.encode(region)).serialized().utf8)
    }

    /// Why an entry of the bucket is not a region.
    package struct Malformed: Error, Sendable, Equatable, CustomStringConvertible {
        package let reason: String
        package var description: String { reason }
    }

    /// The region an entry holds: its value read as an import reads an entry (the limits a stored region is
    /// read back with, so that one written under wider limits is never dropped), its id the key's. `written`
    /// (the server's time of the entry, the same on every engine) is its `createdAt`, and what a relative
    /// expiry would count from (the CLI writes absolute ones), so every engine reads the same region.
    package static func region(key: String, value: [UInt8], written: Date) -> Result<Region, Malformed> {
        guard let id = id(forKey: key) else {
            return .failure(Malformed(reason: "the key is not an encoded region id"))
        }
        let json: JSONValue
        do { json = try JSON.parse(value) } catch {
            return .failure(Malformed(reason: "the value is not JSON: \(error)"))
        }
        let region: Region
        do {
            region = try RegionJSON.decode(json, now: written, limits: RegionRepository.storedLimits)
        } catch {
            return .failure(Malformed(reason: "the value is not a region: \(error)"))
        }
        guard region.id == id else {
            return .failure(
                Malformed(
                    reason: "the value's id \(JSONValue.string(region.id).serialized()) is not the key's "
                        + JSONValue.string(id).serialized()))
        }
        return .success(region)
    }
}
