/// File names are bytes; JSON and Swift strings are Unicode. A name that is not valid UTF-8
/// (a Latin-1 `caf\xe9`, a broken download) is carried losslessly as text: each byte that is
/// not part of a valid UTF-8 sequence becomes the private-use character U+10FF00 + byte
/// (plane 16), and a name sent back with such characters names those raw bytes again. Real
/// U+10FF00...U+10FFFF characters in a name are escaped the same way (byte by byte), so the
/// mapping is a bijection: every name lists, and every listed name can be addressed.
/// Valid UTF-8 (almost every name) passes through unchanged.
public enum FilePathText {
    /// The first escape character; byte `b` is U+10FF00 + b.
    public static let escapeBase: UInt32 = 0x10FF00

    /// The text for `bytes`.
    public static func decode<C: Collection<UInt8>>(_ bytes: C) -> String where C.Index == Int {
        // Fast path: valid UTF-8 without escape-range characters (F4 8F BC..BF lead them).
        if let text = String(validating: bytes, as: UTF8.self), !containsEscapeRange(bytes) { return text }
        var scalars = String.UnicodeScalarView()
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let lead = bytes[index]
            let length = lead < 0x80 ? 1 : lead >> 5 == 0b110 ? 2 : lead >> 4 == 0b1110 ? 3 : lead >> 3 == 0b11110 ? 4 : 0
            if length > 0, index + length <= bytes.endIndex,
                let piece = String(validating: bytes[index..<(index + length)], as: UTF8.self),
                let scalar = piece.unicodeScalars.first, piece.unicodeScalars.count == 1,
                !(escapeBase...(escapeBase + 0xFF)).contains(scalar.value)
            {
                scalars.append(scalar)
                index += length
            } else {
                scalars.append(Unicode.Scalar(escapeBase + UInt32(lead))!)
                index += 1
            }
        }
        return String(scalars)
    }

    /// The bytes `text` names.
    public static func encode(_ text: String) -> [UInt8] {
        guard text.unicodeScalars.contains(where: { $0.value >= escapeBase && $0.value <= escapeBase + 0xFF }) else {
            return Array(text.utf8)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            if scalar.value >= escapeBase, scalar.value <= escapeBase + 0xFF {
                bytes.append(UInt8(scalar.value - escapeBase))
            } else {
                bytes.append(contentsOf: String(scalar).utf8)
            }
        }
        return bytes
    }

    /// Runs `body` with the NUL-terminated bytes `text` names (for system calls).
    public static func withCString<R>(_ text: String, _ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
        var bytes = encode(text)
        bytes.append(0)
        return try bytes.withUnsafeBufferPointer { raw in
            try raw.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) }
        }
    }

    private static func containsEscapeRange<C: Collection<UInt8>>(_ bytes: C) -> Bool where C.Index == Int {
        var index = bytes.startIndex
        while index + 2 < bytes.endIndex {
            if bytes[index] == 0xF4, bytes[index + 1] == 0x8F, bytes[index + 2] >= 0xBC { return true }
            index += 1
        }
        return false
    }
}
