import FrameBytes

/// Incremental frame decoder: feed bytes as they arrive (any split, down to one byte),
/// take complete frames out.
///
/// Memory is bounded: at most one frame header plus `maxFrameData` bytes are buffered
/// beyond what has been consumed; a frame announcing more is refused at once.
public struct DRPCFrameDecoder: Sendable {
    /// The largest data a single frame may announce (defaults to the packet limit, 4 MiB).
    public let maxFrameData: Int
    private var bytes = FrameBytes()

    public init(maxFrameData: Int = DRPCPacketAssembler.defaultMaxPacketSize) {
        self.maxFrameData = maxFrameData
    }

    /// Appends received bytes.
    public mutating func feed(_ received: some Sequence<UInt8>) { bytes.append(received) }

    /// The common case, without generic dispatch.
    public mutating func feed(_ received: [UInt8]) { bytes.append(received) }

    /// Bytes received but not yet part of a returned frame.
    public var bufferedCount: Int { bytes.count }

    /// True when the bytes received end inside a frame (read after ``next()`` returned nil:
    /// the frame's first bytes are buffered and the rest has not arrived). A server that
    /// bounds how long a frame may take asks this instead of parsing the stream itself.
    public var isMidFrame: Bool { bytes.count > 0 }

    /// Frames returned so far (wrapping): a server compares two readings to tell whether a
    /// frame ended in between.
    public private(set) var framesDecoded: UInt64 = 0

    /// The next complete frame, or nil until more bytes arrive.
    public mutating func next() throws(DRPCWireError) -> DRPCFrame? {
        guard bytes.count >= 1 else { return nil }
        let buffer = bytes.storage
        let controlByte = buffer[bytes.start]
        var offset = bytes.start + 1
        var fields: [UInt64] = []
        for _ in 0..<3 {
            switch Varint.decode(buffer, at: offset) {
            case .needMoreBytes: return nil
            case .tooLong: throw .varintTooLong
            case .value(let value, let length):
                fields.append(value)
                offset += length
            }
        }
        let length = fields[2]
        guard length <= UInt64(maxFrameData) else { throw .dataOverflow(limit: maxFrameData) }
        guard buffer.count - offset >= Int(length) else { return nil }
        let data = bytes.take(from: offset, to: offset + Int(length))
        framesDecoded &+= 1
        return DRPCFrame(
            streamID: fields[0], messageID: fields[1], rawKind: (controlByte >> 1) & 0x3F,
            done: controlByte & 0x01 != 0, control: controlByte & 0x80 != 0, data: data)
    }
}
