/// Mutations of fuzz inputs for the suite's replay, from a seeded generator so a run is the
/// same every time: bit flips, byte changes, interesting values, insertions, deletions,
/// duplicated runs and splices with another seed (libFuzzer's common mutations, without its
/// coverage feedback). Inputs stay within `maxLength`, as `-max_len` keeps libFuzzer's.
struct FuzzMutator {
    private var state: UInt64
    let maxLength: Int

    init(seed: String, maxLength: Int = 8192) {
        // FNV-1a of the name: each target its own stream.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in seed.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        state = hash
        self.maxLength = maxLength
    }

    /// SplitMix64.
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    mutating func below(_ bound: Int) -> Int { bound <= 1 ? 0 : Int(next() % UInt64(bound)) }

    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) } }

    /// `input` with one to four mutations; `others` are splice partners.
    mutating func mutate(_ input: [UInt8], others: [[UInt8]]) -> [UInt8] {
        var out = input
        for _ in 0...below(4) { mutateOnce(&out, others: others) }
        return out.count > maxLength ? Array(out.prefix(maxLength)) : out
    }

    private static let interesting: [UInt8] = [0, 1, 0x7f, 0x80, 0xff, 0x0a, 0x0d, 0x22, 0x5c, 0x7b, 0x7d, 0x25]

    private mutating func mutateOnce(_ out: inout [UInt8], others: [[UInt8]]) {
        if out.isEmpty {
            out = bytes(1 + below(64))
            return
        }
        switch below(9) {
        case 0: out[below(out.count)] ^= 1 << UInt8(below(8))
        case 1: out[below(out.count)] = UInt8(truncatingIfNeeded: next())
        case 2: out[below(out.count)] = Self.interesting[below(Self.interesting.count)]
        case 3: out.insert(contentsOf: bytes(1 + below(16)), at: below(out.count + 1))
        case 4:
            let start = below(out.count)
            out.removeSubrange(start..<min(out.count, start + 1 + below(16)))
        case 5:
            let start = below(out.count)
            let run = out[start..<min(out.count, start + 1 + below(32))]
            out.insert(contentsOf: run, at: below(out.count + 1))
        case 6: out.removeLast(below(out.count))
        case 7:
            // A little-endian number near a boundary, as length fields are read.
            let value: UInt16 = [0, 1, 0xff, 0x100, 0x7fff, 0x8000, 0xffff][below(7)]
            let at = below(out.count)
            out[at] = UInt8(truncatingIfNeeded: value)
            if at + 1 < out.count { out[at + 1] = UInt8(truncatingIfNeeded: value >> 8) }
        default:
            guard let other = others.isEmpty ? nil : others[below(others.count)], !other.isEmpty else { return }
            let cut = below(out.count + 1)
            let from = below(other.count)
            out = Array(out[..<cut]) + other[from...]
        }
    }
}
