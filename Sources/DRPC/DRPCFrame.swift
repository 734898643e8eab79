/// One dRPC frame: control byte, stream ID, message ID, length-prefixed data.
///
/// `kind` is kept raw so frames of kinds this implementation does not know can still be
/// decoded and then ignored (control flag set) or refused (control flag clear).
public struct DRPCFrame: Equatable, Sendable {
    public var streamID: UInt64
    public var messageID: UInt64
    public var rawKind: UInt8
    /// Last frame of its packet.
    public var done: Bool
    /// The control flag (0x80): unknown kinds carrying it must be ignored.
    public var control: Bool
    public var data: [UInt8]

    public init(streamID: UInt64, messageID: UInt64, kind: DRPCKind, done: Bool = true, control: Bool = false, data: [UInt8] = []) {
        self.init(streamID: streamID, messageID: messageID, rawKind: kind.rawValue, done: done, control: control, data: data)
    }

    public init(streamID: UInt64, messageID: UInt64, rawKind: UInt8, done: Bool, control: Bool, data: [UInt8]) {
        self.streamID = streamID
        self.messageID = messageID
        self.rawKind = rawKind
        self.done = done
        self.control = control
        self.data = data
    }

    /// The known kind, or nil.
    public var kind: DRPCKind? { DRPCKind(rawValue: rawKind) }

    /// `kind<<1 | done | control<<7`.
    public var controlByte: UInt8 {
        (rawKind & 0x3F) << 1 | (done ? 0x01 : 0) | (control ? 0x80 : 0)
    }

    /// Appends the wire form.
    public func encode(into out: inout [UInt8]) {
        Self.encodeHeader(controlByte: controlByte, streamID: streamID, messageID: messageID, length: data.count, into: &out)
        out.append(contentsOf: data)
    }

    /// Appends a frame header (control byte and three varints); the `length` data bytes
    /// follow it.
    static func encodeHeader(controlByte: UInt8, streamID: UInt64, messageID: UInt64, length: Int, into out: inout [UInt8]) {
        out.append(controlByte)
        Varint.encode(streamID, into: &out)
        Varint.encode(messageID, into: &out)
        Varint.encode(UInt64(length), into: &out)
    }

    public var encoded: [UInt8] {
        var out: [UInt8] = []
        encode(into: &out)
        return out
    }
}
