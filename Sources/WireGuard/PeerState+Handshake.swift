import CTailnetCrypto

/// The Noise_IKpsk2 messages toward one peer (whitepaper §5.4.2–§5.4.5, wireguard-go's
/// noise-protocol.go), the PSK being 32 zero bytes.
extension PeerState {
    /// Builds an initiation (148 bytes) and registers a fresh index for it; nil when the
    /// peer's key is low-order or the index table is full.
    mutating func createInitiation(now: WireGuardInstant, ctx: inout DeviceContext) -> [UInt8]? {
        guard let staticStatic else { return nil }
        ctx.releaseIndex(handshake.localIndex)
        handshake.localIndex = 0
        guard let index = ctx.newIndex(for: key) else { return nil }
        let ephemeral = WireGuardPrivateKey.generate()
        guard let es = NoiseCrypto.dh(ephemeral.raw, key.raw) else {
            ctx.releaseIndex(index)
            return nil
        }
        var timestamp = TAI64N(unixNanoseconds: ctx.configuration.wallClock())
        if let last = lastTimestampSent, timestamp <= last { timestamp = last.nextStep() }
        lastTimestampSent = timestamp
        let timestampBytes = timestamp.bytes

        var c = NoiseCrypto.kdf(1, key: NoiseCrypto.initialChainKey, input: ephemeral.publicKey.raw).0
        var h = NoiseCrypto.mixHash(initiatorHash, ephemeral.publicKey.raw)
        var k: Key32
        (c, k, _) = NoiseCrypto.kdf(2, key: c, input: es)
        var message = [UInt8](repeating: 0, count: WireGuardMessage.Initiation.size)
        let ourPublic = ctx.privateKey.publicKey.raw
        message.withUnsafeMutableBytes { m in
            typealias L = WireGuardMessage.Initiation
            WireGuardMessage.writeU32(m, 0, WireGuardMessage.initiationType)
            WireGuardMessage.writeU32(m, L.sender, index)
            ephemeral.publicKey.raw.withUnsafeBytes { m.baseAddress!.advanced(by: L.ephemeral).copyMemory(from: $0.baseAddress!, byteCount: 32) }
            let staticField = UnsafeMutableRawBufferPointer(rebasing: m[L.encryptedStatic..<L.encryptedTimestamp])
            ourPublic.withUnsafeBytes { plain in
                h.withUnsafeBytes { ad in NoiseCrypto.seal(key: k, counter: 0, plain: plain, ad: ad, into: staticField) }
            }
            h = NoiseCrypto.mixHash(h, UnsafeRawBufferPointer(staticField))
            (c, k, _) = NoiseCrypto.kdf(2, key: c, input: staticStatic)
            let timestampField = UnsafeMutableRawBufferPointer(rebasing: m[L.encryptedTimestamp..<L.mac1])
            timestampBytes.withUnsafeBytes { plain in
                h.withUnsafeBytes { ad in NoiseCrypto.seal(key: k, counter: 0, plain: plain, ad: ad, into: timestampField) }
            }
            h = NoiseCrypto.mixHash(h, UnsafeRawBufferPointer(timestampField))
            addMACs(m, mac1At: L.mac1, now: now)
        }
        k.zeroize()
        handshake = HandshakeState(
            phase: .initiationCreated, chainKey: c, hash: h, localEphemeral: ephemeral.raw, remoteEphemeral: Key32(),
            localIndex: index, remoteIndex: 0)
        return message
    }

