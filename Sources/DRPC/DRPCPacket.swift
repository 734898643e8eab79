import AgentJSON
/// A whole dRPC packet: the frames of one (stream, message) ID joined.
public struct DRPCPacket: Equatable, Sendable {
    public var streamID: UInt64
    public var messageID: UInt64
    public var kind: DRPCKind
    public var data: [UInt8]

    public init(streamID: UInt64, messageID: UInt64, kind: DRPCKind, data: [UInt8] = []) {
        self.streamID = streamID
        self.messageID = messageID
        self.kind = kind
        self.data = data
    }

    /// Senders split data at 64 KiB per frame.
    public static let defaultMaxFrameSize = 65536

    /// The packet's frames in wire form, split at `maxFrameSize`; Cancel carries the
    /// control flag, as the reference sends it. An empty packet is one empty frame.
    public func encode(into out: inout [UInt8], maxFrameSize: Int = DRPCPacket.defaultMaxFrameSize) {
        precondition(maxFrameSize > 0)
        let control: UInt8 = kind == .cancel ? 0x80 : 0
        let frames = max(1, (data.count + maxFrameSize - 1) / maxFrameSize)
        out.reserveCapacity(out.count + data.count + frames * 31)
        var offset = 0
        repeat {
            // The frame header, then the slice: one copy of the data.
            let end = min(data.count, offset + maxFrameSize)
            DRPCFrame.encodeHeader(
                controlByte: (kind.rawValue & 0x3F) << 1 | (end == data.count ? 0x01 : 0) | control,
                streamID: streamID, messageID: messageID, length: end - offset, into: &out)
            out.append(contentsOf: data[offset..<end])
            offset = end
        } while offset < data.count
    }

    public func encoded(maxFrameSize: Int = DRPCPacket.defaultMaxFrameSize) -> [UInt8] {
        var out: [UInt8] = []
        encode(into: &out, maxFrameSize: maxFrameSize)
        return out
    }
}

/// The body of an Error packet: an 8-byte big-endian code, then UTF-8 text.
public struct DRPCErrorBody: Equatable, Sendable {
    /// Code 12: the method is not implemented.
    public static let unimplemented: UInt64 = 12

    public var code: UInt64
    public var message: String

    public init(code: UInt64, message: String) {
        self.code = code
        self.message = message
    }

    /// Decodes a body; one shorter than 8 bytes is all text, flagged as the reference does.
    public init(decoding data: [UInt8]) {
        if data.count < 8 {
            code = 0
            message = String(decoding: data, as: UTF8.self) + " (drpcwire note: invalid error data)"
            return
        }
        code = data.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
        message = String(decoding: data.dropFirst(8), as: UTF8.self)
    }

    public var encoded: [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: code >> (56 - 8 * UInt64($0))) } + Array(message.utf8)
    }

    /// The reference's reply to a method nobody serves (code 0, Go `%q` quoting).
    public static func unknownRPC(_ name: String) -> DRPCErrorBody {
        DRPCErrorBody(code: 0, message: "protocol error: unknown rpc: \(goQuote(name))")
    }

    /// True for the answers that mean "this server does not have that RPC".
    public var isUnsupported: Bool {
        code == Self.unimplemented || message.contains("unknown rpc: ")
    }
}
