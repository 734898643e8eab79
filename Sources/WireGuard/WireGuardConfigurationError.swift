/// A refused peer configuration.
public enum WireGuardConfigurationError: Error, Equatable, Sendable {
    /// The device holds `maximumPeers` already.
    case tooManyPeers(limit: Int)
    /// More allowed IPs than `maximumAllowedIPsPerPeer`.
    case tooManyAllowedIPs(limit: Int)
    /// The peer's key is our own.
    case ownKey
}
