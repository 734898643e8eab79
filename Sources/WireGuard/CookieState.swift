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
