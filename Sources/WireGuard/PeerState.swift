/// Everything the device holds for one peer: its configuration and the values derived from
/// its key once, the handshake in progress, its sessions, timers and the packets waiting
/// for a handshake (at most `queueLimit`).
struct PeerState: Sendable {
    var configuration: WireGuardPeerConfiguration
    var key: WireGuardPublicKey { configuration.publicKey }
    /// DH(our static, its static), nil for a low-order key (handshakes then fail).
    let staticStatic: Key32?
    /// HASH("mac1----" ‖ its key): mac1 of what we send it.
    let mac1Key: Key32
    /// HASH("cookie--" ‖ its key): opens its cookie replies.
    let cookieKey: Key32
    /// HASH(H0 ‖ its key): an initiator's starting hash toward it.
    let initiatorHash: Key32

    var handshake = HandshakeState()
    var cookie = CookieState()
    var keypairs = Keypairs()
    var timers = PeerTimers()
    /// Initiations taken on from this peer's own authenticated source.
    var initiationBudget = HandshakeBudget.perPeer
    /// Packets waiting for a session, oldest first; at most the device's queue limit.
    var queue: [[UInt8]] = []

    var lastTimestampReceived: TAI64N?
    var lastInitiationConsumed: WireGuardInstant?
    var lastTimestampSent: TAI64N?
    var lastHandshakeSent: WireGuardInstant?
    var lastHandshake: WireGuardInstant?
    var receivedBytes: UInt64 = 0
    var sentBytes: UInt64 = 0

    init(configuration: WireGuardPeerConfiguration, privateKey: WireGuardPrivateKey) {
        self.configuration = configuration
        let pub = configuration.publicKey.raw
        staticStatic = NoiseCrypto.dh(privateKey.raw, pub)
        mac1Key = NoiseCrypto.hash(NoiseCrypto.labelMAC1, pub.bytes)
        cookieKey = NoiseCrypto.hash(NoiseCrypto.labelCookie, pub.bytes)
        initiatorHash = NoiseCrypto.mixHash(NoiseCrypto.initialHash, pub)
    }

    /// True when the current session may send.
    func canSend(now: WireGuardInstant) -> Bool {
        keypairs.current?.canSend(now: now) ?? false
    }

    var status: WireGuardPeerStatus {
        WireGuardPeerStatus(
            lastHandshake: lastHandshake, lastInitiationTimestamp: lastTimestampReceived,
            hasSendableSession: keypairs.current != nil, queuedPackets: queue.count,
            receivedBytes: receivedBytes, sentBytes: sentBytes)
    }

    /// Adds a packet to the queue, dropping the oldest beyond `limit`.
    mutating func stage(_ packet: UnsafeRawBufferPointer, limit: Int, counters: inout WireGuardCounters) {
        // Bounded: the queue never exceeds `limit` (one removal per insertion at most).
        while queue.count >= max(limit, 1) {
            queue.removeFirst()
            counters.drop(.queueFull)
        }
        queue.append(Array(packet))
    }

    /// Drops every waiting packet (counted as handshake timeouts).
    mutating func flushQueue(counters: inout WireGuardCounters) {
        for _ in queue { counters.drop(.handshakeTimeout) }
        queue.removeAll()
    }

    /// Zeroes and forgets every session and the handshake (wireguard-go's ZeroAndFlushAll).
    mutating func zeroAndFlushAll(ctx: inout DeviceContext) {
        for index in keypairs.indices { ctx.releaseIndex(index) }
        keypairs.previous?.zeroize()
        keypairs.current?.zeroize()
        keypairs.next?.zeroize()
        keypairs = Keypairs()
        ctx.releaseIndex(handshake.localIndex)
        handshake.zeroize()
        handshake = HandshakeState()
        flushQueue(counters: &ctx.counters)
    }

    /// Releases everything registered in the device (the peer is being removed).
    mutating func release(ctx: inout DeviceContext) {
        zeroAndFlushAll(ctx: &ctx)
    }
}
