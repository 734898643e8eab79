/// WireGuard in userspace as a synchronous state machine: no threads, no sockets, no clock.
///
/// The owner (the tailnet module) drives it:
/// - a WireGuard message arrived from the network (DERP, UDP): `receive(_:now:into:)`;
///   decrypted IP packets go to the sink's `deliver`, answers (handshake responses,
///   keepalives, queued packets) to its `send`;
/// - the local stack has an IP packet to send: `send(_:now:into:)`; the encrypted message
///   (or a handshake initiation, while the packet waits) goes to the sink's `send`;
/// - time: `nextDeadline()` says when to call `tick(now:into:)` next (nil: no timer armed);
///   after any call the deadline may have changed.
/// `now` is the owner's monotonic clock; `WireGuardSink.send` names the peer (its public
/// key) to send to. Peers come and go with `setPeer` and `removePeer`.
///
/// Memory is bounded: at most `maximumPeers` peers, each with `maximumAllowedIPsPerPeer`
/// prefixes, at most 3 sessions (1 KiB replay window each), one handshake and `queueLimit`
/// waiting packets; one 64 KiB scratch buffer for every transport message.
public struct WireGuardDevice: Sendable {
    var context: DeviceContext
    var peers: [WireGuardPublicKey: PeerState] = [:]

    /// A device with no peers.
    public init(configuration: WireGuardConfiguration) {
        context = DeviceContext(configuration: configuration)
    }

    /// Our public key.
    public var publicKey: WireGuardPublicKey { context.privateKey.publicKey }

    /// The counters so far.
    public var counters: WireGuardCounters { context.counters }

    /// The configured peers' keys.
    public var peerKeys: [WireGuardPublicKey] { Array(peers.keys) }

    /// A peer's configuration.
    public func peer(_ key: WireGuardPublicKey) -> WireGuardPeerConfiguration? { peers[key]?.configuration }

    /// A peer's state for the owner.
    public func status(of key: WireGuardPublicKey) -> WireGuardPeerStatus? { peers[key]?.status }

    /// Adds a peer, or replaces an existing peer's allowed IPs and keepalive (its sessions
    /// stay).
    public mutating func setPeer(_ configuration: WireGuardPeerConfiguration) throws(WireGuardConfigurationError) {
        let key = configuration.publicKey
        guard key != publicKey else { throw .ownKey }
        guard configuration.allowedIPs.count <= context.configuration.maximumAllowedIPsPerPeer else {
            throw .tooManyAllowedIPs(limit: context.configuration.maximumAllowedIPsPerPeer)
        }
        if peers[key] != nil {
            peers[key]!.configuration = configuration
            if configuration.persistentKeepaliveSeconds == 0 { peers[key]!.timers.persistentKeepalive = nil }
        } else {
            guard peers.count < context.configuration.maximumPeers else {
                throw .tooManyPeers(limit: context.configuration.maximumPeers)
            }
            peers[key] = PeerState(configuration: configuration, privateKey: context.privateKey)
        }
        context.allowedIPs.remove(peer: key)
        context.allowedIPs.insert(configuration.allowedIPs, for: key)
    }

    /// Removes a peer with its sessions, handshake and waiting packets.
    public mutating func removePeer(_ key: WireGuardPublicKey) {
        guard peers[key] != nil else { return }
        peers[key]!.release(ctx: &context)
        peers[key] = nil
        context.allowedIPs.remove(peer: key)
    }

    /// Starts a handshake with `peer` now (unless one went out less than 5 s ago).
    public mutating func initiateHandshake<S: WireGuardSink>(with peer: WireGuardPublicKey, now: WireGuardInstant, into sink: inout S) {
        guard peers[peer] != nil else { return }
        peers[peer]!.sendInitiation(isRetry: false, now: now, ctx: &context, sink: &sink)
    }

    /// Sends a keepalive to `peer` now (or starts a handshake if it has no session).
    public mutating func sendKeepalive<S: WireGuardSink>(to peer: WireGuardPublicKey, now: WireGuardInstant, into sink: inout S) {
        guard peers[peer] != nil else { return }
        peers[peer]!.sendKeepalive(now: now, ctx: &context, sink: &sink)
    }

    /// Encrypts an outbound IP packet for the peer whose allowed IPs hold its destination.
    @discardableResult
    public mutating func send<S: WireGuardSink>(_ packet: UnsafeRawBufferPointer, now: WireGuardInstant, into sink: inout S) -> WireGuardSendResult {
        guard packet.count <= WireGuardMessage.maximumPacketSize, let view = IPPacketView(packet) else {
            context.counters.drop(.malformed)
            return .dropped(.malformed)
        }
        guard let key = context.allowedIPs.lookup(view.destination), peers[key] != nil else {
            context.counters.drop(.noRoute)
            return .dropped(.noRoute)
        }
        let trimmed = UnsafeRawBufferPointer(rebasing: packet[0..<view.totalLength])
        let sent = peers[key]!.send(trimmed, now: now, ctx: &context, sink: &sink)
        return sent ? .sent(key) : .queued(key)
    }

