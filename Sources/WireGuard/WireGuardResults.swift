/// What `WireGuardDevice.receive` did with a message.
public enum WireGuardReceiveResult: Equatable, Sendable {
    /// A valid initiation from the peer: the response went to the sink.
    case initiationAnswered(WireGuardPublicKey)
    /// Our initiation was answered: a session is up (a keepalive or queued packets went out).
    case handshakeCompleted(WireGuardPublicKey)
    /// A cookie reply was accepted (the next initiation carries mac2).
    case cookieAccepted(WireGuardPublicKey)
    /// A data packet of `length` bytes went to the sink.
    case packet(WireGuardPublicKey, length: Int)
    /// A keepalive (empty transport message) arrived.
    case keepalive(WireGuardPublicKey)
    /// The message was dropped (and counted).
    case dropped(WireGuardDropReason)
}

/// What `WireGuardDevice.send` did with an outbound IP packet.
public enum WireGuardSendResult: Equatable, Sendable {
    /// Encrypted and handed to the sink for this peer.
    case sent(WireGuardPublicKey)
    /// Waiting for a handshake with this peer (an initiation went out if none was recent).
    case queued(WireGuardPublicKey)
    /// Dropped (and counted).
    case dropped(WireGuardDropReason)
}

/// A refused peer configuration.
public enum WireGuardConfigurationError: Error, Equatable, Sendable {
    /// The device holds `maximumPeers` already.
    case tooManyPeers(limit: Int)
    /// More allowed IPs than `maximumAllowedIPsPerPeer`.
    case tooManyAllowedIPs(limit: Int)
    /// The peer's key is our own.
    case ownKey
}
