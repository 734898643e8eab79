import NIOCore
import NIOHTTP1

/// The connection's request decoder: NIO's `HTTPRequestDecoder`, with the bytes of each read
/// reported to the connection's ``HTTP1ConnectionHandler`` before they are parsed. Its state
/// machine measures the request line on them (llhttp reports an over-long line and over-long
/// fields alike as `headerOverflow`: 414 against 431), counts chunk framing, and says whether
/// they are parsed at all (after a refusal they are dropped).
///
/// It copies nothing: a read is scanned for its first newline only while a request line is
/// being measured. At an upgrade NIO's decoder stops parsing and, removed, forwards the bytes
/// it holds (the client's first frames) to the next handler, as in NIO's upgrade pipeline.
///
/// State: how many of the buffer's bytes were reported already (the inner decoder leaves
/// bytes unparsed only once stopped). Used only on the connection's event loop.
final class HTTP1RequestDecoder: ByteToMessageDecoder {
    typealias InboundOut = HTTPServerRequestPart

    private let decoder: HTTPRequestDecoder
    private let connection: HTTP1ConnectionHandler
    /// Readable bytes the last call left in the buffer (reported then).
    private var reported = 0

    init(limits: NIOHTTPDecoderLimitConfiguration, connection: HTTP1ConnectionHandler) {
        self.decoder = HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes, limitConfiguration: limits)
        self.connection = connection
    }

    func decoderAdded(context: ChannelHandlerContext) {
        decoder.decoderAdded(context: context)
    }

    func decoderRemoved(context: ChannelHandlerContext) {
        decoder.decoderRemoved(context: context)
    }

    func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard buffer.readableBytes > reported else { return .needMoreData }
        guard connection.bytesReceived(buffer, reported: reported) else {
            // Nothing more is parsed on this connection: the read is dropped.
            buffer.moveReaderIndex(to: buffer.writerIndex)
            reported = 0
            return .needMoreData
        }
        do {
            while try decoder.decode(context: context, buffer: &buffer) == .continue {}
        } catch {
            // The handler around goes to its error state: nothing more is decoded.
            reported = 0
            connection.bytesProcessed(unparsed: 0)
            throw error
        }
        reported = buffer.readableBytes
        connection.bytesProcessed(unparsed: reported)
        return .needMoreData
    }

    func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        // At the input's end, or at an upgrade's removal (the held bytes are forwarded).
        reported = 0
        return try decoder.decodeLast(context: context, buffer: &buffer, seenEOF: seenEOF)
    }
}
