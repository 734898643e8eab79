import CTailnetCrypto

/// A 32-byte X25519 private key (a node key or a disco key) with its public half.
///
/// The bytes are kept as given (X25519 clamps when it uses them, RFC 7748).
public struct X25519PrivateKey: Sendable {
    /// The raw 32 bytes (never logged).
    public let bytes: [UInt8]
    /// The matching public key.
    public let publicKey: X25519PublicKey

    /// A key from exactly 32 bytes; nil for any other length or when libsodium fails.
    public init?(_ bytes: some Collection<UInt8>) {
        guard bytes.count == X25519PublicKey.length, CryptoSetup.ready else { return nil }
        let raw = Array(bytes)
        var pub = [UInt8](repeating: 0, count: X25519PublicKey.length)
        guard tc_x25519_public(&pub, raw) == 0, let key = X25519PublicKey(pub) else { return nil }
        self.bytes = raw
        self.publicKey = key
    }

    /// A fresh random key from the system CSPRNG.
    public static func generate() -> X25519PrivateKey {
        // Bounded: a random key fails only when libsodium cannot start, which is fatal.
        guard let key = X25519PrivateKey(CryptoSetup.random(count: X25519PublicKey.length)) else {
            fatalError("libsodium could not be initialised")
        }
        return key
    }
}

/// libsodium's one-time setup and random bytes.
enum CryptoSetup {
    /// True once `tc_init` succeeded (evaluated once, thread-safe).
    static let ready: Bool = tc_init() == 0

    /// `count` bytes from the system CSPRNG.
    static func random(count: Int) -> [UInt8] {
        _ = ready
        var out = [UInt8](repeating: 0, count: count)
        tc_random(&out, count)
        return out
    }
}
