@testable import DERP
import NIOCore
import NIOEmbedded
import NIOWebSocket
import Synchronization
import Testing

/// The connection handler on an `EmbeddedChannel`: what it does when its own write ends the
/// connection from inside the read that carried the server's greeting, and how many answers to
/// a relay's pings it lets wait unwritten.
struct DERPConnectionHandlerTests {
    /// What the handler reported to its delegate.
    final class Recorder: DERPConnectionDelegate {
        let packets = Mutex<[DERPReceivedPacket]>([])
        func received(_ packet: DERPReceivedPacket) { packets.withLock { $0.append(packet) } }
        func peerGone(_ key: X25519PublicKey, reason: UInt8) {}
        func health(_ text: String) {}
        func restarting(reconnectIn: UInt32, tryFor: UInt32) {}
    }

    /// Fails every write at once and closes the channel from inside it, as a socket whose
    /// peer has gone does.
    final class FailingWrites: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer
        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            promise?.fail(ChannelError.ioOnClosedChannel)
            context.close(promise: nil)
        }
    }

    /// Holds every write: a relay that reads nothing, once the socket's buffers are full.
    final class HeldWrites: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer
        var held: [EventLoopPromise<Void>?] = []
        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) { held.append(promise) }
        func flush(context: ChannelHandlerContext) {}
    }

    /// A relay that pings and reads nothing: at most ``PingAnswers/maxUnwritten`` pongs wait
    /// (the rest are counted, not queued); once one is written the next ping is answered.
    @Test(arguments: [false, true])
    func pongsWaitingToBeWrittenAreBounded(webSocket: Bool) throws {
        let channel = EmbeddedChannel()
        let loop = channel.embeddedEventLoop
        let client = X25519PrivateKey.generate()
        let server = X25519PrivateKey.generate()
        let counters = DERPCounters()
        let held = HeldWrites()
        try channel.pipeline.syncOperations.addHandler(held)
        if webSocket {
            try channel.pipeline.syncOperations.addHandler(DERPWebSocketAdapter(masking: true))
        } else {
            let setup = DERPConnectionHandler.Setup(
                privateKey: client, node: DERPNode(regionID: 1, hostName: "relay.test"), transport: .upgrade, isHome: false,
                readTimeout: .seconds(60), maxQueuedPackets: 16, maxQueuedBytes: 1 << 20, counters: counters, delegate: Recorder(),
                attempt: DERPConnectAttempt(promise: loop.makePromise(of: DERPConnection.self)),
                ended: loop.makePromise(of: DERPConnectionEnd.self))
            try channel.pipeline.syncOperations.addHandler(DERPConnectionHandler(setup))
        }
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let info = try #require(DERPHandshake.serverInfo(privateKey: server, clientKey: client.publicKey))
        func ping(_ i: UInt8) throws {
            if webSocket {
                let frame = WebSocketFrame(fin: true, opcode: .ping, data: channel.allocator.buffer(bytes: [i]))
                try channel.writeInbound(frame)
            } else {
                try channel.writeInbound(channel.allocator.buffer(bytes: DERPFrame.ping([i, 0, 0, 0, 0, 0, 0, 0]).encoded))
            }
        }
        if !webSocket {
            try channel.writeInbound(channel.allocator.buffer(bytes: DERPFrame.serverKey(server.publicKey).encoded + info.encoded))
        }
        let before = held.held.count
        for i in 0..<100 { try ping(UInt8(i)) }
        #expect(held.held.count - before == PingAnswers.maxUnwritten)
        if !webSocket { #expect(counters.snapshot.drops["pong_backlog"] == 100 - PingAnswers.maxUnwritten) }
        // One written: the next ping is answered again.
        held.held[before]?.succeed()
        try ping(200)
        #expect(held.held.count - before == PingAnswers.maxUnwritten + 1)
        for promise in held.held { promise?.fail(ChannelError.ioOnClosedChannel) }
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }

    /// The client info's write closes the connection: the server info and the packet read
    /// with the greeting are not acted on, the attempt fails and the end is reported.
    @Test func aWriteThatEndsTheConnectionEndsTheHandshake() throws {
        let channel = EmbeddedChannel()
        let loop = channel.embeddedEventLoop
        let client = X25519PrivateKey.generate()
        let server = X25519PrivateKey.generate()
        let recorder = Recorder()
        let ended = loop.makePromise(of: DERPConnectionEnd.self)
        let attempt = DERPConnectAttempt(promise: loop.makePromise(of: DERPConnection.self))
        let setup = DERPConnectionHandler.Setup(
            privateKey: client, node: DERPNode(regionID: 1, hostName: "relay.test"), transport: .upgrade, isHome: true,
            readTimeout: .seconds(60), maxQueuedPackets: 16, maxQueuedBytes: 1 << 20, counters: DERPCounters(), delegate: recorder,
            attempt: attempt, ended: ended)
        try channel.pipeline.syncOperations.addHandlers([FailingWrites(), DERPConnectionHandler(setup)])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()

        let info = try #require(DERPHandshake.serverInfo(privateKey: server, clientKey: client.publicKey))
        let packet = DERPFrame.recvPacket(source: X25519PrivateKey.generate().publicKey, packet: [1, 2, 3])
        let bytes = DERPFrame.serverKey(server.publicKey).encoded + info.encoded + packet.encoded
        _ = try? channel.writeInbound(channel.allocator.buffer(bytes: bytes))

        #expect(!channel.isActive)
        #expect(recorder.packets.withLock { $0.isEmpty }, "a packet read after the connection ended was delivered")
        #expect(throws: (any Error).self) { try attempt.future.wait() }
        #expect(try ended.futureResult.wait().error != nil)
    }
}
