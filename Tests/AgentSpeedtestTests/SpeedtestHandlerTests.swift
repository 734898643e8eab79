import AgentSpeedtest
import NIOCore
import NIOEmbedded
import Testing

/// The speed test's handler on an embedded channel, where the test decides when a write has
/// gone out and when the channel is writable, and moves the loop's clock itself.
struct SpeedtestHandlerTests {
    static let blockSize = 2 << 20
    /// The handler writes each block in slices of this size.
    static let sliceSize = 64 << 10

    /// Stands for the socket under the handler. The first block's slices go out at once and
    /// the channel reports itself writable again from inside their flush, as NIO's `flushNow`
    /// does when the kernel takes a whole write; later slices are held, and the channel
    /// unwritable, until ``release(_:)`` lets some out.
    final class Socket: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        private var slices = 0
        private var held: [(NIOAny, EventLoopPromise<Void>?)] = []
        private var context: ChannelHandlerContext?
        private var reportedWritable = false

        func handlerAdded(context: ChannelHandlerContext) { self.context = context }

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            guard unwrapOutboundIn(data).readableBytes == SpeedtestHandlerTests.sliceSize else {
                context.write(data, promise: promise)
                return
            }
            slices += 1
            if slices <= SpeedtestHandlerTests.blockSize / SpeedtestHandlerTests.sliceSize {
                context.write(data, promise: promise)
            } else {
                held.append((data, promise))
                (context.channel as? EmbeddedChannel)?.isWritable = false
            }
        }

        func flush(context: ChannelHandlerContext) {
            context.flush()
            if slices == SpeedtestHandlerTests.blockSize / SpeedtestHandlerTests.sliceSize, !reportedWritable {
                reportedWritable = true
                context.fireChannelWritabilityChanged()
            }
        }

        func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
            let stuck = held
            held = []
            for (_, promise) in stuck { promise?.fail(ChannelError.ioOnClosedChannel) }
            context.close(mode: mode, promise: promise)
        }

        /// The first `count` held slices go out (all of them when nil).
        func release(_ count: Int? = nil) {
            guard let context else { return }
            let out = held.prefix(count ?? held.count)
            held.removeFirst(out.count)
            for (data, promise) in out { context.writeAndFlush(data, promise: promise) }
        }
    }

    /// A channel that has had the download request of `seconds`, with `socket` under the handler.
    static func downloading(seconds: Int, _ socket: Socket) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(socket)
        try SpeedtestServer().serve(channel).wait()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try channel.writeInbound(ByteBuffer(string: #"{"version":2,"time":\#(seconds)000000000,"direction":0}"# + "\n"))
        return channel
    }

    /// The answer, then the bytes of the slices that went out.
    static func sent(_ channel: EmbeddedChannel) throws -> (answer: String?, bytes: Int) {
        let answer = try channel.readOutbound(as: ByteBuffer.self).map { String(buffer: $0) }
        var bytes = 0
        while let slice = try channel.readOutbound(as: ByteBuffer.self) { bytes += slice.readableBytes }
        return (answer, bytes)
    }

    @Test func theLastBlockWrittenFromInsideAFlushIsTheOneAwaitedBeforeTheClose() throws {
        let socket = Socket()
        let channel = try Self.downloading(seconds: 10, socket)
        // The test's time passes with the second block still on its way: the handler waits for it.
        channel.embeddedEventLoop.advanceTime(by: .seconds(10))
        #expect(channel.isActive, "closed before the last block went out")
        socket.release()
        #expect(!channel.isActive)
        let sent = try Self.sent(channel)
        #expect(sent.answer == "{}\n")
        #expect(sent.bytes == 2 * Self.blockSize)
    }

    /// The last block drains slowly: the agent waits while slices go out, however long after
    /// the test's time, and closes once none has for the grace (5 s).
    @Test func aDrainThatMovesIsAwaitedAndOneThatStandsStillIsClosed() throws {
        let socket = Socket()
        let channel = try Self.downloading(seconds: 10, socket)
        channel.embeddedEventLoop.advanceTime(by: .seconds(10))
        channel.embeddedEventLoop.advanceTime(by: .seconds(4))
        #expect(channel.isActive)
        socket.release(1)  // at 14 s: the drain moved
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(4900))
        #expect(channel.isActive, "closed 8.9 s after the time though the drain moved 4.9 s ago")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(200))
        #expect(!channel.isActive, "still open 5.1 s after the drain last moved")
        let sent = try Self.sent(channel)
        #expect(sent.bytes == Self.blockSize + Self.sliceSize)
    }
}
