/// Where the device puts its output. Both buffers are borrowed for the call only (they
/// point into the device's scratch storage or the caller's input): copy what you keep.
public protocol WireGuardSink {
    /// A WireGuard message for `peer`: the owner sends it (DERP, UDP) to wherever `peer` is.
    mutating func send(_ datagram: UnsafeRawBufferPointer, to peer: WireGuardPublicKey)
    /// A decrypted IP packet from `peer` (trimmed to its IP length) for the local stack.
    mutating func deliver(_ packet: UnsafeRawBufferPointer, from peer: WireGuardPublicKey)
}
