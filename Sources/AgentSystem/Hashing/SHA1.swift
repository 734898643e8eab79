import CAgentDigest

/// SHA-1 from libcrypto, for protocols that name it: the WebSocket handshake's
/// `Sec-WebSocket-Accept` and name-based UUIDs (version 5). Not for anything that needs
/// collision resistance.
public enum SHA1 {
    /// The 20-byte digest of `bytes`.
    public static func hash(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        DigestContext.once(kind: Int32(AGENT_DIGEST_SHA1), bytes)
    }
}

/// A version-5 (name-based, SHA-1) UUID in lowercase text form (RFC 9562).
public func uuidV5(namespace: [UInt8], name: [UInt8]) -> String {
    var digest = Array(SHA1.hash(namespace + name).prefix(16))
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    let hex = SHA256.hexString(digest)
    let parts = [hex.prefix(8), hex.dropFirst(8).prefix(4), hex.dropFirst(12).prefix(4), hex.dropFirst(16).prefix(4), hex.dropFirst(20)]
    return parts.joined(separator: "-")
}
