import Glibc
import NIOCore
import NIOPosix
import Synchronization

/// A UDP server on 127.0.0.1 (a real socket, the kernel's port) that sends every datagram
/// back to its sender (or what `answer` makes of it) and records the senders' ports.
final class UDPEchoServer: Sendable {
    let port: Int
    private let channel: any Channel
    private let recorder: SenderRecorder

    static func start(answer: @escaping @Sendable ([UInt8]) -> [UInt8] = { $0 }) async throws -> UDPEchoServer {
        let recorder = SenderRecorder()
        let channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 65536))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(EchoHandler(recorder: recorder, answer: answer)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return UDPEchoServer(channel: channel, recorder: recorder)
    }

    private init(channel: any Channel, recorder: SenderRecorder) {
        self.channel = channel
        self.port = channel.localAddress?.port ?? 0
        self.recorder = recorder
    }

    /// The source ports of the datagrams received, in order.
    var senderPorts: [Int] { recorder.ports }

    func stop() async {
        try? await channel.close()
    }
}

/// Source ports seen by an ``UDPEchoServer``.
final class SenderRecorder: Sendable {
    private let seen = Mutex<[Int]>([])

    func append(_ port: Int) { seen.withLock { $0.append(port) } }
    var ports: [Int] { seen.withLock { $0 } }
}

private final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>
    private let recorder: SenderRecorder
    private let answer: @Sendable ([UInt8]) -> [UInt8]

    init(recorder: SenderRecorder, answer: @escaping @Sendable ([UInt8]) -> [UInt8]) {
        self.recorder = recorder
        self.answer = answer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        recorder.append(envelope.remoteAddress.port ?? 0)
        let data = ByteBuffer(bytes: answer(Array(envelope.data.readableBytesView)))
        context.writeAndFlush(wrapOutboundOut(AddressedEnvelope(remoteAddress: envelope.remoteAddress, data: data)), promise: nil)
    }
}
