import NIOCore

/// One frame from boundary: a 4-byte big-endian header, tag in
/// the top 8 bits and payload length in the low 24, then exactly that many bytes.
public enum BoundaryFrame: Equatable, Sendable {
    /// Tag 1: a bare `ReportBoundaryLogsRequest`.
    case v1(ByteBuffer)
    /// Tag 2: a `BoundaryMessage` envelope (logs or status).
    case v2(ByteBuffer)
}

/// A header the agent refuses: the connection is closed (the stream cannot be resynced).
public struct BoundaryFramingError: Error, Equatable, CustomStringConvertible {
    public var tag: UInt8
    public var length: Int
    public var description: String {
        tag == 1 || tag == 2
            ? "frame of \(length) bytes is over the \(BoundaryFrameDecoder.maxPayload)-byte limit"
            : "unsupported frame tag \(tag)"
    }
}

/// Splits the byte stream into frames. The tag is checked before the length (an unknown
/// tag is refused at any length); at most one header plus 32 KiB is ever buffered.
///
/// It also says whether the bytes so far end inside a frame (``isMidFrame``), and tells the
/// handlers after it each time that changes (``MidFrameChanged``): the connection watch
/// bounds how long a frame may take from that, without parsing the stream itself.
/// Public for the fuzz targets (`Fuzz/`), which run it in NIO's `ByteToMessageHandler`.
public struct BoundaryFrameDecoder: ByteToMessageDecoder {
    public typealias InboundOut = BoundaryFrame

    /// A user inbound event the decoder sends down the pipeline when ``isMidFrame`` changes
    /// (after a frame's first byte: true; after its last: false), and when a frame ended
    /// with the next one begun (true, `endedAFrame`: that frame's own deadline starts).
    public struct MidFrameChanged: Equatable, Sendable {
        public let isMidFrame: Bool
        public var endedAFrame = false
    }

    /// The per-tag payload limit (`1<<15`): 32768 is accepted, 32769 is not.
    public static let maxPayload = 1 << 15

    /// True when the bytes received end inside a frame (its header or payload begun and not
    /// ended); set by each ``next(from:)``.
    public private(set) var isMidFrame = false

    public init() {}

    /// The next frame at the front of `buffer` (its bytes consumed), or nil until more
    /// arrive; ``isMidFrame`` then tells whether what is left is a frame's start. Throws at a
    /// header the agent refuses.
    public mutating func next(from buffer: inout ByteBuffer) throws(BoundaryFramingError) -> BoundaryFrame? {
        defer { isMidFrame = buffer.readableBytes > 0 }
        guard let header = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else { return nil }
        let tag = UInt8(header >> 24)
        let length = Int(header & 0x00FF_FFFF)
        guard tag == 1 || tag == 2, length <= Self.maxPayload else { throw BoundaryFramingError(tag: tag, length: length) }
        guard buffer.readableBytes >= 4 + length else { return nil }
        buffer.moveReaderIndex(forwardBy: 4)
        let payload = buffer.readSlice(length: length)!
        return tag == 1 ? .v1(payload) : .v2(payload)
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        let wasMidFrame = isMidFrame
        let frame = try next(from: &buffer)
        if let frame { context.fireChannelRead(wrapInboundOut(frame)) }
        if isMidFrame != wasMidFrame || (frame != nil && isMidFrame) {
            context.fireUserInboundEventTriggered(MidFrameChanged(isMidFrame: isMidFrame, endedAFrame: frame != nil))
        }
        return frame == nil ? .needMoreData : .continue
    }

    public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        // A frame cut off by the client going away is dropped: it was never complete.
        while try decode(context: context, buffer: &buffer) == .continue {}
        buffer.moveReaderIndex(to: buffer.writerIndex)
        if isMidFrame {
            isMidFrame = false
            context.fireUserInboundEventTriggered(MidFrameChanged(isMidFrame: false))
        }
        return .needMoreData
    }
}