    /// Builds the response to the consumed initiation (92 bytes); nil when out of state.
    mutating func createResponse(now: WireGuardInstant, ctx: inout DeviceContext) -> [UInt8]? {
        guard handshake.phase == .initiationConsumed else { return nil }
        ctx.releaseIndex(handshake.localIndex)
        handshake.localIndex = 0
        guard let index = ctx.newIndex(for: key) else { return nil }
        let ephemeral = WireGuardPrivateKey.generate()
        guard let ee = NoiseCrypto.dh(ephemeral.raw, handshake.remoteEphemeral),
            let se = NoiseCrypto.dh(ephemeral.raw, key.raw)
        else {
            ctx.releaseIndex(index)
            return nil
        }
        var c = NoiseCrypto.kdf(1, key: handshake.chainKey, input: ephemeral.publicKey.raw).0
        var h = NoiseCrypto.mixHash(handshake.hash, ephemeral.publicKey.raw)
        c = NoiseCrypto.kdf(1, key: c, input: ee).0
        c = NoiseCrypto.kdf(1, key: c, input: se).0
        var (c3, tau, k) = NoiseCrypto.kdf(3, key: c, input: Key32.zero)
        c = c3
        h = NoiseCrypto.mixHash(h, tau)
        var message = [UInt8](repeating: 0, count: WireGuardMessage.Response.size)
        let remoteIndex = handshake.remoteIndex
        message.withUnsafeMutableBytes { m in
            typealias L = WireGuardMessage.Response
            WireGuardMessage.writeU32(m, 0, WireGuardMessage.responseType)
            WireGuardMessage.writeU32(m, L.sender, index)
            WireGuardMessage.writeU32(m, L.receiver, remoteIndex)
            ephemeral.publicKey.raw.withUnsafeBytes { m.baseAddress!.advanced(by: L.ephemeral).copyMemory(from: $0.baseAddress!, byteCount: 32) }
            let emptyField = UnsafeMutableRawBufferPointer(rebasing: m[L.encryptedEmpty..<L.mac1])
            h.withUnsafeBytes { ad in
                NoiseCrypto.seal(key: k, counter: 0, plain: UnsafeRawBufferPointer(start: nil, count: 0), ad: ad, into: emptyField)
            }
            h = NoiseCrypto.mixHash(h, UnsafeRawBufferPointer(emptyField))
            addMACs(m, mac1At: L.mac1, now: now)
        }
        k.zeroize()
        tau.zeroize()
        handshake.chainKey = c
        handshake.hash = h
        handshake.localIndex = index
        handshake.phase = .responseCreated
        return message
    }

    /// Checks a response (mac1 already checked) against our initiation; on success the
    /// handshake is `.responseConsumed`.
    mutating func consumeResponse(_ m: UnsafeRawBufferPointer, ctx: DeviceContext) -> WireGuardHandshakeFailure? {
        typealias L = WireGuardMessage.Response
        let receiver = WireGuardMessage.readU32(m, L.receiver)
        guard handshake.phase == .initiationCreated, handshake.localIndex == receiver else { return .unexpected }
        let remoteEphemeral = Key32(reading: m, at: L.ephemeral)
        guard let ee = NoiseCrypto.dh(handshake.localEphemeral, remoteEphemeral),
            let se = NoiseCrypto.dh(ctx.privateKey.raw, remoteEphemeral)
        else { return .badPoint }
        var c = NoiseCrypto.kdf(1, key: handshake.chainKey, input: remoteEphemeral).0
        var h = NoiseCrypto.mixHash(handshake.hash, remoteEphemeral)
        c = NoiseCrypto.kdf(1, key: c, input: ee).0
        c = NoiseCrypto.kdf(1, key: c, input: se).0
        var (c3, tau, k) = NoiseCrypto.kdf(3, key: c, input: Key32.zero)
        c = c3
        h = NoiseCrypto.mixHash(h, tau)
        defer {
            k.zeroize()
            tau.zeroize()
        }
        let emptyField = UnsafeRawBufferPointer(rebasing: m[L.encryptedEmpty..<L.mac1])
        var nothing: UInt8 = 0
        let opened = withUnsafeMutableBytes(of: &nothing) { out in
            h.withUnsafeBytes { ad in
                NoiseCrypto.open(key: k, counter: 0, cipher: emptyField, ad: ad, into: UnsafeMutableRawBufferPointer(rebasing: out[0..<0]))
            }
        }
        guard opened else { return .decryption }
        h = NoiseCrypto.mixHash(h, emptyField)
        handshake.chainKey = c
        handshake.hash = h
        handshake.remoteIndex = WireGuardMessage.readU32(m, L.sender)
        handshake.phase = .responseConsumed
        return nil
    }

    /// Takes the consumed initiation as this peer's handshake.
    mutating func acceptInitiation(_ consumed: ConsumedInitiation, now: WireGuardInstant) {
        handshake.chainKey = consumed.chainKey
        handshake.hash = consumed.hash
        handshake.remoteEphemeral = consumed.remoteEphemeral
        handshake.remoteIndex = consumed.senderIndex
        handshake.phase = .initiationConsumed
        lastTimestampReceived = consumed.timestamp
        lastInitiationConsumed = now
    }

