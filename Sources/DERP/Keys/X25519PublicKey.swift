/// A 32-byte X25519 public key: a node key (the DERP identity and WireGuard static key) or
/// a disco key.
public struct X25519PublicKey: Hashable, Sendable, CustomStringConvertible {
    /// Length of every key in bytes.
    public static let length = 32

    /// The raw 32 bytes.
    public let bytes: [UInt8]

    /// A key from exactly 32 bytes; nil for any other length.
    public init?(_ bytes: some Collection<UInt8>) {
        guard bytes.count == Self.length else { return nil }
        self.bytes = Array(bytes)
    }

    /// The key as 64 lowercase hex digits (DERP's `Derp-Public-Key` header, disco text).
    public var hex: String { Hex.encode(bytes) }

    /// A short form for logs: the first 8 hex digits.
    public var description: String { String(hex.prefix(8)) }

    /// The key from 64 hex digits (either case); nil otherwise.
    public init?(hex text: some StringProtocol) {
        guard let bytes = Hex.decode(text), bytes.count == Self.length else { return nil }
        self.bytes = bytes
    }
}
