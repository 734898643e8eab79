import NIOCore

/// Splits a DERP byte stream into frames, however it arrives (TCP segments, or WebSocket
/// messages whose boundaries mean nothing).
///
/// Bounds: a header announcing more than `maxFrameLength` fails at once, before any of
/// the payload is buffered, so the buffer never holds more than one frame plus what
/// arrived in the same read.
public struct DERPFrameDecoder: Sendable {
    /// A header announcing more than this fails the stream.
    public let maxFrameLength: Int
    private var buffer = ByteBuffer()

    /// A decoder with the given limit (1 MiB as the Go client).
    public init(maxFrameLength: Int = DERPProtocol.maxFrameLength) {
        self.maxFrameLength = maxFrameLength
    }

    /// Bytes received but not yet returned as frames.
    public var bufferedCount: Int { buffer.readableBytes }

    /// Appends received bytes.
    public mutating func feed(buffer bytes: ByteBuffer) {
        var bytes = bytes
        if buffer.readableBytes == 0 {
            buffer = bytes
        } else {
            buffer.writeBuffer(&bytes)
        }
    }

    /// Appends received bytes.
    public mutating func feed(_ bytes: some Sequence<UInt8>) {
        buffer.writeBytes(bytes)
    }

    /// The next whole frame; nil until one has fully arrived. Throws as soon as a header
    /// announces more than `maxFrameLength` bytes (`limit` overrides it for this frame,
    /// e.g. the greeting's 1 KiB).
    public mutating func next(limit: Int? = nil) throws(DERPWireError) -> DERPRawFrame? {
        guard let type = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self),
            let length32 = buffer.getInteger(at: buffer.readerIndex + 1, as: UInt32.self)
        else { return nil }
        let length = Int(length32)
        if length > (limit ?? maxFrameLength) { throw .frameTooLarge(type: type, length: length) }
        guard buffer.readableBytes >= DERPProtocol.headerLength + length else { return nil }
        buffer.moveReaderIndex(forwardBy: DERPProtocol.headerLength)
        let payload = buffer.readBytes(length: length) ?? []
        if buffer.readableBytes == 0 { buffer.clear() } else if buffer.readerIndex > 64 << 10 { buffer.discardReadBytes() }
        return DERPRawFrame(type: type, payload: payload)
    }

    /// At the end of the stream: an error when part of a frame is still buffered.
    public func finish() throws(DERPWireError) {
        if buffer.readableBytes > 0 { throw .truncated(buffered: buffer.readableBytes) }
    }
}
