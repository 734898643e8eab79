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
