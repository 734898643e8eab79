import CAgentSpawn

/// SHA-256 (FIPS 180-4), incremental. The file API hashes contents with it for
/// compare-and-swap, and tool calls hash their inputs; a small implementation here keeps a
/// second copy of BoringSSL out of the build. Blocks are compressed in C
/// (`agent_sha256.c`), with the CPU's SHA extensions where it has them.
public struct SHA256: Sendable {
    private var h: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) =
        (0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19)
    private var pending: [UInt8] = []
    private var length: UInt64 = 0
    private let portable: Bool

    /// `portable` forces the portable compression (tests compare it with the CPU's).
    public init(portable: Bool = false) {
        self.portable = portable
        pending.reserveCapacity(64)
    }

    /// True when this machine's CPU hashes with its SHA extensions.
    public static var isAccelerated: Bool { agent_sha256_accelerated() != 0 }

    public mutating func update(_ bytes: some Sequence<UInt8>) {
        let done: Void? = bytes.withContiguousStorageIfAvailable { buffer in update(UnsafeRawBufferPointer(buffer)) }
        guard done == nil else { return }
        for byte in bytes {
            pending.append(byte)
            length += 1
            if pending.count == 64 {
                pending.withUnsafeBytes { compress($0.baseAddress!, blocks: 1) }
                pending.removeAll(keepingCapacity: true)
            }
        }
    }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        var index = 0
        // Top up a partial block, then every whole block in one call, then the rest.
        if !pending.isEmpty {
            let take = min(64 - pending.count, bytes.count)
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[0..<take]))
            index = take
            length += UInt64(take)
            guard pending.count == 64 else { return }
            pending.withUnsafeBytes { compress($0.baseAddress!, blocks: 1) }
            pending.removeAll(keepingCapacity: true)
        }
        let blocks = (bytes.count - index) / 64
        if blocks > 0 {
            compress(base + index, blocks: blocks)
            index += blocks * 64
            length += UInt64(blocks * 64)
        }
        if index < bytes.count {
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index...]))
            length += UInt64(bytes.count - index)
        }
    }

    /// The digest (the value is spent: further updates start from a finished state).
    public mutating func finalize() -> [UInt8] {
        let bits = length &* 8
        var tail = pending
        tail.append(0x80)
        while tail.count % 64 != 56 { tail.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        tail.withUnsafeBytes { compress($0.baseAddress!, blocks: $0.count / 64) }
        pending.removeAll()
        let words = [h.0, h.1, h.2, h.3, h.4, h.5, h.6, h.7]
        return words.flatMap { word in [UInt8(word >> 24), UInt8(truncatingIfNeeded: word >> 16), UInt8(truncatingIfNeeded: word >> 8), UInt8(truncatingIfNeeded: word)] }
    }

    /// The digest of `bytes` in lowercase hex.
    public static func hex(_ bytes: some Sequence<UInt8>) -> String {
        var hasher = SHA256()
        hasher.update(bytes)
        return hexString(hasher.finalize())
    }

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

    private mutating func compress(_ data: UnsafeRawPointer, blocks: Int) {
        let portable = portable
        withUnsafeMutableBytes(of: &h) { raw in
            let state = raw.baseAddress!.assumingMemoryBound(to: UInt32.self)
            if portable {
                agent_sha256_blocks_portable(state, data, blocks)
            } else {
                agent_sha256_blocks(state, data, blocks)
            }
        }
    }
}

extension UInt32 {
    @inline(__always) func rotatedLeft(_ n: UInt32) -> UInt32 { (self << n) | (self >> (32 - n)) }
}
