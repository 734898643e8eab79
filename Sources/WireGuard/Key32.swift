/// 32 bytes held inline (four words): keys, hashes and chaining values without a heap
/// allocation. Hashable and comparable by value; the byte order is the wire order.
public struct Key32: Hashable, Sendable {
    @usableFromInline var w0: UInt64 = 0
    @usableFromInline var w1: UInt64 = 0
    @usableFromInline var w2: UInt64 = 0
    @usableFromInline var w3: UInt64 = 0

    /// All zeros.
    public static let zero = Key32()

    /// Thirty-two zero bytes.
    public init() {}

    /// The first 32 bytes of `bytes`; nil when there are fewer.
    public init?(_ bytes: some Collection<UInt8>) {
        guard bytes.count >= 32 else { return nil }
        self.init()
        withUnsafeMutableBytes { raw in
            for (i, byte) in bytes.prefix(32).enumerated() { raw[i] = byte }
        }
    }

    /// Reads 32 bytes at `offset` of `raw` (the caller checked the length).
    init(reading raw: UnsafeRawBufferPointer, at offset: Int) {
        self.init()
        withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[offset..<offset + 32])) }
    }

    /// The bytes, in order.
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    /// True when every byte is zero.
    public var isZero: Bool { (w0 | w1 | w2 | w3) == 0 }

    /// Calls `body` with the 32 bytes.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var copy = self
        return try Swift.withUnsafeBytes(of: &copy) { try body(UnsafeRawBufferPointer(rebasing: $0[0..<32])) }
    }

    /// Calls `body` with the 32 bytes, writable.
    public mutating func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try Swift.withUnsafeMutableBytes(of: &self) { try body(UnsafeMutableRawBufferPointer(rebasing: $0[0..<32])) }
    }

    /// Overwrites the bytes with zeros.
    public mutating func zeroize() {
        withUnsafeMutableBytes { tc_zero_raw($0) }
    }

    /// Lowercase hexadecimal (64 characters).
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Parses 64 hexadecimal digits.
    public init?(hex: String) {
        let chars = Array(hex.utf8)
        guard chars.count == 64 else { return nil }
        var out = [UInt8](repeating: 0, count: 32)
        for i in 0..<32 {
            guard let high = Key32.nibble(chars[2 * i]), let low = Key32.nibble(chars[2 * i + 1]) else { return nil }
            out[i] = high << 4 | low
        }
        self.init(out)
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
