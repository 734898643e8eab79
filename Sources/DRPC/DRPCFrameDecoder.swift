/// Incremental frame decoder: feed bytes as they arrive (any split, down to one byte),
/// take complete frames out.
///
/// Memory is bounded: at most one frame header plus `maxFrameData` bytes are buffered
/// beyond what has been consumed; a frame announcing more is refused at once.
public struct DRPCFrameDecoder: Sendable {
    /// The largest data a single frame may announce (defaults to the packet limit, 4 MiB).
    public let maxFrameData: Int
    private var buffer: [UInt8] = []
    private var start = 0

    public init(maxFrameData: Int = DRPCPacketAssembler.defaultMaxPacketSize) {
        self.maxFrameData = maxFrameData
    }

    /// Appends received bytes.
    public mutating func feed(_ bytes: some Sequence<UInt8>) {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The common case, without generic dispatch (one copy, no per-byte iteration).
    public mutating func feed(_ bytes: [UInt8]) {
        if start == buffer.count {
            if bytes.count >= 4096 {
                // Nothing pending: take the caller's buffer as is.
                buffer = bytes
                start = 0
                return
            }
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Bytes received but not yet part of a returned frame.
    public var bufferedCount: Int { buffer.count - start }

    /// The next complete frame, or nil until more bytes arrive.
    public mutating func next() throws(DRPCWireError) -> DRPCFrame? {
        guard buffer.count - start >= 1 else { return nil }
        let controlByte = buffer[start]
        var offset = start + 1
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
        let data = Array(buffer[offset..<(offset + Int(length))])
        start = offset + Int(length)
        if start > 65536 && start * 2 > buffer.count {
            buffer.removeFirst(start)
            start = 0
        }
        return DRPCFrame(
            streamID: fields[0], messageID: fields[1], rawKind: (controlByte >> 1) & 0x3F,
            done: controlByte & 0x01 != 0, control: controlByte & 0x80 != 0, data: data)
    }
}
