// fuzz-seeds: gpsd regions json
// fuzz-max-len: 1048576

import Foundation
import GeofenceCore

/// The JSON reader and writer: whatever `JSON.parse` accepts serializes (compact and pretty) to text
/// that parses back to an equal value, serialization is stable, and the streaming member walk agrees
/// with the whole-document parse on every input, error included.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = fuzzInput(data, size)
    let parsed: Result<JSONValue, JSONParseError>
    do throws(JSONParseError) {
        parsed = .success(try JSON.parse(bytes))
    } catch {
        parsed = .failure(error)
    }
    checkMembers(bytes, against: parsed)

    switch parsed {
    case .failure(let error):
        require(error.offset >= 0 && error.offset <= bytes.count, "error offset out of the input: \(error)")
        require(error.line >= 1 && error.column >= 1, "error position not one-based: \(error)")
        require(!error.message.isEmpty, "error without a message at \(error.offset)")
    case .success(let value):
        let compact = value.serialized()
        let reparsed = reparse(compact, of: value)
        require(reparsed.serialized() == compact, "serialization is not stable: \(compact)")
        // Indentation multiplies the size by up to twice the depth; a deep and wide 1 MiB input would
        // spend the run writing gigabytes, so the pretty form is checked on the smaller inputs.
        if bytes.count <= 16 * 1024 { _ = reparse(value.serialized(pretty: true), of: value) }
        // Valid JSON is valid UTF-8, so the String entry point must give the same value.
        let text = String(decoding: bytes, as: UTF8.self)
        require((try? JSON.parse(text)) == value, "String and byte parses differ")
        // A lone number must read as the standard library's correctly rounded conversion does.
        if case .number(let number) = value {
            let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
            require(Double(trimmed) == number, "\(trimmed) parsed as \(number), not as Double(_:) reads it")
        }
    }
    return 0
}

private func reparse(_ text: String, of value: JSONValue) -> JSONValue {
    do throws(JSONParseError) {
        let again = try JSON.parse(text)
        require(again == value, "round trip changed the value: \(text)")
        return again
    } catch {
        fatalError("serialized text does not parse (\(error)): \(text)")
    }
}

/// `forEachMember` must accept exactly the objects `parse` accepts, hand over the same members in
/// order, and fail with the same error otherwise.
private func checkMembers(_ bytes: UnsafeBufferPointer<UInt8>, against parsed: Result<JSONValue, JSONParseError>) {
    var members: [JSONObject.Member] = []
    let walked: JSONParseError?
    do throws(JSONParseError) {
        try JSON.forEachMember(in: bytes) { key, value in members.append((key, value)) }
        walked = nil
    } catch {
        walked = error
    }
    switch parsed {
    case .success(.object(let object)):
        require(walked == nil, "parse accepts an object that forEachMember refuses: \(String(describing: walked))")
        require(members.count == object.count, "forEachMember saw \(members.count) members of \(object.count)")
        for (member, expected) in zip(members, object) {
            require(member.key == expected.key && member.value == expected.value, "member \(member.key) differs")
        }
    case .success:
        require(walked != nil, "forEachMember accepts a value that is not an object")
    case .failure(let error):
        // A document that is no object may fail differently; one that starts as an object must not.
        if walked != nil, bytes.drop(while: { [0x20, 0x09, 0x0A, 0x0D].contains($0) }).first == UInt8(ascii: "{") {
            require(walked == error, "parse fails with \(error), forEachMember with \(String(describing: walked))")
        }
        require(walked != nil, "forEachMember accepts what parse refuses (\(error))")
    }
}
