/// The receive-side replay filter of one session (RFC 6479 style, as wireguard-go's
/// replay.Filter): a ring of 128 64-bit blocks; counters more than 8128 behind the highest
/// seen are rejected, as is any counter seen before. Fixed size: 1 KiB per session.
struct ReplayWindow: Sendable {
    static let blockBits = 64
    static let ringBlocks = 128
    static let windowSize = (ringBlocks - 1) * blockBits  // 8128

    private var last: UInt64 = 0
    private var ring: [UInt64] = [UInt64](repeating: 0, count: ReplayWindow.ringBlocks)

    /// Clears the window (a new session).
    mutating func reset() {
        last = 0
        for i in ring.indices { ring[i] = 0 }
    }

    /// True (and records it) when `counter` is new and within the window; call only after the
    /// packet authenticated. Counters at or beyond `limit` are refused.
    mutating func accept(_ counter: UInt64, limit: UInt64) -> Bool {
        guard counter < limit else { return false }
        let indexBlock = counter >> 6
        if counter > last {
            let current = last >> 6
            let diff = min(indexBlock - current, UInt64(ReplayWindow.ringBlocks))
            var i: UInt64 = 1
            while i <= diff {
                ring[Int((current + i) % UInt64(ReplayWindow.ringBlocks))] = 0
                i += 1
            }
            last = counter
        } else if last - counter > UInt64(ReplayWindow.windowSize) {
            return false
        }
        let slot = Int(indexBlock % UInt64(ReplayWindow.ringBlocks))
        let bit = UInt64(1) << (counter & 63)
        let old = ring[slot]
        ring[slot] = old | bit
        return old & bit == 0
    }
}