    /// Encrypts an outbound IP packet (array form of `send(_:now:into:)`).
    @discardableResult
    public mutating func send<S: WireGuardSink>(_ packet: [UInt8], now: WireGuardInstant, into sink: inout S) -> WireGuardSendResult {
        packet.withUnsafeBytes { send($0, now: now, into: &sink) }
    }

    /// Handles a WireGuard message from the network. `source` is the key the transport
    /// authenticated the sender as (a DERP sender, a disco-verified UDP address), nil when
    /// unknown: it picks the handshake budget an initiation is charged to.
    @discardableResult
    public mutating func receive<S: WireGuardSink>(
        _ datagram: [UInt8], from source: WireGuardPublicKey? = nil, now: WireGuardInstant, into sink: inout S
    ) -> WireGuardReceiveResult {
        datagram.withUnsafeBytes { receive($0, from: source, now: now, into: &sink) }
    }

    /// Handles a WireGuard message from the network (borrowed for the call).
    @discardableResult
    public mutating func receive<S: WireGuardSink>(
        _ datagram: UnsafeRawBufferPointer, from source: WireGuardPublicKey? = nil, now: WireGuardInstant,
        into sink: inout S
    ) -> WireGuardReceiveResult {
        guard datagram.count >= 4 else { return context.dropped(.malformed) }
        switch WireGuardMessage.readU32(datagram, 0) {
        case WireGuardMessage.transportType:
            guard datagram.count >= WireGuardMessage.Transport.minimumSize,
                datagram.count <= WireGuardMessage.maximumTransportSize
            else { return context.dropped(.malformed) }
            let index = WireGuardMessage.readU32(datagram, WireGuardMessage.Transport.receiver)
            guard let key = context.indices[index], peers[key] != nil else { return context.dropped(.noSession) }
            return peers[key]!.receiveTransport(datagram, index: index, now: now, ctx: &context, sink: &sink)
        case WireGuardMessage.initiationType:
            guard datagram.count == WireGuardMessage.Initiation.size else { return context.dropped(.malformed) }
            return receiveInitiation(datagram, from: source, now: now, sink: &sink)
        case WireGuardMessage.responseType:
            guard datagram.count == WireGuardMessage.Response.size else { return context.dropped(.malformed) }
            return receiveResponse(datagram, now: now, sink: &sink)
        case WireGuardMessage.cookieReplyType:
            guard datagram.count == WireGuardMessage.CookieReply.size else { return context.dropped(.malformed) }
            let index = WireGuardMessage.readU32(datagram, WireGuardMessage.CookieReply.receiver)
            guard let key = context.indices[index], peers[key] != nil else { return context.dropped(.noSession) }
            if let failure = peers[key]!.consumeCookieReply(datagram, now: now) {
                context.counters.fail(failure)
                return .dropped(.handshakeFailed)
            }
            context.counters.cookieRepliesAccepted &+= 1
            return .cookieAccepted(key)
        default:
            return context.dropped(.malformed)
        }
    }

    /// When `tick` should run next; nil when no timer is armed.
    public func nextDeadline() -> WireGuardInstant? {
        var best: WireGuardInstant?
        for peer in peers.values {
            if let deadline = peer.timers.earliest, best.map({ deadline < $0 }) ?? true { best = deadline }
        }
        return best
    }

    /// Fires every timer due at `now` (retries, keepalives, re-keys, key zeroing).
    public mutating func tick<S: WireGuardSink>(now: WireGuardInstant, into sink: inout S) {
        // The due peers first: iterating the table while changing it would copy it.
        var due: [WireGuardPublicKey] = []
        for (key, peer) in peers where peer.timers.earliest.map({ $0 <= now }) ?? false { due.append(key) }
        for key in due where peers[key] != nil {
            peers[key]!.tick(now: now, ctx: &context, sink: &sink)
        }
    }

    /// True when mac1 of a message we received is ours.
    func mac1Valid(_ message: UnsafeRawBufferPointer, at offset: Int) -> Bool {
        var expected: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &expected) { out in
            NoiseCrypto.mac(key: context.mac1Key, UnsafeRawBufferPointer(rebasing: message[0..<offset]), into: out)
        }
        let got = UnsafeRawBufferPointer(rebasing: message[offset..<offset + 16]).loadUnaligned(as: (UInt64, UInt64).self)
        return ((expected.0 ^ got.0) | (expected.1 ^ got.1)) == 0
    }
}
