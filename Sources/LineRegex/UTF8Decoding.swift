/// UTF-8 decoding with Go's error convention: an invalid or truncated sequence decodes as
/// U+FFFD and consumes exactly one byte, so every input has a well-defined scalar sequence.
enum UTF8Decoding {
    static let replacement: Int32 = 0xFFFD

    /// Scalar at byte offset `i` and its width; `(-1, 0)` at or past the end.
    @inline(__always)
    static func decode(_ p: UnsafeRawBufferPointer, _ i: Int) -> (scalar: Int32, width: Int) {
        let n = p.count - i
        if n <= 0 { return (-1, 0) }
        let b0 = UInt32(p[i])
        if b0 < 0x80 { return (Int32(b0), 1) }
        if b0 < 0xC2 || b0 > 0xF4 { return (replacement, 1) }
        if n < 2 { return (replacement, 1) }
        let b1 = UInt32(p[i + 1])
        if b0 < 0xE0 {
            guard b1 & 0xC0 == 0x80 else { return (replacement, 1) }
            return (Int32((b0 & 0x1F) << 6 | (b1 & 0x3F)), 2)
        }
        let lo1: UInt32, hi1: UInt32
        switch b0 {
        case 0xE0: lo1 = 0xA0; hi1 = 0xBF
        case 0xED: lo1 = 0x80; hi1 = 0x9F
        case 0xF0: lo1 = 0x90; hi1 = 0xBF
        case 0xF4: lo1 = 0x80; hi1 = 0x8F
        default: lo1 = 0x80; hi1 = 0xBF
        }
        guard b1 >= lo1 && b1 <= hi1, n >= 3 else { return (replacement, 1) }
        let b2 = UInt32(p[i + 2])
        guard b2 & 0xC0 == 0x80 else { return (replacement, 1) }
        if b0 < 0xF0 {
            return (Int32((b0 & 0x0F) << 12 | (b1 & 0x3F) << 6 | (b2 & 0x3F)), 3)
        }
        guard n >= 4 else { return (replacement, 1) }
        let b3 = UInt32(p[i + 3])
        guard b3 & 0xC0 == 0x80 else { return (replacement, 1) }
        return (Int32((b0 & 0x07) << 18 | (b1 & 0x3F) << 12 | (b2 & 0x3F) << 6 | (b3 & 0x3F)), 4)
    }

    /// Decodes a pattern (always valid UTF-8 when it came from a `String`).
    static func decode(_ bytes: [UInt8], _ i: Int) -> (scalar: UInt32, width: Int) {
        bytes.withUnsafeBytes { raw in
            let (s, w) = decode(raw, i)
            return (s < 0 ? 0xFFFD : UInt32(s), max(w, 1))
        }
    }
}
