/// What a responder learns from a valid initiation before it answers.
struct ConsumedInitiation: Sendable {
    let peer: WireGuardPublicKey
    let chainKey: Key32
    let hash: Key32
    let remoteEphemeral: Key32
    let senderIndex: UInt32
    let timestamp: TAI64N
}
