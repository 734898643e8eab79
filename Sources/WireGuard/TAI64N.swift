/// A TAI64N timestamp (12 bytes, big-endian): 8 bytes of 2^62 + 10 + Unix seconds, 4 bytes of
/// nanoseconds. Initiators clear the low 24 bits of the nanoseconds as wireguard-go does
/// (whitening: the exact send time is not revealed). Ordered as the bytes are.
public struct TAI64N: Comparable, Hashable, Sendable {
    /// The seconds word (with the TAI64 base).
    public var seconds: UInt64
    /// The nanoseconds word.
    public var nanoseconds: UInt32

    static let base: UInt64 = 0x4000_0000_0000_000a
    static let whitenerMask: UInt32 = 0x00ff_ffff

    /// The timestamp for `unixNanoseconds` since the Unix epoch, whitened.
    public init(unixNanoseconds: UInt64) {
        seconds = TAI64N.base &+ unixNanoseconds / 1_000_000_000
        nanoseconds = UInt32(unixNanoseconds % 1_000_000_000) & ~TAI64N.whitenerMask
    }

    /// Reads the 12 bytes; nil when fewer.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count >= 12 else { return nil }
        let b = Array(bytes.prefix(12))
        seconds = b[0..<8].reduce(0) { $0 << 8 | UInt64($1) }
        nanoseconds = b[8..<12].reduce(0) { $0 << 8 | UInt32($1) }
    }

    init(seconds: UInt64, nanoseconds: UInt32) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    /// Unix seconds (the TAI64 base removed).
    public var unixSeconds: Int64 { Int64(bitPattern: seconds &- TAI64N.base) }

    /// The 12 bytes.
    public var bytes: [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: seconds >> (56 - 8 * UInt64($0))) }
            + (0..<4).map { UInt8(truncatingIfNeeded: nanoseconds >> (24 - 8 * UInt32($0))) }
    }

    /// The smallest whitened timestamp after this one (one whitening step later).
    func nextStep() -> TAI64N {
        let step = TAI64N.whitenerMask + 1
        let ns = UInt64(nanoseconds) + UInt64(step)
        if ns >= 1_000_000_000 { return TAI64N(seconds: seconds &+ 1, nanoseconds: 0) }
        return TAI64N(seconds: seconds, nanoseconds: UInt32(ns))
    }

    /// Earlier in time (byte order).
    public static func < (lhs: TAI64N, rhs: TAI64N) -> Bool {
        (lhs.seconds, lhs.nanoseconds) < (rhs.seconds, rhs.nanoseconds)
    }
}
