import AgentSpeedtest
import NIOCore
import NIOEmbedded
import Testing

/// The speed test's handler on an embedded channel, where the test decides when a write has
/// gone out and when the channel is writable, and moves the loop's clock itself.
struct SpeedtestHandlerTests {
    static let blockSize = 2 << 20

    /// Stands for the socket under the handler. The first block goes out at once and the
    /// channel reports itself writable again from inside that write, as NIO's `flushNow` does
    /// when the kernel takes a whole write; the second block is held, and the channel
    /// unwritable, until ``release()``.
    final class Socket: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        private var blocks = 0
        private var held: (NIOAny, EventLoopPromise<Void>?)?
        private var context: ChannelHandlerContext?

        func handlerAdded(context: ChannelHandlerContext) { self.context = context }

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            guard unwrapOutboundIn(data).readableBytes == SpeedtestHandlerTests.blockSize else {
                context.write(data, promise: promise)
                return
            }
            blocks += 1
            if blocks == 1 {
                context.writeAndFlush(data, promise: promise)
                context.fireChannelWritabilityChanged()
            } else {
                held = (data, promise)
                (context.channel as? EmbeddedChannel)?.isWritable = false
            }
        }

        /// The held block goes out.
        func release() {
            guard let (data, promise) = held, let context else { return }
            held = nil
            context.writeAndFlush(data, promise: promise)
        }
    }

    @Test func theLastBlockWrittenFromInsideAWriteIsTheOneAwaitedBeforeTheClose() throws {
        let channel = EmbeddedChannel()
        let socket = Socket()
        try channel.pipeline.syncOperations.addHandler(socket)
        try SpeedtestServer().serve(channel).wait()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()

        try channel.writeInbound(ByteBuffer(string: #"{"version":2,"time":10000000000,"direction":0}"# + "\n"))
        // The test's time passes with the second block still on its way: the handler waits for it.
        channel.embeddedEventLoop.advanceTime(by: .seconds(10))
        #expect(channel.isActive, "closed before the last block went out")
        socket.release()
        #expect(!channel.isActive)

        let answer = try channel.readOutbound(as: ByteBuffer.self)
        #expect(answer.map { String(buffer: $0) } == "{}\n")
        var blocks: [Int] = []
        while let block = try channel.readOutbound(as: ByteBuffer.self) { blocks.append(block.readableBytes) }
        #expect(blocks == [Self.blockSize, Self.blockSize])
    }
}
