/// Received handshake messages.
extension WireGuardDevice {
    mutating func receiveInitiation<S: WireGuardSink>(
        _ m: UnsafeRawBufferPointer, from source: WireGuardPublicKey?, now: WireGuardInstant, sink: inout S
    ) -> WireGuardReceiveResult {
        guard mac1Valid(m, at: WireGuardMessage.Initiation.mac1) else { return context.dropped(.badMAC) }
        guard takeInitiationBudget(from: source, now: now) else { return context.dropped(.handshakeRateLimited) }
        let consumed: ConsumedInitiation
        switch consumeInitiation(m, now: now) {
        case .success(let value): consumed = value
        case .failure(.unknownKey): return context.dropped(.unknownKey)
        case .failure(.handshake(let failure)):
            context.counters.fail(failure)
            return .dropped(.handshakeFailed)
        }
        let key = consumed.peer
        peers[key]!.acceptInitiation(consumed, now: now)
        peers[key]!.anyAuthenticatedPacketTraversal(now: now)
        peers[key]!.timers.newHandshake = nil
        guard peers[key]!.sendResponse(now: now, ctx: &context, sink: &sink) else {
            context.counters.fail(.unexpected)
            return .dropped(.handshakeFailed)
        }
        return .initiationAnswered(key)
    }

    mutating func receiveResponse<S: WireGuardSink>(
        _ m: UnsafeRawBufferPointer, now: WireGuardInstant, sink: inout S
    ) -> WireGuardReceiveResult {
        guard mac1Valid(m, at: WireGuardMessage.Response.mac1) else { return context.dropped(.badMAC) }
        let index = WireGuardMessage.readU32(m, WireGuardMessage.Response.receiver)
        guard let key = context.indices[index], peers[key] != nil else {
            context.counters.fail(.unexpected)
            return .dropped(.handshakeFailed)
        }
        if let failure = peers[key]!.consumeResponse(m, ctx: context) {
            context.counters.fail(failure)
            return .dropped(.handshakeFailed)
        }
        peers[key]!.anyAuthenticatedPacketTraversal(now: now)
        peers[key]!.timers.newHandshake = nil
        guard peers[key]!.beginSymmetricSession(now: now, ctx: &context) else {
            context.counters.fail(.unexpected)
            return .dropped(.handshakeFailed)
        }
        peers[key]!.timers.zeroKeyMaterial = now.adding(nanoseconds: WireGuardTimers.zeroKeysAfter)
        peers[key]!.handshakeComplete(now: now)
        context.counters.handshakesCompletedAsInitiator &+= 1
        peers[key]!.sendKeepalive(now: now, ctx: &context, sink: &sink)
        return .handshakeCompleted(key)
    }

    enum InitiationFailure: Error {
        case unknownKey
        case handshake(WireGuardHandshakeFailure)
    }

    /// Opens an initiation (mac1 already checked) as responder; checks the sender is a
    /// peer and the timestamp is new and not a flood.
    func consumeInitiation(_ m: UnsafeRawBufferPointer, now: WireGuardInstant) -> Result<ConsumedInitiation, InitiationFailure> {
        typealias L = WireGuardMessage.Initiation
        let ephemeral = Key32(reading: m, at: L.ephemeral)
        guard let es = NoiseCrypto.dh(context.privateKey.raw, ephemeral) else { return .failure(.handshake(.badPoint)) }
        var c = NoiseCrypto.kdf(1, key: NoiseCrypto.initialChainKey, input: ephemeral).0
        var h = NoiseCrypto.mixHash(context.responderHash, ephemeral)
        var k: Key32
        (c, k, _) = NoiseCrypto.kdf(2, key: c, input: es)
        let staticField = UnsafeRawBufferPointer(rebasing: m[L.encryptedStatic..<L.encryptedTimestamp])
        var peerKey = Key32()
        let staticOpened = peerKey.withUnsafeMutableBytes { out in
            h.withUnsafeBytes { NoiseCrypto.open(key: k, counter: 0, cipher: staticField, ad: $0, into: out) }
        }
        guard staticOpened else { return .failure(.handshake(.decryption)) }
        let key = WireGuardPublicKey(peerKey)
        guard let peer = peers[key] else { return .failure(.unknownKey) }
        guard let staticStatic = peer.staticStatic else { return .failure(.handshake(.badPoint)) }
        h = NoiseCrypto.mixHash(h, staticField)
        (c, k, _) = NoiseCrypto.kdf(2, key: c, input: staticStatic)
        let timestampField = UnsafeRawBufferPointer(rebasing: m[L.encryptedTimestamp..<L.mac1])
        var stamp = [UInt8](repeating: 0, count: 12)
        let timestampOpened = stamp.withUnsafeMutableBytes { out in
            h.withUnsafeBytes { NoiseCrypto.open(key: k, counter: 0, cipher: timestampField, ad: $0, into: out) }
        }
        k.zeroize()
        guard timestampOpened, let timestamp = TAI64N(bytes: stamp) else { return .failure(.handshake(.decryption)) }
        h = NoiseCrypto.mixHash(h, timestampField)
        if let last = peer.lastTimestampReceived, timestamp <= last { return .failure(.handshake(.replayedTimestamp)) }
        if let last = peer.lastInitiationConsumed, now.since(last) <= WireGuardTimers.handshakeInitiationRate {
            return .failure(.handshake(.flood))
        }
        return .success(
            ConsumedInitiation(
                peer: key, chainKey: c, hash: h, remoteEphemeral: ephemeral,
                senderIndex: WireGuardMessage.readU32(m, L.sender), timestamp: timestamp))
    }
}

extension WireGuardDevice {
    /// Charges an initiation to its source's budget: a configured peer's own, or the one all
    /// other sources share.
    fileprivate mutating func takeInitiationBudget(from source: WireGuardPublicKey?, now: WireGuardInstant) -> Bool {
        if let source, peers[source] != nil { return peers[source]!.initiationBudget.take(now: now) }
        return context.strangersBudget.take(now: now)
    }
}
