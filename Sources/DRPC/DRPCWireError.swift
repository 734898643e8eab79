/// Why a dRPC byte stream was refused; each one closes the transport.
public enum DRPCWireError: Error, Equatable, Sendable, CustomStringConvertible {
    case varintTooLong
    /// A (stream, message) ID went backwards, was reused, or was (0, _).
    case idMonotonicityViolation
    /// An assembled packet (or a single frame) passed the size limit.
    case dataOverflow(limit: Int)
    /// A frame changed kind in the middle of a packet.
    case kindChanged
    /// An unknown kind without the control flag.
    case unknownKind(UInt8)

    public var description: String {
        switch self {
        case .varintTooLong: return "varint too long"
        case .idMonotonicityViolation: return "id monotonicity violation"
        case .dataOverflow(let limit): return "data overflow (limit \(limit) bytes)"
        case .kindChanged: return "protocol error: packet kind change"
        case .unknownKind(let kind): return "protocol error: unknown frame kind \(kind)"
        }
    }
}
