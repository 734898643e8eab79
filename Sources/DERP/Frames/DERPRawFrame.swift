/// One frame as it is on the wire: its type byte and its payload.
public struct DERPRawFrame: Equatable, Sendable {
    /// The type byte (``DERPFrameType``).
    public var type: UInt8
    /// The payload, without the 5-byte header.
    public var payload: [UInt8]

    /// A frame of `type` carrying `payload`.
    public init(type: UInt8, payload: [UInt8]) {
        self.type = type
        self.payload = payload
    }

    /// Header (type, big-endian length) and payload.
    public var encoded: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(DERPProtocol.headerLength + payload.count)
        out.append(type)
        let length = UInt32(payload.count)
        out += [UInt8(length >> 24), UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)]
        out += payload
        return out
    }
}
