import CTailnetCrypto

/// A WireGuard (X25519) private key. X25519 clamps the scalar when it is used (libsodium does,
/// as RFC 7748 says), so any 32 bytes are a valid key.
public struct WireGuardPrivateKey: Sendable, CustomStringConvertible {
    /// The 32 bytes.
    public let raw: Key32
    /// The matching public key.
    public let publicKey: WireGuardPublicKey

    /// A key from its 32 bytes; nil when they are not 32 or give no public key.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 32, let raw = Key32(bytes), let pub = NoiseCrypto.publicKey(of: raw) else { return nil }
        self.raw = raw
        self.publicKey = WireGuardPublicKey(pub)
    }

    /// Names the public half only: the private bytes never reach a log.
    public var description: String { "WireGuardPrivateKey(\(publicKey))" }

    /// A fresh random key from the system CSPRNG.
    public static func generate() -> WireGuardPrivateKey {
        // Bounded: a random scalar gives a public key on the first try (the loop guards
        // only against a failing library).
        for _ in 0..<8 {
            var raw = Key32()
            raw.withUnsafeMutableBytes { tc_random($0.baseAddress!.assumingMemoryBound(to: UInt8.self), 32) }
            if let key = WireGuardPrivateKey(bytes: raw.bytes) { return key }
        }
        fatalError("X25519 failed eight times: libsodium is unusable")
    }
}
