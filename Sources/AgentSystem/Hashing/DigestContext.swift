import CAgentDigest

/// One libcrypto digest context, owned by exactly one `SHA256` (or shared by copies of
/// one until either updates, which copies it first: copy on write).
final class DigestContext: @unchecked Sendable {
    // @unchecked: `pointer` is mutated only by `SHA256`'s mutating methods, and only after
    // `isKnownUniquelyReferenced` said no other value holds this context; a shared context
    // is only read (copied), which libcrypto allows from several threads.
    let pointer: OpaquePointer
    let kind: Int32

    init(kind: Int32) {
        guard let pointer = agent_digest_new(kind) else { fatalError("libcrypto: no digest context (out of memory)") }
        self.pointer = pointer
        self.kind = kind
    }

    private init(copying other: DigestContext) {
        guard let pointer = agent_digest_copy(other.pointer) else { fatalError("libcrypto: no digest context (out of memory)") }
        self.pointer = pointer
        self.kind = other.kind
    }

    func copy() -> DigestContext { DigestContext(copying: self) }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        guard agent_digest_update(pointer, base, bytes.count) == 1 else { fatalError("libcrypto: digest update failed") }
    }

    /// The digest; the context starts again, empty.
    func finalize() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 64)
        let length = out.withUnsafeMutableBufferPointer { agent_digest_final(pointer, $0.baseAddress) }
        guard length > 0 else { fatalError("libcrypto: digest final failed") }
        out.removeLast(out.count - Int(length))
        return out
    }

    deinit { agent_digest_free(pointer) }

    /// The digest of `bytes` in one call.
    static func once(kind: Int32, _ bytes: some Sequence<UInt8>) -> [UInt8] {
        let result = bytes.withContiguousStorageIfAvailable { once(kind: kind, UnsafeRawBufferPointer($0)) }
        return result ?? Array(bytes).withUnsafeBytes { once(kind: kind, $0) }
    }

    static func once(kind: Int32, _ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 64)
        let length = out.withUnsafeMutableBufferPointer { agent_digest_once(kind, bytes.baseAddress, bytes.count, $0.baseAddress) }
        guard length > 0 else { fatalError("libcrypto: digest failed") }
        out.removeLast(out.count - Int(length))
        return out
    }
}
