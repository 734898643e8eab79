/// What can be wrong with the bytes a DERP server sends. Every case ends the connection
/// (the client reconnects); frames the client can skip are not errors.
public enum DERPWireError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A header announced more than ``DERPProtocol/maxFrameLength`` bytes.
    case frameTooLarge(type: UInt8, length: Int)
    /// The stream ended inside a frame (`buffered` bytes of it had arrived).
    case truncated(buffered: Int)
    /// The first frame was not a ServerKey of at least 40 bytes starting with `DERP🔑`.
    case invalidServerGreeting
    /// A frame too short for its type, or a ServerInfo that does not open.
    case malformed(type: UInt8, reason: String)

    public var description: String {
        switch self {
        case .frameTooLarge(let type, let length):
            "DERP frame type 0x\(Hex.encode([type])) announces \(length) bytes, over the \(DERPProtocol.maxFrameLength)-byte limit"
        case .truncated(let buffered):
            "DERP connection ended inside a frame (\(buffered) bytes of it received)"
        case .invalidServerGreeting:
            "invalid server greeting"
        case .malformed(let type, let reason):
            "malformed DERP frame type 0x\(Hex.encode([type])): \(reason)"
        }
    }
}
