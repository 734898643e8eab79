/// A WireGuard (X25519) public key: a peer's identity and, in the tailnet, its node key.
public struct WireGuardPublicKey: Hashable, Sendable, CustomStringConvertible {
    /// The 32 bytes.
    public let raw: Key32

    /// A key from its 32 bytes.
    public init(_ raw: Key32) { self.raw = raw }

    /// A key from exactly 32 bytes; nil otherwise.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 32, let raw = Key32(bytes) else { return nil }
        self.raw = raw
    }

    /// The 32 bytes.
    public var bytes: [UInt8] { raw.bytes }

    /// The first 8 hex digits, for logs.
    public var description: String { "wgkey:" + String(raw.hex.prefix(8)) }
}