    /// Derives the session from a finished handshake and rotates the sessions
    /// (wireguard-go's BeginSymmetricSession); false when out of state.
    mutating func beginSymmetricSession(now: WireGuardInstant, ctx: inout DeviceContext) -> Bool {
        let isInitiator: Bool
        switch handshake.phase {
        case .responseConsumed: isInitiator = true
        case .responseCreated: isInitiator = false
        default: return false
        }
        let (t1, t2, _) = NoiseCrypto.kdf(2, key: handshake.chainKey, input: UnsafeRawBufferPointer(start: nil, count: 0))
        let keypair = Keypair(
            sendKey: isInitiator ? t1 : t2, receiveKey: isInitiator ? t2 : t1, created: now, isInitiator: isInitiator,
            localIndex: handshake.localIndex, remoteIndex: handshake.remoteIndex)
        // The handshake's index now names the session (the table maps it to this peer already).
        let remoteIndex = handshake.remoteIndex
        handshake.zeroize()
        handshake = HandshakeState()
        handshake.remoteIndex = remoteIndex
        if isInitiator {
            if keypairs.next != nil {
                Self.deleteKeypair(&keypairs.current, ctx: &ctx)
                Self.deleteKeypair(&keypairs.previous, ctx: &ctx)
                keypairs.previous = keypairs.next
                keypairs.next = nil
            } else {
                Self.deleteKeypair(&keypairs.previous, ctx: &ctx)
                keypairs.previous = keypairs.current
            }
            keypairs.current = keypair
        } else {
            Self.deleteKeypair(&keypairs.next, ctx: &ctx)
            Self.deleteKeypair(&keypairs.previous, ctx: &ctx)
            keypairs.next = keypair
        }
        return true
    }

    /// The responder's session is confirmed by the initiator's first transport message:
    /// next becomes current (wireguard-go's ReceivedWithKeypair).
    mutating func confirmNext(ctx: inout DeviceContext) {
        Self.deleteKeypair(&keypairs.previous, ctx: &ctx)
        keypairs.previous = keypairs.current
        keypairs.current = keypairs.next
        keypairs.next = nil
    }

    static func deleteKeypair(_ keypair: inout Keypair?, ctx: inout DeviceContext) {
        if let index = keypair?.localIndex { ctx.releaseIndex(index) }
        keypair?.zeroize()
        keypair = nil
    }

    /// A cookie reply (any index of ours for this peer): stores the cookie for mac2.
    mutating func consumeCookieReply(_ m: UnsafeRawBufferPointer, now: WireGuardInstant) -> WireGuardHandshakeFailure? {
        typealias L = WireGuardMessage.CookieReply
        guard var lastMAC1 = cookie.lastMAC1 else { return .unexpected }
        var value: (UInt64, UInt64) = (0, 0)
        let rc = withUnsafeMutableBytes(of: &value) { out in
            withUnsafeBytes(of: &lastMAC1) { ad in
                cookieKey.withUnsafeBytes { k in
                    tc_xchacha_open(out.u8, m.u8! + L.encryptedCookie, 32, ad.u8, 16, m.u8! + L.nonce, k.u8)
                }
            }
        }
        guard rc == 0 else { return .decryption }
        cookie.cookie = value
        cookie.cookieReceived = now
        return nil
    }

    /// Writes mac1 (and mac2 when a fresh cookie is held) of a message we send; remembers mac1.
    mutating func addMACs(_ m: UnsafeMutableRawBufferPointer, mac1At offset: Int, now: WireGuardInstant) {
        let macField = UnsafeMutableRawBufferPointer(rebasing: m[offset..<offset + 16])
        NoiseCrypto.mac(key: mac1Key, UnsafeRawBufferPointer(rebasing: m[0..<offset]), into: macField)
        cookie.lastMAC1 = UnsafeRawBufferPointer(macField).loadUnaligned(as: (UInt64, UInt64).self)
        let mac2Field = UnsafeMutableRawBufferPointer(rebasing: m[offset + 16..<offset + 32])
        if var value = cookie.freshCookie(now: now) {
            withUnsafeBytes(of: &value) { key16 in
                NoiseCrypto.mac(key16: key16, UnsafeRawBufferPointer(rebasing: m[0..<offset + 16]), into: mac2Field)
            }
        } else {
            mac2Field.initializeMemory(as: UInt8.self, repeating: 0)
        }
    }
}
