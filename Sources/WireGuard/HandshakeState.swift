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
