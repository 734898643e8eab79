import AgentTestSupport
import BoundaryLogs
import NIOCore
import NIOEmbedded
import Testing

/// Records the decoder's mid-frame events as the connection watch receives them.
private final class MidFrameEvents: ChannelInboundHandler {
    typealias InboundIn = BoundaryFrame
    var events: [BoundaryFrameDecoder.MidFrameChanged] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let change = event as? BoundaryFrameDecoder.MidFrameChanged { events.append(change) }
    }
}

@Suite struct BoundaryFrameDecoderTests {
    /// A read that ends one frame and begins the next says so, so the next frame's deadline
    /// starts then: a producer whose reads keep ending mid-frame is not cut off at the first
    /// frame's deadline (each change of state alone was reported before).
    @Test func aFrameEndedWithTheNextBegunIsReported() throws {
        let events = MidFrameEvents()
        let channel = EmbeddedChannel(handlers: [ByteToMessageHandler(BoundaryFrameDecoder()), events])
        let a = Boundary.v1(Boundary.request(["https://a.invalid/"]))
        let b = Boundary.v1(Boundary.request(["https://b.invalid/"]))
        try channel.writeInbound(ByteBuffer(bytes: a.prefix(3)))
        try channel.writeInbound(ByteBuffer(bytes: a.dropFirst(3) + b.prefix(3)))
        try channel.writeInbound(ByteBuffer(bytes: b.dropFirst(3)))
        #expect(events.events.map { [$0.isMidFrame, $0.endedAFrame] } == [[true, false], [true, true], [false, true]])
        _ = try channel.finish()
    }
}
