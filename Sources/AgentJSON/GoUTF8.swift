extension String {
    /// `bytes` as text with one U+FFFD per byte outside a well-formed UTF-8 sequence, as Go's
    /// `encoding/json` reads and writes strings (`String(decoding:as:)` gives one per maximal
    /// subpart: a cut `E2 82` is one there, two here). Valid UTF-8 is one validating copy.
    public init(goDecoding bytes: some Collection<UInt8>) {
        if let text = bytes.withContiguousStorageIfAvailable({ Self.goDecoded($0) }) {
            self = text
        } else {
            self = Array(bytes).withUnsafeBufferPointer { Self.goDecoded($0) }
        }
    }

    private static func goDecoded(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        if let valid = String(validating: bytes, as: UTF8.self) { return valid }
        var repaired: [UInt8] = []
        repaired.reserveCapacity(bytes.count + 16)
        var index = 0
        var runStart = 0
        while index < bytes.count {
            let length = wellFormedLength(bytes, at: index)
            if length > 0 {
                index += length
                continue
            }
            repaired.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
            repaired.append(0xEF)
            repaired.append(0xBF)
            repaired.append(0xBD)
            index += 1
            runStart = index
        }
        repaired.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
        return String(decoding: repaired, as: UTF8.self)
    }

    /// The length of the well-formed UTF-8 sequence starting at `index` (Unicode's table 3-7),
    /// or 0 when none does: the byte is then one U+FFFD and the next byte starts afresh, as Go's
    /// `utf8.DecodeRune` answers `(RuneError, 1)`.
    private static func wellFormedLength(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> Int {
        let lead = bytes[index]
        if lead < 0x80 { return 1 }
        let length: Int
        // The range of the second byte; the third and fourth are always 80...BF.
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF:
            length = 2
        case 0xE0:
            length = 3
            low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF:
            length = 3
        case 0xED:
            length = 3
            high = 0x9F
        case 0xF0:
            length = 4
            low = 0x90
        case 0xF1...0xF3:
            length = 4
        case 0xF4:
            length = 4
            high = 0x8F
        default:
            return 0
        }
        guard bytes.count - index >= length, (low...high).contains(bytes[index + 1]) else { return 0 }
        for offset in 2..<length where bytes[index + offset] & 0xC0 != 0x80 { return 0 }
        return length
    }
}
