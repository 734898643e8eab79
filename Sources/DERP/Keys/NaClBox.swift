import CTailnetCrypto

/// NaCl's box (X25519 + XSalsa20-Poly1305, the 16-byte tag first), as Go's
/// `golang.org/x/crypto/nacl/box`: DERP's ClientInfo and ServerInfo, and disco messages.
public enum NaClBox {
    /// The nonce's length.
    public static let nonceLength = 24
    /// What sealing adds: the Poly1305 tag.
    public static let overhead = 16

    /// A fresh random nonce.
    public static func randomNonce() -> [UInt8] { CryptoSetup.random(count: nonceLength) }

    /// Seals `plain` from `sender` to `recipient` under `nonce` (24 bytes).
    public static func seal(
        _ plain: some Collection<UInt8>, nonce: [UInt8], to recipient: X25519PublicKey, from sender: X25519PrivateKey
    ) -> [UInt8]? {
        guard nonce.count == nonceLength, CryptoSetup.ready else { return nil }
        let input = Array(plain)
        var out = [UInt8](repeating: 0, count: input.count + overhead)
        let rc = tc_box_seal(&out, input, input.count, nonce, recipient.bytes, sender.bytes)
        return rc == 0 ? out : nil
    }

    /// Opens `sealed` (tag first) from `sender` to `recipient`; nil for a bad tag, a short
    /// box or a bad key.
    public static func open(
        _ sealed: some Collection<UInt8>, nonce: some Collection<UInt8>, from sender: X25519PublicKey, to recipient: X25519PrivateKey
    ) -> [UInt8]? {
        guard nonce.count == nonceLength, sealed.count >= overhead, CryptoSetup.ready else { return nil }
        let input = Array(sealed)
        let nonceBytes = Array(nonce)
        var out = [UInt8](repeating: 0, count: input.count - overhead)
        let rc = tc_box_open(&out, input, input.count, nonceBytes, sender.bytes, recipient.bytes)
        return rc == 0 ? out : nil
    }

    /// The precomputed key of a box between `ours` and `theirs` (the same both ways).
    public static func sharedKey(_ theirs: X25519PublicKey, _ ours: X25519PrivateKey) -> SharedKey? {
        guard CryptoSetup.ready else { return nil }
        var key = [UInt8](repeating: 0, count: 32)
        return tc_box_beforenm(&key, theirs.bytes, ours.bytes) == 0 ? SharedKey(bytes: key) : nil
    }

    /// A box's precomputed key.
    public struct SharedKey: Sendable, Equatable {
        let bytes: [UInt8]

        /// Seals `plain` under `nonce` (24 bytes).
        public func seal(_ plain: some Collection<UInt8>, nonce: [UInt8]) -> [UInt8]? {
            guard nonce.count == NaClBox.nonceLength else { return nil }
            let input = Array(plain)
            var out = [UInt8](repeating: 0, count: input.count + NaClBox.overhead)
            return tc_box_seal_shared(&out, input, input.count, nonce, bytes) == 0 ? out : nil
        }

        /// Opens `sealed` (tag first); nil for a bad tag or a short box.
        public func open(_ sealed: some Collection<UInt8>, nonce: some Collection<UInt8>) -> [UInt8]? {
            guard nonce.count == NaClBox.nonceLength, sealed.count >= NaClBox.overhead else { return nil }
            let input = Array(sealed)
            let nonceBytes = Array(nonce)
            var out = [UInt8](repeating: 0, count: input.count - NaClBox.overhead)
            return tc_box_open_shared(&out, input, input.count, nonceBytes, bytes) == 0 ? out : nil
        }
    }
}
