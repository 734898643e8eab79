/// What a client makes of one packet the server sent on its stream.
public enum DRPCReply: Equatable, Sendable {
    /// A message.
    case message([UInt8])
    /// CloseSend or Close: the server sends nothing more.
    case end
    /// The call failed; `closeTransport` when the server broke the protocol.
    case failure(DRPCCallError, closeTransport: Bool)

    public init(_ packet: DRPCPacket) {
        switch packet.kind {
        case .message:
            self = .message(packet.data)
        case .error:
            self = .failure(.remote(DRPCErrorBody(decoding: packet.data)), closeTransport: false)
        case .closeSend, .close:
            self = .end
        case .cancel:
            self = .failure(.remoteClosed("context canceled"), closeTransport: false)
        case .invoke, .invokeMetadata:
            self = .failure(.protocolViolation("server sent \(packet.kind)"), closeTransport: true)
        }
    }
}
