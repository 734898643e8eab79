/// The 32-byte `cursor` file of a spool: `[magic, dropped, end, check]`, four little-endian
/// UInt64s. It is rewritten with one `pwrite` at offset 0 after every append, after the
/// data `pwrite`s, so after a SIGKILL (page cache intact) it describes exactly the bytes of
/// the last completed append. `check` lets `restore` reject a garbage/torn file.
struct SpoolCursor: Equatable {
    static let size = 32
    static let magic: UInt64 = 0x3130_5253_5543_5053  // "SPCURS01" little-endian
    var dropped: UInt64
    var end: UInt64

    static func checksum(_ dropped: UInt64, _ end: UInt64) -> UInt64 {
        // FNV-1a over the three words; enough to reject garbage, not an integrity MAC.
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for word in [magic, dropped, end] {
            var w = word
            for _ in 0..<8 {
                h = (h ^ (w & 0xff)) &* 0x0000_0100_0000_01b3
                w >>= 8
            }
        }
        return h
    }

    /// Writes the cursor over the start of `fd` (one `pwrite`); false if it failed.
    func write(to fd: Int32) -> Bool {
        encoded().withUnsafeBytes { Posix.pwriteAll(fd, $0.baseAddress!, $0.count, 0) }
    }

    /// Encodes into exactly `size` bytes.
    func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Self.size)
        for word in [Self.magic, dropped, end, Self.checksum(dropped, end)] {
            var w = word
            for _ in 0..<8 {
                out.append(UInt8(truncatingIfNeeded: w))
                w >>= 8
            }
        }
        return out
    }

    /// Decodes; nil when too short, wrong magic, bad checksum or `dropped > end`.
    static func decode(_ bytes: [UInt8]) -> SpoolCursor? {
        guard bytes.count >= size else { return nil }
        func word(_ i: Int) -> UInt64 {
            var v: UInt64 = 0
            for b in (0..<8).reversed() { v = v << 8 | UInt64(bytes[i * 8 + b]) }
            return v
        }
        guard word(0) == magic else { return nil }
        let dropped = word(1), end = word(2)
        guard word(3) == checksum(dropped, end), dropped <= end else { return nil }
        return SpoolCursor(dropped: dropped, end: end)
    }
}
