import CTailnetCrypto

/// What every peer's processing shares: our static key and its derived values, the index
/// table, routing, counters, the scratch buffer and the clocks. Kept apart from the peer
/// table so a peer can be changed in place while the context is too.
struct DeviceContext: Sendable {
    let privateKey: WireGuardPrivateKey
    /// HASH("mac1----" ‖ our public key): checks mac1 of what we receive.
    let mac1Key: Key32
    /// HASH(HASH(construction) ‖ identifier ‖ our public key): a responder's starting hash.
    let responderHash: Key32
    let configuration: WireGuardConfiguration
    var counters = WireGuardCounters()
    /// Initiations taken on from sources that are not configured peers (before their
    /// Diffie-Hellman); each peer's own are in its ``PeerState``.
    var strangersBudget = HandshakeBudget.strangers
    /// Session and handshake indices → peer. Bounded: at most 4 per peer (a handshake and
    /// three sessions), so `maximumPeers × 4`.
    var indices: [UInt32: WireGuardPublicKey] = [:]
    var allowedIPs = AllowedIPs()
    /// Output storage for one transport message, reused by every packet (swapped out while in
    /// use). Its size is the largest transport message, about 64 KiB.
    var scratch: [UInt8]

    init(configuration: WireGuardConfiguration) {
        self.configuration = configuration
        privateKey = configuration.privateKey
        let pub = privateKey.publicKey.raw
        mac1Key = NoiseCrypto.hash(NoiseCrypto.labelMAC1, pub.bytes)
        responderHash = NoiseCrypto.mixHash(NoiseCrypto.initialHash, pub)
        scratch = [UInt8](repeating: 0, count: WireGuardMessage.maximumTransportSize)
        indices.reserveCapacity(64)
    }

    /// A fresh random index for `peer`, registered; nil when the table is full.
    mutating func newIndex(for peer: WireGuardPublicKey) -> UInt32? {
        guard indices.count < configuration.maximumPeers * 4 else { return nil }
        // Bounded: with at most 4 × peers entries among 2^32, a collision is rare; 64 tries.
        for _ in 0..<64 {
            var index: UInt32 = 0
            withUnsafeMutableBytes(of: &index) { tc_random($0.u8, 4) }
            if index != 0, indices[index] == nil {
                indices[index] = peer
                return index
            }
        }
        return nil
    }

    mutating func releaseIndex(_ index: UInt32) {
        if index != 0 { indices[index] = nil }
    }

    /// Jitter for retries: 0 ..< 334 ms.
    func jitter() -> UInt64 {
        var value: UInt64 = 0
        withUnsafeMutableBytes(of: &value) { tc_random($0.u8, 8) }
        return value % WireGuardTimers.rekeyTimeoutJitterMax
    }
}

extension DeviceContext {
    /// Counts a drop and returns its result.
    mutating func dropped(_ reason: WireGuardDropReason) -> WireGuardReceiveResult {
        counters.drop(reason)
        return .dropped(reason)
    }
}
