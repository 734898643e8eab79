import CAgentDigest

/// SHA-256 (FIPS 180-4) from libcrypto, in one call (`hash`, `hex`) or incrementally
/// (`update`, `finalize`). The file API hashes contents with it for compare-and-swap, tool
/// calls hash their inputs, the chat context hashes its resources.
public struct SHA256: Sendable {
    private var context: DigestContext

    public init() {
        context = DigestContext(kind: Int32(AGENT_DIGEST_SHA256))
    }

    /// The 32-byte digest of `bytes`.
    public static func hash(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        DigestContext.once(kind: Int32(AGENT_DIGEST_SHA256), bytes)
    }

    public static func hash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        DigestContext.once(kind: Int32(AGENT_DIGEST_SHA256), bytes)
    }

    /// The digest of `bytes` in lowercase hex.
    public static func hex(_ bytes: some Sequence<UInt8>) -> String {
        hexString(hash(bytes))
    }

    public mutating func update(_ bytes: some Sequence<UInt8>) {
        let done: Void? = bytes.withContiguousStorageIfAvailable { update(UnsafeRawBufferPointer($0)) }
        if done == nil { Array(bytes).withUnsafeBytes { update($0) } }
    }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        if !isKnownUniquelyReferenced(&context) { context = context.copy() }
        context.update(bytes)
    }

    /// The digest of everything updated so far; the hasher starts again, empty.
    public mutating func finalize() -> [UInt8] {
        if !isKnownUniquelyReferenced(&context) { context = context.copy() }
        return context.finalize()
    }

    /// `digest` in lowercase hex.
    public static func hexString(_ digest: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(digest.count * 2)
        for byte in digest {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
