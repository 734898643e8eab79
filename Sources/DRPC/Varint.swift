/// Protobuf-style unsigned LEB128, as dRPC frame headers use.
public enum Varint {
    /// Longest encoding of a UInt64; an 11th byte is "varint too long".
    public static let maxLength = 10

    /// The outcome of decoding at an offset.
    public enum Decoded: Equatable, Sendable {
        case value(UInt64, length: Int)
        case needMoreBytes
        case tooLong
    }

    /// Appends the minimal encoding of `value`.
    public static func encode(_ value: UInt64, into out: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    /// The encoding of `value` on its own.
    public static func encoded(_ value: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        encode(value, into: &out)
        return out
    }

    /// Decodes the varint starting at `offset`.
    public static func decode(_ bytes: some RandomAccessCollection<UInt8>, at offset: Int) -> Decoded {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        var index = bytes.index(bytes.startIndex, offsetBy: offset)
        for length in 1...maxLength {
            guard index < bytes.endIndex else { return .needMoreBytes }
            let byte = bytes[index]
            if length == maxLength && byte > 1 { return .tooLong }  // would overflow 64 bits
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return .value(result, length: length) }
            shift += 7
            index = bytes.index(after: index)
        }
        return .tooLong
    }
}
