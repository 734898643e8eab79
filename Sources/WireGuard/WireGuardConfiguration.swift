#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The device's settings and bounds.
public struct WireGuardConfiguration: Sendable {
    /// Our static private key (the node key).
    public var privateKey: WireGuardPrivateKey
    /// The tunnel MTU: plaintext is padded to a multiple of 16 but not beyond it (tailscale: 1280).
    public var mtu: Int
    /// The most peers the device holds (adding more fails).
    public var maximumPeers: Int
    /// The most allowed-IP prefixes per peer.
    public var maximumAllowedIPsPerPeer: Int
    /// The most packets waiting for a handshake per peer; the oldest is dropped beyond it.
    public var queueLimit: Int
    /// Wall-clock time in nanoseconds since the Unix epoch, for initiation timestamps only
    /// (TAI64N). Sent timestamps are forced to increase even if this stands still.
    public var wallClock: @Sendable () -> UInt64

    /// Settings with tailscale's MTU and the default bounds (1024 peers, 64 prefixes per
    /// peer, 128 queued packets per peer) and the system's real-time clock.
    public init(
        privateKey: WireGuardPrivateKey, mtu: Int = 1280, maximumPeers: Int = 1024, maximumAllowedIPsPerPeer: Int = 64,
        queueLimit: Int = 128, wallClock: @escaping @Sendable () -> UInt64 = WireGuardConfiguration.systemWallClock
    ) {
        self.privateKey = privateKey
        self.mtu = mtu
        self.maximumPeers = maximumPeers
        self.maximumAllowedIPsPerPeer = maximumAllowedIPsPerPeer
        self.queueLimit = queueLimit
        self.wallClock = wallClock
    }

    /// CLOCK_REALTIME in nanoseconds.
    public static let systemWallClock: @Sendable () -> UInt64 = {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
