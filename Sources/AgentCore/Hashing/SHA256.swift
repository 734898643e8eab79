/// SHA-256 (FIPS 180-4), incremental. The file API hashes contents with it for
/// compare-and-swap, and tool calls hash their inputs; a small implementation here keeps a
/// second copy of BoringSSL out of the build.
public struct SHA256: Sendable {
    private static let k: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ]

    private var h: [UInt32] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]
    private var pending: [UInt8] = []
    private var length: UInt64 = 0

    public init() {
        pending.reserveCapacity(64)
    }

    public mutating func update(_ bytes: some Sequence<UInt8>) {
        for byte in bytes {
            pending.append(byte)
            length += 1
            if pending.count == 64 {
                pending.withUnsafeBytes { compress($0) }
                pending.removeAll(keepingCapacity: true)
            }
        }
    }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var index = 0
        // Top up a partial block, then whole blocks straight from the buffer.
        while !pending.isEmpty, index < bytes.count {
            update(CollectionOfOne(bytes[index]))
            index += 1
        }
        while bytes.count - index >= 64 {
            compress(UnsafeRawBufferPointer(rebasing: bytes[index..<(index + 64)]))
            index += 64
            length += 64
        }
        update(bytes[index...])
    }

    /// The digest (the value is spent: further updates start from a finished state).
    public mutating func finalize() -> [UInt8] {
        let bits = length &* 8
        update([0x80])
        while pending.count != 56 { update([0]) }
        for shift in stride(from: 56, through: 0, by: -8) { pending.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        pending.withUnsafeBytes { compress($0) }
        pending.removeAll()
        return h.flatMap { word in [UInt8(word >> 24), UInt8(truncatingIfNeeded: word >> 16), UInt8(truncatingIfNeeded: word >> 8), UInt8(truncatingIfNeeded: word)] }
    }

    /// The digest of `bytes` in lowercase hex.
    public static func hex(_ bytes: some Sequence<UInt8>) -> String {
        var hasher = SHA256()
        // Contiguous bytes go block by block, not byte by byte.
        let done: Void? = bytes.withContiguousStorageIfAvailable { buffer in
            hasher.update(UnsafeRawBufferPointer(buffer))
        }
        if done == nil { hasher.update(bytes) }
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

    private mutating func compress(_ block: UnsafeRawBufferPointer) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
            for t in 0..<16 {
                w[t] = UInt32(block[t * 4]) << 24 | UInt32(block[t * 4 + 1]) << 16 | UInt32(block[t * 4 + 2]) << 8 | UInt32(block[t * 4 + 3])
            }
            for t in 16..<64 {
                let s0 = w[t - 15].rotatedRight(7) ^ w[t - 15].rotatedRight(18) ^ (w[t - 15] >> 3)
                let s1 = w[t - 2].rotatedRight(17) ^ w[t - 2].rotatedRight(19) ^ (w[t - 2] >> 10)
                w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
            }
            rounds(w)
        }
    }

    private mutating func rounds(_ w: UnsafeMutableBufferPointer<UInt32>) {
        var (a, b, c, d, e, f, g, hh) = (h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7])
        for t in 0..<64 {
            let s1 = e.rotatedRight(6) ^ e.rotatedRight(11) ^ e.rotatedRight(25)
            let ch = (e & f) ^ (~e & g)
            let t1 = hh &+ s1 &+ ch &+ Self.k[t] &+ w[t]
            let s0 = a.rotatedRight(2) ^ a.rotatedRight(13) ^ a.rotatedRight(22)
            let maj = (a & b) ^ (a & c) ^ (b & c)
            let t2 = s0 &+ maj
            (hh, g, f, e, d, c, b, a) = (g, f, e, d &+ t1, c, b, a, t1 &+ t2)
        }
        h[0] &+= a; h[1] &+= b; h[2] &+= c; h[3] &+= d; h[4] &+= e; h[5] &+= f; h[6] &+= g; h[7] &+= hh
    }
}

extension UInt32 {
    @inline(__always) func rotatedRight(_ n: UInt32) -> UInt32 { (self >> n) | (self << (32 - n)) }
    @inline(__always) func rotatedLeft(_ n: UInt32) -> UInt32 { (self << n) | (self >> (32 - n)) }
}
