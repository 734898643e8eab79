/// The Noise handshake in progress with one peer (wireguard-go's Handshake).
struct HandshakeState: Sendable {
    enum Phase: Sendable { case zeroed, initiationCreated, initiationConsumed, responseCreated, responseConsumed }

    var phase: Phase = .zeroed
    var chainKey = Key32()
    var hash = Key32()
    var localEphemeral = Key32()
    var remoteEphemeral = Key32()
    /// Our index for this handshake (0 when none is registered).
    var localIndex: UInt32 = 0
    var remoteIndex: UInt32 = 0

    mutating func zeroize() {
        chainKey.zeroize()
        hash.zeroize()
        localEphemeral.zeroize()
        remoteEphemeral.zeroize()
        phase = .zeroed
    }
}

/// mac2 state toward one peer: the cookie from its last cookie reply, and the mac1 of the
/// last handshake message we sent it (the reply's associated data).
struct CookieState: Sendable {
    var cookie: (UInt64, UInt64)?
    var cookieReceived = WireGuardInstant.zero
    var lastMAC1: (UInt64, UInt64)?

    /// The cookie while it is fresh (120 s).
    func freshCookie(now: WireGuardInstant) -> (UInt64, UInt64)? {
        guard let cookie, now.since(cookieReceived) < WireGuardTimers.cookieRefreshTime else { return nil }
        return cookie
    }
}
