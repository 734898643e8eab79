#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 (4 bytes) or IPv6 (16 bytes) address parsed from text; an IPv4-mapped IPv6
/// address is kept as its IPv4 form, so the two compare equal as Go's `net.IP.Equal` does.
struct IPAddressBytes: Sendable, Hashable {
    let bytes: [UInt8]

    private init(bytes: [UInt8], normalized: Void) {
        self.bytes = bytes
    }

    /// An address's 4 or 16 bytes in network order (a certificate's IP name); nil for any
    /// other length.
    init?(bytes: [UInt8]) {
        let mapped: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]
        switch bytes.count {
        case 4: self.bytes = bytes
        case 16: self.bytes = Array(bytes.prefix(12)) == mapped ? Array(bytes.suffix(4)) : bytes
        default: return nil
        }
    }

    /// nil for text that is not an address (a name, a zone, an empty string).
    init?(_ text: String) {
        // Raw bytes rather than `in_addr`: the type is declared by two C modules here.
        var buffer = [UInt8](repeating: 0, count: 16)
        if buffer.withUnsafeMutableBytes({ inet_pton(AF_INET, text, $0.baseAddress) }) == 1 {
            self.init(bytes: Array(buffer.prefix(4)))
            return
        }
        guard buffer.withUnsafeMutableBytes({ inet_pton(AF_INET6, text, $0.baseAddress) }) == 1 else { return nil }
        self.init(bytes: buffer)
    }

    /// 127.0.0.0/8 or ::1.
    var isLoopback: Bool {
        bytes.count == 4 ? bytes[0] == 127 : bytes == [UInt8](repeating: 0, count: 15) + [1]
    }

    /// The first `bits` bits kept, the rest zero.
    func masked(_ bits: Int) -> IPAddressBytes {
        var out = bytes
        for index in out.indices {
            let keep = min(8, max(0, bits - index * 8))
            out[index] &= keep == 0 ? 0 : ~UInt8(0) << (8 - keep)
        }
        return IPAddressBytes(bytes: out, normalized: ())
    }
}
