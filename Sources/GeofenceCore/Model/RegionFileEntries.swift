extension RegionJSON {
    /// Where each entry of a regions file's `regions` array lies in the file's bytes, so a file already
    /// checked (`decodeFile` succeeded) can be passed on in parts as it was written, without serializing
    /// every region again. Nil when the entries cannot be told apart this way with certainty (the key
    /// `regions` spelt with escapes), or the bytes are not a regions file; the caller then encodes the
    /// decoded regions instead.
    ///
    /// It only finds boundaries: strings (with their escapes) and nesting are followed, nothing is checked,
    /// which is why it takes bytes that `decodeFile` accepted.
    package static func entryRanges(in bytes: [UInt8]) -> [Range<Int>]? {
        bytes.withUnsafeBufferPointer { buffer in
            var scanner = EntryScanner(bytes: buffer)
            return scanner.entries()
        }
    }
}

private struct EntryScanner {
    let bytes: UnsafeBufferPointer<UInt8>
    var position = 0

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func entries() -> [Range<Int>]? {
        skipWhitespace()
        guard let first = peek() else { return nil }
        if first == UInt8(ascii: "{") {
            position += 1
            guard findRegionsMember() else { return nil }
            skipWhitespace()
        }
        guard peek() == UInt8(ascii: "[") else { return nil }
        position += 1
        var ranges: [Range<Int>] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") { return ranges }
        while position < bytes.count {
            skipWhitespace()
            let start = position
            guard skipValue() else { return nil }
            ranges.append(start..<position)
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "]"): return ranges
            default: return nil
            }
        }
        return nil
    }

    /// Moves past the members of the top-level object up to the value of its `regions` key.
    private mutating func findRegionsMember() -> Bool {
        while true {
            skipWhitespace()
            guard peek() == UInt8(ascii: "\"") else { return false }
            let keyStart = position + 1
            guard skipString() else { return false }
            let key = bytes[keyStart..<(position - 1)]
            // An escape could spell "regions" another way: then leave it to the decoded regions.
            if key.contains(UInt8(ascii: "\\")) { return false }
            skipWhitespace()
            guard peek() == UInt8(ascii: ":") else { return false }
            position += 1
            skipWhitespace()
            if key.elementsEqual("regions".utf8) { return true }
            guard skipValue() else { return false }
            skipWhitespace()
            guard peek() == UInt8(ascii: ",") else { return false }
            position += 1
        }
    }

    private func peek() -> UInt8? { position < bytes.count ? bytes[position] : nil }

    private mutating func skipWhitespace() {
        while let b = peek(), b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 { position += 1 }
    }

    /// Past the string that starts at `position` (its opening quote).
    private mutating func skipString() -> Bool {
        position += 1
        while position < bytes.count {
            switch bytes[position] {
            case UInt8(ascii: "\\"): position += 2
            case UInt8(ascii: "\""):
                position += 1
                return true
            default: position += 1
            }
        }
        return false
    }

    /// Past one value: a string, a container (with everything in it) or a scalar.
    private mutating func skipValue() -> Bool {
        guard let first = peek() else { return false }
        if first == UInt8(ascii: "\"") { return skipString() }
        if first != UInt8(ascii: "{") && first != UInt8(ascii: "[") {
            while let b = peek(), !(b == UInt8(ascii: ",") || b == UInt8(ascii: "]") || b == UInt8(ascii: "}")),
                !(b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09)
            {
                position += 1
            }
            return true
        }
        var depth = 0
        while position < bytes.count {
            switch bytes[position] {
            case UInt8(ascii: "\""):
                guard skipString() else { return false }
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                if depth == 0 {
                    position += 1
                    return true
                }
            default:
                break
            }
            position += 1
        }
        return false
    }
}
